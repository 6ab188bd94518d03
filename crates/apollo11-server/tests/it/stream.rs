//! The live stream: open at once, resumable without gap or repeat.

use crate::harness::{assert_error, TestServer};
use apollo11_client::Stream;
use serde_json::Value;
use std::time::Duration;

/// Reads messages until `n` events came; returns their `(id, event object)`.
async fn read_events(stream: &mut Stream, n: usize) -> Vec<(u64, Value)> {
    let mut text = String::new();
    let mut events = Vec::new();
    while events.len() < n {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next_chunk())
            .await
            .expect("an event within 10 s")
            .expect("the stream goes on")
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let message: String = text.drain(..end + 2).collect();
            if message.starts_with(':') {
                continue;
            }
            let field = |name: &str| {
                message
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .unwrap()
                    .to_owned()
            };
            assert_eq!(field("event: "), "event");
            let id: u64 = field("id: ").parse().unwrap();
            let data: Value = serde_json::from_str(&field("data: ")).unwrap();
            assert_eq!(data["event_id"], id);
            events.push((id, data));
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_opens_at_once_and_resumes_after_last_event_id_without_gap_or_repeat() {
    let server = TestServer::start().await;
    server.start_run("gated", "g").await;
    server
        .wait_for("g", "waiting", |r| r["steps"]["wait"]["state"] == "running")
        .await;
    // A quiet run: the head arrives though no event is due.
    let mut first = tokio::time::timeout(
        Duration::from_secs(5),
        server.client.stream("/api/v1/runs/g/events/stream", &[]),
    )
    .await
    .expect("the head at once")
    .unwrap();
    assert_eq!(first.status, 200);
    let seen = read_events(&mut first, 2).await;
    assert_eq!(seen[0].1["kind"], "run_created");
    assert_eq!(seen[1].1["kind"], "started");
    drop(first);
    server.open_gate();
    let done = server
        .wait_for("g", "succeeded", |r| r["state"] == "succeeded")
        .await;
    let all = server
        .client
        .get("/api/v1/runs/g/events")
        .await
        .unwrap()
        .json();
    let all: Vec<u64> = all["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_id"].as_u64().unwrap())
        .collect();
    assert_eq!(all.len() as u64, done["events"].as_u64().unwrap());
    let last_seen = seen[0].0.to_string();
    let mut resumed = server
        .client
        .stream(
            "/api/v1/runs/g/events/stream",
            &[("last-event-id", &last_seen)],
        )
        .await
        .unwrap();
    let rest: Vec<u64> = read_events(&mut resumed, all.len() - 1)
        .await
        .iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(rest, all[1..], "no gap, no repeat");
    let mut after = server
        .client
        .stream(
            &format!("/api/v1/runs/g/events/stream?after={}", all[2]),
            &[],
        )
        .await
        .unwrap();
    let rest: Vec<u64> = read_events(&mut after, all.len() - 3)
        .await
        .iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(rest, all[3..]);
    // A finished run allows no rollback.
    let pause = server
        .client
        .post(
            "/api/v1/runs/g/rollback",
            &serde_json::json!({"by": "t", "reason": "r"}),
        )
        .await
        .unwrap();
    assert_error(&pause, 409, "finished");
    let bad = server
        .client
        .stream("/api/v1/runs/g/events/stream", &[("last-event-id", "x")])
        .await
        .unwrap();
    assert_eq!(bad.status, 400);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_delivers_events_appended_after_it_opened() {
    let server = TestServer::start().await;
    server.start_run("stuck", "s").await;
    let run = server
        .wait_for("s", "paused", |r| r["state"] == "paused")
        .await;
    let mut stream = server
        .client
        .stream(
            &format!("/api/v1/runs/s/events/stream?after={}", run["event_id"]),
            &[],
        )
        .await
        .unwrap();
    let note = serde_json::json!({"to": "succeeded", "by": "tester", "reason": "fixed by hand"});
    let overridden = server
        .client
        .post("/api/v1/runs/s/steps/fails/override", &note)
        .await
        .unwrap();
    assert_eq!(overridden.status, 200, "{}", overridden.message());
    let event = &read_events(&mut stream, 1).await[0];
    assert_eq!(event.0, overridden.json()["event_id"].as_u64().unwrap());
    assert_eq!(event.1["kind"], "manual_override");
    assert_eq!(event.1["by"], "tester");
    assert_eq!(event.1["reason"], "fixed by hand");
    assert_eq!(event.1["to"], "succeeded");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_opens_with_a_keep_alive_comment_then_id_event_and_data_lines() {
    let server = TestServer::start().await;
    server.start_run("gated", "g").await;
    let mut stream = server
        .client
        .stream("/api/v1/runs/g/events/stream", &[])
        .await
        .unwrap();
    assert_eq!(stream.status, 200);
    let mut text = String::new();
    while text.matches("\n\n").count() < 2 {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next_chunk())
            .await
            .expect("a message within 10 s")
            .expect("the stream goes on")
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let first = text.strip_prefix(": keep-alive\n\n").expect(&text);
    let lines: Vec<&str> = first.lines().take(3).collect();
    assert_eq!(lines[..2], ["id: 1", "event: event"], "{text}");
    assert!(lines[2].starts_with("data: {"), "{text}");
    server.stop().await;
}
