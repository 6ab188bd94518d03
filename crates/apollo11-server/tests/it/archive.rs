//! A run only the data dir's archive files hold (as after `gc` moved it out of the live log;
//! here its archive file, written from another data dir, is copied in): the server answers
//! about it from the archive as the server it ran on did.

use crate::harness::TestServer;
use apollo11_core::RunId;
use apollo11_log::{FileLog, Options};
use serde_json::Value;

/// The answers about `run` that an archive must keep: the run object, at its first event
/// too, and its events.
async fn answers(server: &TestServer, run: &str) -> Vec<Value> {
    let mut answers = Vec::new();
    for path in [
        format!("/api/v1/runs/{run}"),
        format!("/api/v1/runs/{run}?at=1"),
        format!("/api/v1/runs/{run}/events"),
    ] {
        let answer = server.client.get(&path).await.unwrap();
        assert_eq!(answer.status, 200, "{path}: {}", answer.message());
        answers.push(answer.json());
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archived_run_is_answered_from_the_archive() {
    let mut source = TestServer::start().await;
    source.start_run("quick", "old").await;
    source
        .wait_for("old", "succeeded", |r| r["state"] == "succeeded")
        .await;
    let expected = answers(&source, "old").await;
    // The data dir outlives the server: the archive is written once it let go of it.
    let data = std::mem::replace(&mut source.data, tempfile::tempdir().unwrap());
    source.stop().await;
    let log = FileLog::open(data.path(), Options::default()).unwrap();
    let written = log.write_archive(&[RunId::from("old")]).unwrap();
    drop(log);

    let target = TestServer::start().await;
    target.start_run("quick", "new").await;
    let missing = target.client.get("/api/v1/runs/old").await.unwrap();
    assert_eq!(missing.status, 404, "{}", missing.message());
    std::fs::create_dir(target.data.path().join("archive")).unwrap();
    std::fs::copy(
        data.path().join(&written.file),
        target.data.path().join(&written.file),
    )
    .unwrap();
    assert_eq!(answers(&target, "old").await, expected);
    target.stop().await;
}
