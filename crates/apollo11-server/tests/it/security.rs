//! The token, the body cap, hostile paths, and the loopback rule.

use crate::harness::{assert_error, TestServer};
use apollo11_server::client::Client;
use apollo11_server::{ServeError, Server, ServerConfig};
use axum::http::Method;
use bytes::Bytes;
use serde_json::json;

const TOKEN: &str = "a-token-of-24-characters";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_every_api_call_needs_it_and_health_and_ui_do_not() {
    let server = TestServer::start_with(Some(TOKEN)).await;
    let address = server.client.address().to_owned();
    let anonymous = Client::new(address.clone(), None);
    let wrong = Client::new(address, Some("another-token-of-24-chars".into()));
    for path in [
        "/api/v1/runs",
        "/api/v1/workflows",
        "/api/v1/openapi.json",
        "/api/v1/runs/r",
    ] {
        assert_error(&anonymous.get(path).await.unwrap(), 401, "unauthorized");
        assert_error(&wrong.get(path).await.unwrap(), 401, "unauthorized");
    }
    let start = anonymous
        .post("/api/v1/runs", &json!({"workflow": "quick"}))
        .await
        .unwrap();
    assert_error(&start, 401, "unauthorized");
    assert_eq!(server.client.get("/api/v1/runs").await.unwrap().status, 200);
    assert_eq!(anonymous.get("/healthz").await.unwrap().status, 200);
    assert_eq!(anonymous.get("/readyz").await.unwrap().status, 200);
    assert_ne!(anonymous.get("/").await.unwrap().status, 401);
    assert_eq!(
        server.client.get("/api/v1/runs").await.unwrap().json()["runs"],
        json!([]),
        "nothing was started"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_64_kib_is_refused_with_413() {
    let server = TestServer::start().await;
    let big = json!({"workflow": "quick", "run_id": "x".repeat(70 * 1024)});
    assert_error(
        &server.client.post("/api/v1/runs", &big).await.unwrap(),
        413,
        "too_large",
    );
    let note = json!({"by": "me", "reason": "r".repeat(65 * 1024)});
    let pause = server
        .client
        .post("/api/v1/runs/r/pause", &note)
        .await
        .unwrap();
    assert_error(&pause, 413, "too_large");
    server.stop().await;
}

/// Dot segments, encoded slashes and a symlink out of the data dir reach nothing outside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_paths_read_nothing_outside_the_data_dir() {
    let server = TestServer::start().await;
    server.start_run("quick", "r").await;
    server
        .wait_for("r", "succeeded", |r| r["state"] == "succeeded")
        .await;
    let secret = server.workflows.path().join("secret.log");
    std::fs::write(&secret, "SECRET").unwrap();
    let step_dir = server.data.path().join("logs/r/b");
    std::os::unix::fs::symlink(&secret, step_dir.join("7.log")).unwrap();
    let cases = [
        ("/api/v1/runs/r/steps/b/log?attempt=7", 404),
        ("/api/v1/runs/%2E%2E/steps/b/log?attempt=1", 400),
        ("/api/v1/runs/..%2F..%2Fetc/steps/b/log?attempt=1", 400),
        (
            "/api/v1/runs/r/steps/..%2F..%2F..%2Fsecret/log?attempt=1",
            400,
        ),
        ("/api/v1/runs/r/steps/%2E%2E/log?attempt=1", 400),
        (
            "/api/v1/runs/r/steps/b%5C..%5C..%5Csecret/log?attempt=1",
            400,
        ),
        ("/api/v1/runs/r/steps/b/log?attempt=..%2F1", 400),
        ("/api/v1/runs/r/steps/b/log?attempt=1&compensation=..", 400),
        ("/ui/..%2F..%2FCargo.toml", 400),
        ("/ui/%2E%2E", 400),
        ("/ui/secret.log", 404),
    ];
    for (path, status) in cases {
        let answer = server.client.get(path).await.unwrap();
        assert_eq!(answer.status, status, "{path}: {}", answer.message());
        assert!(
            !String::from_utf8_lossy(&answer.body).contains("SECRET"),
            "{path}"
        );
        assert_eq!(
            answer.json()["error"]["code"],
            if status == 400 {
                "invalid"
            } else {
                "not_found"
            }
        );
    }
    // Raw `..` segments, as a client that does not normalize sends them.
    let raw = server
        .client
        .send(
            Method::GET,
            "/api/v1/runs/r/steps/../../../../secret.log",
            &[],
            Bytes::new(),
        )
        .await
        .unwrap();
    assert!(matches!(raw.status, 400 | 404), "{}", raw.status);
    assert!(!String::from_utf8_lossy(&raw.body).contains("SECRET"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_address_is_refused_without_a_token() {
    let data = tempfile::tempdir().unwrap();
    let config = ServerConfig::new(data.path().to_owned(), "0.0.0.0:0".parse().unwrap());
    let refused = Server::bind(config).await.err().expect("refused");
    assert!(matches!(refused, ServeError::Config(_)), "{refused}");
    assert!(refused.to_string().contains("--token-file"), "{refused}");
    assert!(
        !data.path().join("LOCK").exists(),
        "the data dir was not touched"
    );
}
