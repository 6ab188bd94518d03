//! TLS as the URL's `sslmode` asks: against the test server `disable`, `prefer` and
//! (when the server offers TLS) `require` connect; against a server that answers "no TLS",
//! `require` is refused naming TLS; against a private server with TLS on, `verify-full` with
//! the CA that signed its certificate connects, and with another CA is refused.

use crate::tls_server::{refusing_tls, TlsServer};
use apollo11_core::{RunId, Seq};
use apollo11_postgres::{test_url, PgOptions, PgStore};
use apollo11_store::{EventStore, StoreError};
use std::time::Duration;

/// `url` with `param` added to its query.
fn with(url: &str, param: &str) -> String {
    let join = if url.contains('?') { '&' } else { '?' };
    format!("{url}{join}{param}")
}

/// Whether the server of `url` has TLS on.
async fn offers_tls(url: &str) -> bool {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let row = client.query_one("SHOW ssl", &[]).await.unwrap();
    row.get::<_, String>(0) == "on"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disable_prefer_and_require_of_a_server_with_tls_connect() {
    let Some(url) = test_url() else { return };
    let mut modes = vec!["sslmode=disable", "sslmode=prefer"];
    if offers_tls(&url).await {
        modes.push("sslmode=require");
    }
    for mode in modes {
        let store = PgStore::open_scratch(&with(&url, mode)).await.unwrap();
        let run = RunId::from("tls");
        store
            .append(&run, Seq(1), vec![crate::database::created()])
            .await
            .unwrap();
        assert_eq!(
            store.read_run(&run, Seq(1)).await.unwrap().len(),
            1,
            "{mode}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_of_a_server_without_tls_is_refused_naming_tls() {
    let port = refusing_tls();
    let required = PgOptions {
        connect_timeout: Duration::from_secs(2),
        ..PgOptions::new(format!(
            "postgres://postgres@127.0.0.1:{port}/test?sslmode=require"
        ))
    };
    let e = PgStore::open(required).await.unwrap_err();
    assert!(e.to_string().contains("TLS"), "{e}");
    assert!(!e.is_retryable(), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_connects_with_the_servers_ca_and_refuses_another() {
    let Some(server) = TlsServer::start() else {
        return;
    };
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/postgres?sslmode=verify-full&sslrootcert={}",
        server.port,
        server.root().display()
    );
    let store = PgStore::open_scratch(&url).await.unwrap();
    let run = RunId::from("tls");
    store
        .append(&run, Seq(1), vec![crate::database::created()])
        .await
        .unwrap();
    assert_eq!(store.read_run(&run, Seq(1)).await.unwrap().len(), 1);
    // verify-full is `require` to tokio-postgres: no session without TLS.
    // A root that did not sign the server's certificate: refused, and not as a retry.
    let other = std::env::temp_dir().join(format!("apollo11-other-ca-{}.pem", std::process::id()));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=other",
        ])
        .args(["-keyout", "/dev/null", "-out"])
        .arg(&other)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let wrong = PgOptions {
        connect_timeout: Duration::from_secs(2),
        ..PgOptions::new(url.replace(
            &server.root().display().to_string(),
            &other.display().to_string(),
        ))
    };
    let e = PgStore::open(wrong).await.unwrap_err();
    let _ = std::fs::remove_file(&other);
    assert!(matches!(e, StoreError::Backend { .. }), "{e:?}");
    assert!(e.to_string().contains("certificate"), "{e}");
}
