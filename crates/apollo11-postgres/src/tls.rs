//! TLS for the store's connections, as the URL's `sslmode` asks (rustls on ring). `disable`,
//! `prefer` and `require` are tokio-postgres's own: `prefer` falls back to plain text, and
//! neither checks the server's certificate. `verify-ca` (a certificate signed by
//! `sslrootcert`) and `verify-full` (that, and issued for the host connected to) are taken
//! out of the URL here, which then asks tokio-postgres for `require` with a verifier.

use apollo11_store::StoreError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls::{Error, SignatureScheme};
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// What the server's certificate is checked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verify {
    /// Nothing (`disable`, `prefer`, `require`): the connection is encrypted, not
    /// authenticated.
    Nothing,
    /// Signed by a root of `sslrootcert` (`verify-ca`).
    Ca,
    /// That, and issued for the host (`verify-full`).
    Full,
}

/// The URL tokio-postgres is given, and the connector of every connection.
#[derive(Clone)]
pub struct Tls {
    /// The URL without `sslrootcert`, a `verify-*` mode asked as `require`.
    pub url: String,
    /// Makes the TLS session of a connection that asks for one.
    pub connector: MakeRustlsConnect,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

/// The TLS `url` asks for, its `sslrootcert` read.
///
/// # Errors
/// [`StoreError::Invalid`] for a `verify-*` mode without `sslrootcert`, or a root
/// certificate file that cannot be read.
pub fn tls(url: &str) -> Result<Tls, StoreError> {
    let (url, verify, root) = split(url);
    let provider = Arc::new(ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match (verify, root) {
        (Verify::Nothing, _) => Arc::new(Unverified(provider.clone())),
        (_, None) => {
            return Err(invalid(
                "sslmode=verify-ca and verify-full need sslrootcert=FILE (PEM roots)".into(),
            ))
        }
        (_, Some(root)) => {
            let full = WebPkiServerVerifier::builder_with_provider(roots(&root)?, provider.clone())
                .build()
                .map_err(|e| invalid(format!("sslrootcert {root}: {e}")))?;
            Arc::new(Checked { full, verify })
        }
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Tls {
        url,
        connector: MakeRustlsConnect::new(config),
    })
}

/// A connection of its own to `url`, TLS as it asks, for `doing`: the client, and the task
/// that drives the connection (it ends when the client is dropped).
///
/// # Errors
/// As [`tls`], and the connection's failure as [`pg`](crate::error::pg) says.
#[cfg(feature = "testing")]
pub async fn connect(
    url: &str,
    doing: &str,
) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), StoreError> {
    let tls = tls(url)?;
    let (client, connection) = tokio_postgres::connect(&tls.url, tls.connector)
        .await
        .map_err(|e| crate::error::pg(doing, e))?;
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok((client, task))
}

fn invalid(reason: String) -> StoreError {
    StoreError::Invalid {
        what: "database url's TLS settings".into(),
        reason,
    }
}

/// `url` without what tokio-postgres does not know: a `verify-*` `sslmode` (given as
/// `require`) and `sslrootcert` (percent-decoded).
fn split(url: &str) -> (String, Verify, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), Verify::Nothing, None);
    };
    let (mut verify, mut root, mut kept) = (Verify::Nothing, None, Vec::new());
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslmode", "verify-ca")) => verify = Verify::Ca,
            Some(("sslmode", "verify-full")) => verify = Verify::Full,
            Some(("sslrootcert", file)) => root = Some(percent_decoded(file)),
            _ => kept.push(pair),
        }
    }
    if verify != Verify::Nothing {
        kept.push("sslmode=require");
    }
    let url = match kept.is_empty() {
        true => base.to_owned(),
        false => format!("{base}?{}", kept.join("&")),
    };
    (url, verify, root)
}

/// `%XX` escapes as their bytes.
fn percent_decoded(text: &str) -> String {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        let hex = tail
            .get(..2)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(byte)) => {
                bytes.push(byte);
                rest = &tail[2..];
            }
            _ => {
                bytes.push(b);
                rest = tail;
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The PEM certificates of `file`.
fn roots(file: &str) -> Result<Arc<RootCertStore>, StoreError> {
    let read = |e: &dyn std::fmt::Display| invalid(format!("sslrootcert {file}: {e}"));
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(file).map_err(|e| read(&e))? {
        roots
            .add(cert.map_err(|e| read(&e))?)
            .map_err(|e| read(&e))?;
    }
    if roots.is_empty() {
        return Err(read(&"no certificate in the file"));
    }
    Ok(Arc::new(roots))
}

/// `verify-ca` and `verify-full`: the chain checked against the roots; the name too for
/// `verify-full`.
#[derive(Debug)]
struct Checked {
    full: Arc<WebPkiServerVerifier>,
    verify: Verify,
}

impl ServerCertVerifier for Checked {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let checked =
            self.full
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now);
        match checked {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.verify == Verify::Ca => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.full.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.full.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.full.supported_verify_schemes()
    }
}

/// `prefer` and `require`: any certificate, as libpq takes it; the handshake's signatures
/// are still checked, so the session is with the certificate's key holder.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_modes_and_root_files_are_taken_out_of_the_url() {
        let (url, verify, root) =
            split("postgres://h/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&x=1");
        assert_eq!(url, "postgres://h/db?x=1&sslmode=require");
        assert_eq!(
            (verify, root.as_deref()),
            (Verify::Full, Some("/tmp/ca.pem"))
        );
        let (url, verify, _) = split("postgres://h/db?sslmode=verify-ca&sslrootcert=ca.pem");
        assert_eq!(
            (url.as_str(), verify),
            ("postgres://h/db?sslmode=require", Verify::Ca)
        );
        for plain in ["postgres://h/db", "postgres://h/db?sslmode=prefer"] {
            assert_eq!(split(plain), (plain.to_owned(), Verify::Nothing, None));
        }
    }

    #[test]
    fn a_verify_mode_without_roots_or_with_a_missing_file_is_refused() {
        let e = tls("postgres://h/db?sslmode=verify-full").unwrap_err();
        assert!(e.to_string().contains("need sslrootcert"), "{e}");
        let e = tls("postgres://h/db?sslmode=verify-ca&sslrootcert=/no/such.pem").unwrap_err();
        assert!(e.to_string().contains("sslrootcert /no/such.pem"), "{e}");
    }
}
