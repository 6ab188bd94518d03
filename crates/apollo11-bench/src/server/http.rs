//! The load generator's side of HTTP: a kept-alive connection for `GET`s (as a browser
//! keeps one), and a reader of a run's event stream that stamps each event's arrival.

use anyhow::{ensure, Context, Result};
use apollo11_client::{segment, Client, Stream};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::net::TcpStream;

/// One HTTP/1.1 connection, kept alive between requests.
pub struct Conn {
    sender: SendRequest<Empty<Bytes>>,
    host: String,
}

impl Conn {
    /// Connects to `addr`.
    pub async fn open(addr: SocketAddr) -> Result<Conn> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        Ok(Conn {
            sender,
            host: addr.to_string(),
        })
    }

    /// `GET path`, its whole body read; any status but 200 is an error.
    pub async fn get(&mut self, path: &str) -> Result<Bytes> {
        self.sender.ready().await?;
        let request = Request::get(path)
            .header("host", &self.host)
            .body(Empty::new())?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        ensure!(
            status == 200,
            "GET {path}: {status}: {}",
            String::from_utf8_lossy(&body)
        );
        Ok(body)
    }
}

/// Microseconds since the Unix epoch, on the wall clock events are stamped with.
pub fn wall_us() -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH);
    now.map_or(0, |d| d.as_micros() as u64)
}

/// A run's event stream, read message by message.
pub struct Events {
    stream: Stream,
    text: String,
    /// When the bytes in `text` arrived (µs since the epoch).
    read_us: u64,
    /// When its first bytes arrived (µs since the epoch): events stamped later were
    /// appended while it was open.
    pub opened_us: u64,
}

/// One event as it arrived.
pub struct Arrival {
    /// The event object.
    pub event: Value,
    /// When the bytes holding it arrived (µs since the epoch).
    pub at_us: u64,
}

impl Events {
    /// Opens the stream of `run` and waits for its first bytes.
    pub async fn open(client: &Client, run: &str) -> Result<Events> {
        let path = format!("/api/v1/runs/{}/events/stream", segment(run));
        let stream = client
            .stream(&path, &[])
            .await
            .map_err(anyhow::Error::msg)?;
        ensure!(stream.status == 200, "GET {path}: status {}", stream.status);
        let mut events = Events {
            stream,
            text: String::new(),
            read_us: 0,
            opened_us: 0,
        };
        events.read().await.context("the stream's first bytes")?;
        events.opened_us = events.read_us;
        Ok(events)
    }

    /// The next event, skipping comments.
    pub async fn next(&mut self) -> Result<Arrival> {
        loop {
            while let Some(end) = self.text.find("\n\n") {
                let message: String = self.text.drain(..end + 2).collect();
                let data = message.lines().find_map(|l| l.strip_prefix("data: "));
                if let Some(data) = data {
                    let event = serde_json::from_str(data)
                        .with_context(|| format!("an event that is not JSON: {data}"))?;
                    return Ok(Arrival {
                        event,
                        at_us: self.read_us,
                    });
                }
            }
            self.read().await?;
        }
    }

    async fn read(&mut self) -> Result<()> {
        let chunk = self.stream.next_chunk().await;
        let chunk = chunk
            .context("the stream ended")?
            .map_err(anyhow::Error::msg)?;
        self.read_us = wall_us();
        self.text.push_str(&String::from_utf8_lossy(&chunk));
        Ok(())
    }
}
