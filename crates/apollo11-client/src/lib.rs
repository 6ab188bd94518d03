#![doc = include_str!("../README.md")]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// The largest log chunk a worker sends, before base64.
pub const LOG_CHUNK_BYTES_MAX: usize = 1024 * 1024;

/// How long connecting and each answer may take.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The most idle connections a client keeps.
pub const IDLE_CONNECTIONS_MAX: usize = 8;

/// How long an idle connection is kept for reuse: well under the server's default time to
/// send a request's head, which closes an idle connection.
pub const IDLE_KEEP: Duration = Duration::from_secs(2);

/// How long a kept connection may take to be ready for the next request.
const READY_WAIT: Duration = Duration::from_millis(200);

type Sender = SendRequest<Full<Bytes>>;

/// A client of one server. Clones share its idle connections.
#[derive(Clone, Debug)]
pub struct Client {
    address: String,
    token: Option<String>,
    idle: Arc<Mutex<Vec<(Sender, Instant)>>>,
}

/// An answer: its status and body.
#[derive(Clone, Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Bytes,
}

impl Answer {
    /// The body as JSON (`null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The error object's message, or the body as text.
    pub fn message(&self) -> String {
        match self.json()["error"]["message"].as_str() {
            Some(message) => message.to_owned(),
            None => String::from_utf8_lossy(&self.body).into_owned(),
        }
    }
}

impl Client {
    /// A client of the server at `address` (`host:port`), sending `token` if given.
    pub fn new(address: impl Into<String>, token: Option<String>) -> Client {
        Client {
            address: address.into(),
            token,
            idle: Arc::default(),
        }
    }

    /// The server's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Result<Answer, String> {
        self.send(Method::GET, path, &[], Bytes::new()).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Answer, String> {
        let body = Bytes::from(body.to_string());
        let headers = [("content-type", "application/json")];
        self.send(Method::POST, path, &headers, body).await
    }

    /// Any request; the whole answer is read, on an idle connection when one is kept.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Answer, String> {
        let request = self.request(method, path, headers, body)?;
        let (response, sender) = self.exchange(request).await?;
        let status = response.status().as_u16();
        let headers = header_pairs(&response);
        let body = tokio::time::timeout(TIMEOUT, response.into_body().collect())
            .await
            .map_err(|_| format!("{}: no answer in {TIMEOUT:?}", self.address))?
            .map_err(|e| format!("{}: {e}", self.address))?
            .to_bytes();
        self.keep(sender);
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// Sends a request and returns the response as soon as its head arrives, its body to be
    /// read as it comes (a stream of events), on a connection of its own.
    pub async fn open(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Response<Incoming>, String> {
        let request = self.request(method, path, headers, body)?;
        let mut sender = self.connect().await?;
        tokio::time::timeout(TIMEOUT, sender.send_request(request))
            .await
            .map_err(|_| self.failed(&"no answer in 30 s"))?
            .map_err(|e| self.failed(&e))
    }

    /// Sends `request` on an idle connection, or on a new one when none is kept or the
    /// idle one turns out closed before the request went out.
    async fn exchange(
        &self,
        mut request: Request<Full<Bytes>>,
    ) -> Result<(Response<Incoming>, Sender), String> {
        while let Some(mut sender) = self.idle_sender().await {
            let sent = tokio::time::timeout(TIMEOUT, sender.try_send_request(request)).await;
            match sent.map_err(|_| self.failed(&"no answer in 30 s"))? {
                Ok(response) => return Ok((response, sender)),
                Err(mut refused) => match refused.take_message() {
                    Some(unsent) => request = unsent,
                    None => return Err(self.failed(refused.error())),
                },
            }
        }
        let mut sender = self.connect().await?;
        let response = tokio::time::timeout(TIMEOUT, sender.send_request(request))
            .await
            .map_err(|_| self.failed(&"no answer in 30 s"))?
            .map_err(|e| self.failed(&e))?;
        Ok((response, sender))
    }

    /// The most recently used idle connection kept less than [`IDLE_KEEP`] that is open and
    /// ready for a request.
    async fn idle_sender(&self) -> Option<Sender> {
        while let Some(mut sender) = self.pop_idle() {
            if let Ok(Ok(())) = tokio::time::timeout(READY_WAIT, sender.ready()).await {
                return Some(sender);
            }
        }
        None
    }

    fn pop_idle(&self) -> Option<Sender> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((sender, since)) = idle.pop() {
            if !sender.is_closed() && since.elapsed() < IDLE_KEEP {
                return Some(sender);
            }
        }
        None
    }

    /// Keeps a connection whose answer was read whole, for the next request.
    fn keep(&self, sender: Sender) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < IDLE_CONNECTIONS_MAX && !sender.is_closed() {
            idle.push((sender, Instant::now()));
        }
    }

    async fn connect(&self) -> Result<Sender, String> {
        let stream = tokio::time::timeout(TIMEOUT, TcpStream::connect(&self.address))
            .await
            .map_err(|_| self.failed(&"no connection in 30 s"))?
            .map_err(|e| self.failed(&e))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| self.failed(&e))?;
        tokio::spawn(connection);
        Ok(sender)
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, String> {
        let mut request = Request::builder().method(method).uri(path);
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("host"))
        {
            request = request.header("host", &self.address);
        }
        if let Some(token) = &self.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(Full::new(body)).map_err(|e| self.failed(&e))
    }

    fn failed(&self, e: &dyn std::fmt::Display) -> String {
        format!("{}: {e}", self.address)
    }
}

fn header_pairs(response: &Response<Incoming>) -> Vec<(String, String)> {
    response
        .headers()
        .iter()
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect()
}

/// A response whose body is read as it comes (a stream of events).
pub struct Stream {
    /// The status code.
    pub status: u16,
    body: Incoming,
}

impl Stream {
    /// The next piece of the body as it arrived; `None` at its end.
    pub async fn next_chunk(&mut self) -> Option<Result<Bytes, String>> {
        loop {
            match self.body.frame().await? {
                Ok(frame) => match frame.into_data() {
                    Ok(data) => return Some(Ok(data)),
                    Err(_) => continue,
                },
                Err(e) => return Some(Err(e.to_string())),
            }
        }
    }
}

impl Client {
    /// `GET path` with `headers`, answered as soon as the head arrives.
    pub async fn stream(&self, path: &str, headers: &[(&str, &str)]) -> Result<Stream, String> {
        let response = self.open(Method::GET, path, headers, Bytes::new()).await?;
        Ok(Stream {
            status: response.status().as_u16(),
            body: response.into_body(),
        })
    }
}

/// A name (a run id, a step) as one path segment: every byte but letters and digits
/// percent-encoded.
pub fn segment(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC).to_string()
}
