//! A run only the data dir's archive files hold (`gc` moved it out of the live log while no
//! server ran): a server started on that data dir answers about it from the archive as the
//! server it ran on did.

use crate::harness::TestServer;
use apollo11_core::RunId;
use apollo11_log::{FileLog, Options};
use serde_json::Value;

/// Segments small enough that a few runs seal the one `old` is in.
const SEGMENT_BYTES: u64 = 4096;

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
    let small = |config: &mut apollo11_server::ServerConfig| {
        config.options.segment_bytes_max = SEGMENT_BYTES;
    };
    let mut source = TestServer::start_configured(None, small).await;
    for run in ["old", "later1", "later2", "later3"] {
        source.start_run("quick", run).await;
        source
            .wait_for(run, "succeeded", |r| r["state"] == "succeeded")
            .await;
    }
    let expected = answers(&source, "old").await;
    // The data dir outlives the server: `gc` runs once it let go of it.
    let data = std::mem::replace(&mut source.data, tempfile::tempdir().unwrap());
    source.stop().await;
    let options = Options {
        segment_bytes_max: SEGMENT_BYTES,
        ..Options::default()
    };
    let log = FileLog::open(data.path(), options).unwrap();
    let collected = log.collect(&[RunId::from("old")]).unwrap();
    assert_eq!(collected.moved, [RunId::from("old")], "{collected:?}");
    drop(log);

    let server = TestServer::start_on(data, None, small).await;
    let listed = server.client.get("/api/v1/runs").await.unwrap().json();
    let runs = listed["runs"].as_array().unwrap();
    assert!(runs.iter().all(|r| r["run_id"] != "old"), "{listed}");
    assert_eq!(answers(&server, "old").await, expected);
    server.stop().await;
}
