//! A minimal HTTP/1.1 client for the xtasks that drive `apollo11 serve` (std only, one
//! request per connection).

use anyhow::{Context, Result};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

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

/// What `stream` saw: the status, how long the response headers took, the events read.
pub struct Streamed {
    pub status: u16,
    pub headers_after: Duration,
    pub events: usize,
}

/// Opens the server-sent events stream `GET path` on `addr`, reads it for `listen`, closes it.
pub fn stream(addr: &str, path: &str, listen: Duration) -> Result<Streamed> {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    )?;
    let (mut text, mut buf, mut headers_after) = (Vec::new(), [0u8; 8192], None);
    while started.elapsed() < listen {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e).with_context(|| format!("reading GET {path} from {addr}")),
        }
        if headers_after.is_none() && text.windows(4).any(|w| w == b"\r\n\r\n") {
            headers_after = Some(started.elapsed());
        }
    }
    let text = String::from_utf8_lossy(&text);
    let status = text
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("GET {path} on {addr}: no HTTP answer in {listen:?}"))?;
    Ok(Streamed {
        status,
        headers_after: headers_after.unwrap_or(listen),
        events: text.lines().filter(|l| l.starts_with("id:")).count(),
    })
}
