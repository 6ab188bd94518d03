//! `Idempotency-Key` on a start: a retried request answers with the run it started (200),
//! before and after a restart; another request under the same key is refused (409); a
//! malformed key is a 400 and starts nothing.

use crate::harness::{assert_error, TestServer};
use apollo11_client::Answer;
use serde_json::{json, Value};

async fn start_keyed(server: &TestServer, key: &str, body: &Value) -> Answer {
    let text = bytes::Bytes::from(body.to_string());
    let headers = [
        ("content-type", "application/json"),
        ("idempotency-key", key),
    ];
    let method = hyper::Method::POST;
    server
        .client
        .send(method, "/api/v1/runs", &headers, text)
        .await
        .unwrap()
}

/// The ids of the runs the server lists.
async fn run_ids(server: &TestServer) -> Vec<String> {
    let page = server.client.get("/api/v1/runs").await.unwrap().json();
    let runs = page["runs"].as_array().unwrap().iter();
    runs.map(|r| r["run_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_retried_start_answers_with_its_run_across_a_restart_and_another_body_is_refused() {
    let mut server = TestServer::start().await;
    let body = json!({"workflow": "quick"});
    let first = start_keyed(&server, "delivery-7f3a", &body).await;
    assert_eq!(first.status, 201, "{}", first.message());
    let run_id = first.json()["run_id"].as_str().unwrap().to_owned();
    assert!(run_id.starts_with("quick-key-"), "{run_id}");
    server
        .wait_for(&run_id, "succeeded", |r| r["state"] == "succeeded")
        .await;

    let again = start_keyed(&server, "delivery-7f3a", &body).await;
    assert_eq!(again.status, 200, "{}", again.message());
    assert_eq!(again.json()["run_id"], json!(run_id));

    let other = json!({"workflow": "quick", "params": {}, "digest": null, "run_id": null});
    assert_eq!(
        start_keyed(&server, "delivery-7f3a", &other).await.status,
        200,
        "the same request"
    );
    let changed = json!({"workflow": "quick", "run_id": run_id});
    assert_error(
        &start_keyed(&server, "delivery-7f3a", &changed).await,
        409,
        "conflict",
    );
    let plain = server.client.post("/api/v1/runs", &changed).await.unwrap();
    assert_error(&plain, 409, "conflict");

    let data = std::mem::replace(&mut server.data, tempfile::tempdir().unwrap());
    server.stop().await;
    let server = TestServer::start_on(data, None, |_| {}).await;
    let after = start_keyed(&server, "delivery-7f3a", &body).await;
    assert_eq!(after.status, 200, "{}", after.message());
    assert_eq!(after.json()["run_id"], json!(run_id));
    let another = start_keyed(&server, "delivery-7f3b", &body).await;
    assert_eq!(another.status, 201, "{}", another.message());
    let mut ids = run_ids(&server).await;
    ids.sort();
    let mut expected = vec![
        run_id,
        another.json()["run_id"].as_str().unwrap().to_owned(),
    ];
    expected.sort();
    assert_eq!(ids, expected, "one run per key");
    server.stop().await;
}

#[tokio::test]
async fn a_malformed_key_is_refused_and_starts_nothing() {
    let server = TestServer::start().await;
    let body = json!({"workflow": "quick"});
    let long = "k".repeat(256);
    for key in ["", long.as_str(), "tab\there"] {
        assert_error(&start_keyed(&server, key, &body).await, 400, "invalid");
    }
    assert!(run_ids(&server).await.is_empty());
    server.stop().await;
}
