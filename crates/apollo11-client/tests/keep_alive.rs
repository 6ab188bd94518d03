//! The client's keep-alive: whole exchanges share a connection, a closed one is replaced,
//! and a stream takes a connection of its own.

use apollo11_client::Client;
use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::TcpListener;

/// A server on a free loopback port that answers `ok` and counts the connections it
/// accepted; `keep_alive` false closes each connection after its answer.
async fn counting_server(keep_alive: bool) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let answer = service_fn(|_: Request<hyper::body::Incoming>| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
            });
            let connection = http1::Builder::new()
                .keep_alive(keep_alive)
                .serve_connection(TokioIo::new(stream), answer);
            tokio::spawn(connection);
        }
    });
    (address, accepted)
}

#[tokio::test]
async fn whole_exchanges_share_one_connection() {
    let (address, accepted) = counting_server(true).await;
    let client = Client::new(address, None);
    for _ in 0..5 {
        let answer = client.get("/").await.expect("answer");
        assert_eq!((answer.status, &answer.body[..]), (200, &b"ok"[..]));
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    let shared = client.clone();
    shared.get("/").await.expect("answer through a clone");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "clones share connections"
    );
}

#[tokio::test]
async fn a_connection_the_server_closed_is_replaced() {
    let (address, accepted) = counting_server(false).await;
    let client = Client::new(address, None);
    for _ in 0..3 {
        let answer = client.get("/").await.expect("answer");
        assert_eq!(answer.status, 200);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_stream_takes_a_connection_of_its_own() {
    let (address, accepted) = counting_server(true).await;
    let client = Client::new(address, None);
    client.get("/").await.expect("answer");
    let stream = client.stream("/", &[]).await.expect("stream");
    assert_eq!(stream.status, 200);
    client.get("/").await.expect("answer beside the stream");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}
