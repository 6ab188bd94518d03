//! A minimal HTTP/1.1 client for the xtasks that drive `apollo11 serve` (std only, one
//! request per connection).

use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends `method path` with an optional JSON body to `addr`; returns the status and body.
pub fn request(addr: &str, method: &str, path: &str, body: Option<&str>) -> Result<(u16, String)> {
    send(addr, "", method, path, body)
}

/// [`request`] with `Authorization: Bearer token`.
pub fn authorized(
    addr: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(u16, String)> {
    send(
        addr,
        &format!("Authorization: Bearer {token}\r\n"),
        method,
        path,
        body,
    )
}

/// Sends the request with `headers` (whole lines, each ending in CRLF) added.
fn send(
    addr: &str,
    headers: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .with_context(|| format!("reading the answer of {method} {path} from {addr}"))?;
    let status = answer
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("{method} {path} on {addr}: not an HTTP answer: {answer:?}"))?;
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((status, body.to_owned()))
}
