//! A run only the data dir's archive files hold (`gc` moved it out of the live log while no
//! server ran): a server started on that data dir answers about it from the archive as the
//! server it ran on did, lists it with `?all=true`, and refuses every action on it with 409,
//! as its `allowed` says.

use crate::harness::{assert_error, kept, TestServer};
use apollo11_core::RunId;
use apollo11_log::{FileLog, Options};
use serde_json::{json, Value};

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
        answers.push(kept(answer.json()));
    }
    answers
}

/// The server's log on [`SEGMENT_BYTES`] segments.
fn small(config: &mut apollo11_server::ServerConfig) {
    config.options.segment_bytes_max = SEGMENT_BYTES;
}

/// A server on a data dir where only the archive holds the run `old` of `quick` (the live
/// runs after it: `later1` to `later3`), and the answers about `old` of the server it ran on.
async fn with_archived_run() -> (TestServer, Vec<Value>) {
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

    (TestServer::start_on(data, None, small).await, expected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archived_run_is_answered_from_the_archive() {
    let (server, expected) = with_archived_run().await;
    let listed = server.client.get("/api/v1/runs").await.unwrap().json();
    let runs = listed["runs"].as_array().unwrap();
    assert!(runs.iter().all(|r| r["run_id"] != "old"), "{listed}");
    assert_eq!(answers(&server, "old").await, expected);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archived_run_allows_no_action_and_each_is_refused_with_409() {
    let (target, _) = with_archived_run().await;
    let run = target.run("old").await;
    assert_eq!(run["archived"], true);
    let actions = ["override", "pause", "resume", "rollback"];
    for action in actions {
        assert_eq!(run["allowed"][action], false, "{action}: {run}");
        let why = run["refused"][action].as_str().unwrap_or_default();
        assert!(why.contains("is archived"), "{action}: {run}");
    }
    let note = json!({"by": "ops", "reason": "try it"});
    for path in ["pause", "resume", "rollback"] {
        let path = format!("/api/v1/runs/old/{path}");
        assert_error(
            &target.client.post(&path, &note).await.unwrap(),
            409,
            "conflict",
        );
    }
    let body = json!({"to": "pending", "by": "ops", "reason": "try it"});
    let path = "/api/v1/runs/old/steps/a/override";
    assert_error(
        &target.client.post(path, &body).await.unwrap(),
        409,
        "conflict",
    );
    let live = target.run("later3").await;
    assert_eq!(live["archived"], false);
    assert_eq!(
        live["refused"]["override"], "the run is succeeded: it is finished",
        "refused as finished, not as archived"
    );
    target.stop().await;
}

/// The runs of a runs list, an archived one as `ID (archived)`.
async fn listed(server: &TestServer, query: &str) -> Vec<String> {
    let answer = server.client.get(&format!("/api/v1/runs{query}")).await;
    let list = answer.unwrap().json();
    (list["runs"].as_array().unwrap().iter())
        .map(|r| match r["archived"].as_bool() {
            Some(true) => format!("{} (archived)", r["run_id"].as_str().unwrap()),
            Some(false) => r["run_id"].as_str().unwrap().to_owned(),
            None => panic!("a run without `archived`: {r}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_list_has_archived_runs_with_all_true_marked_and_paged() {
    let (target, _) = with_archived_run().await;
    let live = ["later3", "later2", "later1"];
    assert_eq!(listed(&target, "").await, live);
    assert_eq!(listed(&target, "?all=false").await, live);
    assert_eq!(
        listed(&target, "?all=true").await,
        ["later3", "later2", "later1", "old (archived)"]
    );
    assert!(listed(&target, "?all=true&workflow=none").await.is_empty());
    let first = target.client.get("/api/v1/runs?all=true&limit=3").await;
    let first = first.unwrap().json();
    let cursor = first["next_cursor"].as_str().expect("a second page");
    let query = format!("?all=true&limit=3&cursor={cursor}");
    assert_eq!(listed(&target, &query).await, ["old (archived)"]);
    let bad = target.client.get("/api/v1/runs?all=yes").await.unwrap();
    assert_error(&bad, 400, "invalid");
    target.stop().await;
}
