//! What keeps other web pages away from a server a browser can reach. A page of any site
//! may send requests to a loopback address, and a name of the attacker's that resolves to it
//! (DNS rebinding) makes the browser treat the server as that site. So:
//!
//! - every request's `Host` must name this server ([`Hosts`]): its bound address, the
//!   loopback names when it listens on loopback (or on every address), or a name given with
//!   `--allow-host` (403 otherwise). A request without `Host` (no browser sends one) passes.
//! - every mutation needs `Content-Type: application/json` (415 otherwise): a page of
//!   another site cannot send that type without the server's consent (a CORS preflight this
//!   server never grants), only forms' types and `text/plain`.
//! - a mutation whose `Origin` is not this server is refused (403), `Origin: null` too.

use crate::ApiError;
use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::Response;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// The names a request's `Host` may give this server.
#[derive(Clone, Debug)]
pub struct Hosts {
    bound: SocketAddr,
    /// `--allow-host` names: `(host, port)` in lower case, any port when `None`.
    names: Vec<(String, Option<u16>)>,
}

impl Hosts {
    /// The names of a server bound to `bound`, with `allowed` (each `NAME` or `NAME:PORT`).
    ///
    /// # Errors
    ///
    /// A name that is not a host name or address with an optional port, naming it.
    pub fn new(bound: SocketAddr, allowed: &[String]) -> Result<Hosts, String> {
        let names = allowed
            .iter()
            .map(|name| {
                split(name)
                    .ok_or_else(|| format!("--allow-host `{name}`: not a host name, or NAME:PORT"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Hosts { bound, names })
    }

    /// Whether `value`, a `Host` header or a request's authority, names this server.
    pub fn allows(&self, value: &str) -> bool {
        let Some((host, port)) = split(value) else {
            return false;
        };
        let port = port.unwrap_or(80);
        let named =
            |(name, only): &(String, Option<u16>)| *name == host && only.is_none_or(|p| p == port);
        if self.names.iter().any(named) {
            return true;
        }
        if port != self.bound.port() {
            return false;
        }
        let bound = self.bound.ip();
        let local = bound.is_loopback() || bound.is_unspecified();
        match host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            Ok(ip) => ip == bound || bound.is_unspecified() || (local && ip.is_loopback()),
            Err(_) => local && host == "localhost",
        }
    }
}

/// `host[:port]` as `(host in lower case, port)`; `None` unless it is a plain authority.
fn split(value: &str) -> Option<(String, Option<u16>)> {
    let authority: Authority = value.parse().ok()?;
    if authority.as_str().contains('@') || authority.host().is_empty() {
        return None;
    }
    Some((authority.host().to_ascii_lowercase(), authority.port_u16()))
}

/// Refuses a request whose `Host` (or authority) does not name this server.
pub async fn require_host(
    State(hosts): State<Arc<Hosts>>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let given = request.uri().authority().map(|a| a.as_str().to_owned());
    let headers = request.headers().get_all(header::HOST).iter();
    let named = headers.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    if let Some(foreign) = given.into_iter().chain(named).find(|h| !hosts.allows(h)) {
        return Err(ApiError::Forbidden(format!(
            "Host `{}` is not a name of this server (it listens on {}): a page of another \
                 site may not reach it under a name of its own; serve with --allow-host NAME \
                 to answer to NAME",
            foreign.escape_debug(),
            hosts.bound
        )));
    }
    Ok(next.run(request).await)
}

/// Refuses a mutation that is not JSON or comes from a page of another site.
pub async fn require_same_site_json(request: Request, next: Next) -> Result<Response, ApiError> {
    let host = match request.headers().get(header::HOST) {
        Some(host) => host.to_str().ok().map(str::to_owned),
        None => request.uri().authority().map(|a| a.as_str().to_owned()),
    };
    same_origin(request.headers(), host.as_deref())?;
    json_body(request.headers())?;
    Ok(next.run(request).await)
}

/// 415 unless the request says `Content-Type: application/json`.
fn json_body(headers: &HeaderMap) -> Result<(), ApiError> {
    let given = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let essence = given.as_deref().map(|t| t.split(';').next().unwrap_or(t));
    if essence.is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json")) {
        return Ok(());
    }
    let had = match &given {
        Some(t) => format!("`{}`", t.escape_debug()),
        None => "none".to_owned(),
    };
    Err(ApiError::UnsupportedMediaType(format!("this request changes something and needs `Content-Type: application/json`; its content type is {had}"),
    ))
}

/// 403 when an `Origin` is given and is not the site of the request's `host`.
fn same_origin(headers: &HeaderMap, host: Option<&str>) -> Result<(), ApiError> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = String::from_utf8_lossy(origin.as_bytes()).into_owned();
    let site = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    if site.is_some_and(|site| host.is_some_and(|host| site.eq_ignore_ascii_case(host))) {
        return Ok(());
    }
    Err(ApiError::Forbidden(format!(
        "Origin `{}` is another site than this server's: a page may only change something \
             on the server that served it",
        origin.escape_debug()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(bound: &str, allowed: &[&str]) -> Hosts {
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        Hosts::new(bound.parse().unwrap(), &allowed).unwrap()
    }

    #[test]
    fn a_loopback_server_answers_to_its_address_and_the_loopback_names_at_its_port() {
        let h = hosts("127.0.0.1:8711", &[]);
        for ok in [
            "127.0.0.1:8711",
            "localhost:8711",
            "LocalHost:8711",
            "[::1]:8711",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
        for refused in [
            "attacker.example:8711",
            "localhost:8712",
            "127.0.0.1",
            "localhost",
            "10.0.0.1:8711",
            "user@localhost:8711",
            "",
            "local host:8711",
        ] {
            assert!(!h.allows(refused), "{refused}");
        }
    }

    #[test]
    fn allowed_names_match_any_port_unless_they_give_one() {
        let h = hosts("127.0.0.1:8711", &["apollo.internal", "Proxy.Example:443"]);
        assert!(h.allows("apollo.internal:8711"));
        assert!(h.allows("apollo.internal"));
        assert!(h.allows("proxy.example:443"));
        assert!(!h.allows("proxy.example:8711"));
        assert!(!h.allows("other.internal:8711"));
    }

    #[test]
    fn a_server_on_every_address_answers_to_any_address_but_no_other_name() {
        let h = hosts("0.0.0.0:8711", &[]);
        assert!(h.allows("192.168.1.20:8711"));
        assert!(h.allows("0.0.0.0:8711"));
        assert!(h.allows("localhost:8711"));
        assert!(!h.allows("attacker.example:8711"));
        let h = hosts("192.168.1.20:8711", &[]);
        assert!(h.allows("192.168.1.20:8711"));
        assert!(!h.allows("localhost:8711"));
        assert!(!h.allows("127.0.0.1:8711"));
    }

    #[test]
    fn an_allowed_name_must_be_a_host() {
        let bound = "127.0.0.1:1".parse().unwrap();
        for bad in ["", "a b", "x@y", "http://x/"] {
            let e = Hosts::new(bound, &[bad.to_owned()]).unwrap_err();
            assert!(e.contains("--allow-host"), "{e}");
        }
    }
}
