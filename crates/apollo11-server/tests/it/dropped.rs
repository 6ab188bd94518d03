//! A request dropped half-way (its client gave up waiting and closed the connection) must not
//! leave a run created with nothing driving it: a start and an action run on a task of their
//! own, to their end.

use crate::harness::write_workflows;
use apollo11_server::{Server, ServerConfig};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use std::future::Future;
use std::task::Poll;
use std::time::{Duration, Instant};
use tower::ServiceExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_whose_request_is_dropped_at_its_first_poll_still_runs_to_its_end() {
    let data = tempfile::tempdir().unwrap();
    let workflows = tempfile::tempdir().unwrap();
    write_workflows(workflows.path());
    let mut config = ServerConfig::new(data.path().to_owned(), "127.0.0.1:0".parse().unwrap());
    config.workflows = Some(workflows.path().to_owned());
    let server = Server::bind(config).await.unwrap();
    let router = server.router();
    let start = Request::post("/api/v1/runs")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"workflow":"quick","run_id":"dropped"}"#))
        .unwrap();
    // The request polled exactly once, then dropped: the start is under way (its append handed
    // to the log's writer), and nobody waits for its answer any more.
    {
        let mut answer = std::pin::pin!(router.clone().oneshot(start));
        let first = std::future::poll_fn(|cx| Poll::Ready(answer.as_mut().poll(cx))).await;
        assert!(first.is_pending(), "the start answered at its first poll");
    } // the request is dropped here
    let deadline = Instant::now() + Duration::from_secs(20);
    let state = loop {
        let status = Request::get("/api/v1/runs/dropped")
            .body(Body::empty())
            .unwrap();
        let answer = router.clone().oneshot(status).await.unwrap();
        let code = answer.status();
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        let state = (code == StatusCode::OK)
            .then(|| serde_json::from_slice::<Value>(&body).unwrap()["state"].clone());
        if state.as_ref().is_some_and(|s| s == "succeeded") || Instant::now() > deadline {
            break state;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        state,
        Some(Value::from("succeeded")),
        "the run of the dropped start never ended (404 when it was never created)"
    );
    drop(server);
}
