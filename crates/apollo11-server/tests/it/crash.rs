//! A server killed with `kill -9` mid-run, and a new one on the same data dir: it resumes the
//! interrupted run (the attempt left running is marked interrupted, which spends none of its
//! one attempt, and run again rather than rolled back), and the run succeeds. The servers are
//! this test binary run again as a child process.

use crate::harness::{wait_for, write_workflows};
use apollo11_client::Client;
use apollo11_server::{Server, ServerConfig};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const CHILD_DATA: &str = "APOLLO11_TEST_SERVE_DATA";
const CHILD_WORKFLOWS: &str = "APOLLO11_TEST_SERVE_WORKFLOWS";

/// `book` (its compensation touches `unbooked`), then `wait`, allowed one attempt, which
/// waits for the file `gate`; a failure for good rolls the run back.
const ONCE: &str = r#"[workflow]
name = "once"
on_failure = "rollback"
[[steps]]
name = "book"
run = "true"
compensate = "touch unbooked"
idempotency = "keyed"
[[steps]]
name = "wait"
run = "while [ ! -f gate ]; do sleep 0.02; done"
idempotency = "natural"
depends_on = ["book"]
retry = { max_attempts = 1 }
"#;

/// The body of the child process: serves until killed. Without the variables it is not in a
/// child and returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_serves_until_killed() {
    let (Ok(data), Ok(workflows)) = (std::env::var(CHILD_DATA), std::env::var(CHILD_WORKFLOWS))
    else {
        return;
    };
    let mut config = ServerConfig::new(data.into(), "127.0.0.1:0".parse().unwrap());
    config.workflows = Some(workflows.into());
    let server = Server::bind(config).await.unwrap();
    println!("listening {}", server.local_addr());
    server.run(std::future::pending()).await.unwrap();
}

/// Starts a child server; returns it and its address.
fn spawn_server(data: &std::path::Path, workflows: &std::path::Path) -> (Child, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash::child_serves_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DATA, data)
        .env(CHILD_WORKFLOWS, workflows)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let address = loop {
        let line = lines
            .next()
            .expect("the child says where it listens")
            .unwrap();
        if let Some(at) = line.find("listening ") {
            break line[at + "listening ".len()..].trim().to_owned();
        }
    };
    (child, address)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_with_sigkill_and_restarted_resumes_the_interrupted_run() {
    let data = tempfile::tempdir().unwrap();
    let workflows = tempfile::tempdir().unwrap();
    write_workflows(workflows.path());
    std::fs::write(workflows.path().join("once.toml"), ONCE).unwrap();
    let (mut first, address) = spawn_server(data.path(), workflows.path());
    let client = Client::new(address, None);
    let started = client
        .post(
            "/api/v1/runs",
            &serde_json::json!({"workflow": "once", "run_id": "g"}),
        )
        .await
        .unwrap();
    assert_eq!(started.status, 201, "{}", started.message());
    wait_for(&client, "g", "waiting", |r| {
        r["steps"]["wait"]["state"] == "running"
    })
    .await;
    // A second run paused by an operator must stay paused across the crash.
    let held = client
        .post(
            "/api/v1/runs",
            &serde_json::json!({"workflow": "gated", "run_id": "held"}),
        )
        .await
        .unwrap();
    assert_eq!(held.status, 201);
    let note = serde_json::json!({"by": "t", "reason": "keep it"});
    assert_eq!(
        client
            .post("/api/v1/runs/held/pause", &note)
            .await
            .unwrap()
            .status,
        202
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    first.wait().unwrap();
    // Lets the attempt the crash orphaned finish, and the next one.
    std::fs::write(workflows.path().join("gate"), "").unwrap();
    let (mut second, address) = spawn_server(data.path(), workflows.path());
    let client = Client::new(address, None);
    let run = wait_for(&client, "g", "succeeded", |r| r["state"] == "succeeded").await;
    assert_eq!(run["steps"]["wait"]["attempt"], 2, "{run}");
    let events = client.get("/api/v1/runs/g/events").await.unwrap().json();
    let interrupted = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "interrupted" && e["step"] == "wait" && e["attempt"] == 1);
    assert!(interrupted, "{events}");
    assert!(
        !workflows.path().join("unbooked").exists(),
        "nothing rolled back"
    );
    let held = client.get("/api/v1/runs/held").await.unwrap().json();
    assert!(held["steps"]["after"]["state"] == "pending", "{held}");
    assert_eq!(held["allowed"]["resume"], true, "{held}");
    second.kill().unwrap();
    second.wait().unwrap();
}
