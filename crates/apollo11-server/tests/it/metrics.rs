//! `/metrics`: the Prometheus text of the process's recorder, behind the token, accepted by
//! Prometheus's own parser (`promtool check metrics`); the workers' gauges, counters and
//! queue wait as a worker takes, loses and finishes tries.

use crate::harness::{assert_error, TestServer};
use apollo11_client::Client;
use apollo11_prometheus::Prometheus;
use apollo11_server::metrics;
use serde_json::{json, Value};
use std::sync::OnceLock;
use std::time::Duration;

const TOKEN: &str = "a-token-of-24-characters";

/// The process's recorder: one per process, installed by the first test that asks.
fn recorder() -> Prometheus {
    static RECORDER: OnceLock<Prometheus> = OnceLock::new();
    (RECORDER.get_or_init(|| metrics::install().unwrap())).clone()
}

#[tokio::test]
async fn metrics_are_the_recorders_text_behind_the_token() {
    let recorder = recorder();
    let server = TestServer::start_configured(Some(TOKEN), |c| c.metrics = Some(recorder)).await;
    server.start_run("quick", "scraped").await;
    server
        .wait_for("scraped", "succeeded", |r| r["state"] == "succeeded")
        .await;

    let anonymous = Client::new(server.client.address().to_owned(), None);
    assert_error(
        &anonymous.get("/metrics").await.unwrap(),
        401,
        "unauthorized",
    );

    let answer = server.client.get("/metrics").await.unwrap();
    assert_eq!(answer.status, 200, "{}", answer.message());
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = std::str::from_utf8(&answer.body).unwrap();
    let succeeded = text
        .lines()
        .find(|l| {
            l.starts_with("apollo11_step_attempts_total{")
                && l.contains(r#"workflow="quick""#)
                && l.contains(r#"outcome="succeeded""#)
        })
        .unwrap_or_else(|| panic!("no succeeded attempts of quick in:\n{text}"));
    let count: f64 = succeeded.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 2.0, "{succeeded}");
    assert!(
        text.contains("# TYPE apollo11_fsync_seconds histogram"),
        "{text}"
    );
    assert!(
        text.contains("# HELP apollo11_step_attempts_total "),
        "{text}"
    );
    server.stop().await;
}

/// The value of the series `series` (its name and labels, as rendered) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    let line = text
        .lines()
        .find(|l| l.rsplit_once(' ').map(|(s, _)| s) == Some(series))?;
    line.rsplit(' ').next()?.parse().ok()
}

/// Scrapes `/metrics`, checked by promtool.
async fn scrape(server: &TestServer) -> String {
    let answer = server.client.get("/metrics").await.unwrap();
    assert_eq!(answer.status, 200, "{}", answer.message());
    let text = String::from_utf8(answer.body.to_vec()).unwrap();
    apollo11_prometheus::promtool::assert_accepted(&text);
    text
}

/// A worker's call: its answer's status and body.
async fn worker_call(server: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let answer = server.client.post(path, &body).await.unwrap();
    (answer.status, answer.json())
}

fn hello(name: &str) -> Value {
    json!({"name": name, "labels": {"role": "db"}, "slots": 2, "version": "test"})
}

/// `name` takes the tries waiting for it (waiting up to 5 s for one); their tokens.
async fn take(server: &TestServer, name: &str) -> Vec<String> {
    take_waiting(server, name, 5000).await
}

/// A poll waiting up to `wait_ms`. Only its start says the worker is alive (a worker
/// heartbeats beside its polls): a poll longer than the heartbeat timeout outlives it.
async fn take_waiting(server: &TestServer, name: &str, wait_ms: u64) -> Vec<String> {
    let body = json!({"worker": hello(name), "free": 2, "wait_ms": wait_ms});
    let (status, taken) = worker_call(server, "/api/v1/worker/take", body).await;
    assert_eq!(status, 200, "{taken}");
    let tries = taken["tries"].as_array().unwrap().iter();
    tries
        .map(|t| t["token"].as_str().unwrap().to_owned())
        .collect()
}

async fn result(server: &TestServer, worker: &str, token: &str) -> u16 {
    let body = json!({"worker": worker, "outcome": {"ok": true}});
    let path = format!("/api/v1/worker/tries/{token}/result");
    worker_call(server, &path, body).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_metrics_follow_a_try_queued_taken_lost_and_finished() {
    let recorder = recorder();
    let server = TestServer::start_configured(Some(TOKEN), |c| {
        c.metrics = Some(recorder);
        c.dispatch.heartbeat_timeout = Duration::from_secs(1);
    })
    .await;
    server.start_run("placed", "placed").await;
    let queued = r#"apollo11_worker_queued_tries{needs="role=db",matched="false"}"#;
    let mut text = String::new();
    for _ in 0..250 {
        text = scrape(&server).await;
        if sample(&text, queued).is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sample(&text, queued), Some(1.0), "{text}");
    assert_eq!(sample(&text, "apollo11_workers_connected"), Some(0.0));
    assert_eq!(sample(&text, "apollo11_workers_lost_total"), Some(0.0));

    let first = take(&server, "w1").await;
    assert_eq!(first.len(), 1);
    let text = scrape(&server).await;
    assert_eq!(sample(&text, queued), None, "{text}");
    assert_eq!(sample(&text, "apollo11_workers_connected"), Some(1.0));
    assert_eq!(
        sample(&text, r#"apollo11_worker_slots{state="total"}"#),
        Some(2.0)
    );
    assert_eq!(
        sample(&text, r#"apollo11_worker_slots{state="busy"}"#),
        Some(1.0)
    );
    let waits = "apollo11_worker_queue_wait_seconds_count";
    assert_eq!(sample(&text, waits), Some(1.0), "{text}");

    // w1 goes silent: lost with its try past the heartbeat timeout; the retry goes to w2.
    let mut second = Vec::new();
    for _ in 0..100 {
        second = take_waiting(&server, "w2", 200).await;
        if !second.is_empty() {
            break;
        }
    }
    assert_eq!(second.len(), 1, "the retry after w1 was lost");
    let started = json!({"worker": "w2", "host": "h2", "handle": "{}"});
    let path = format!("/api/v1/worker/tries/{}/started", second[0]);
    assert_eq!(worker_call(&server, &path, started).await.0, 200);
    assert_eq!(result(&server, "w2", &second[0]).await, 200);
    assert_eq!(
        result(&server, "w1", &first[0]).await,
        409,
        "decided without it"
    );
    assert_eq!(result(&server, "w2", "00feed").await, 503, "unknown");
    server
        .wait_for("placed", "succeeded", |r| r["state"] == "succeeded")
        .await;
    let beat = json!({"worker": hello("w2"), "running": []});
    worker_call(&server, "/api/v1/worker/heartbeat", beat).await;
    let text = scrape(&server).await;
    for (series, value) in [
        ("apollo11_workers_connected", 1.0),
        (r#"apollo11_worker_slots{state="busy"}"#, 0.0),
        ("apollo11_workers_lost_total", 1.0),
        (waits, 2.0),
        (
            r#"apollo11_worker_results_refused_total{reason="decided"}"#,
            1.0,
        ),
        (
            r#"apollo11_worker_results_refused_total{reason="unknown"}"#,
            1.0,
        ),
    ] {
        assert_eq!(sample(&text, series), Some(value), "{series} in:\n{text}");
    }
    assert!(
        text.contains("# HELP apollo11_worker_queued_tries "),
        "{text}"
    );
    assert!(text.contains("# TYPE apollo11_worker_queue_wait_seconds histogram"));
    server.stop().await;
}

#[tokio::test]
async fn a_server_without_a_recorder_answers_404() {
    let server = TestServer::start().await;
    assert_error(
        &server.client.get("/metrics").await.unwrap(),
        404,
        "not_found",
    );
    server.stop().await;
}
