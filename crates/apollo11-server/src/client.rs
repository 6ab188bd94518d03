//! A small HTTP/1.1 client of the API (hyper over a tokio `TcpStream`): what the command
//! line uses to reach a server that holds the data dir, and what the tests use.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::time::Duration;
use tokio::net::TcpStream;

/// How long connecting and each answer may take.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// A client of one server.
#[derive(Clone, Debug)]
pub struct Client {
    address: String,
    token: Option<String>,
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

    /// Any request; the whole answer is read.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Answer, String> {
        let response = self.open(method, path, headers, body).await?;
        let status = response.status().as_u16();
        let headers = header_pairs(&response);
        let body = tokio::time::timeout(TIMEOUT, response.into_body().collect())
            .await
            .map_err(|_| format!("{}: no answer in {TIMEOUT:?}", self.address))?
            .map_err(|e| format!("{}: {e}", self.address))?
            .to_bytes();
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// Sends a request and returns the response as soon as its head arrives, its body to be
    /// read as it comes (a stream of events).
    pub async fn open(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Response<Incoming>, String> {
        let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", self.address);
        let stream = tokio::time::timeout(TIMEOUT, TcpStream::connect(&self.address))
            .await
            .map_err(|_| fail(&"no connection in 30 s"))?
            .map_err(|e| fail(&e))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| fail(&e))?;
        tokio::spawn(connection);
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
        let request = request.body(Full::new(body)).map_err(|e| fail(&e))?;
        tokio::time::timeout(TIMEOUT, sender.send_request(request))
            .await
            .map_err(|_| fail(&"no answer in 30 s"))?
            .map_err(|e| fail(&e))
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
