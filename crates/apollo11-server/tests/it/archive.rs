//! A run only the data dir's archive files hold (as after `gc` moved it out of the live log;
//! here its archive file, written from another data dir, is copied in): the server answers
//! about it from the archive as the server it ran on did, lists it with `?all=true`, and
//! refuses every action on it with 409, as its `allowed` says.

use crate::harness::{assert_error, kept, TestServer};
use apollo11_core::RunId;
use apollo11_log::{FileLog, Options};
use serde_json::{json, Value};

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

/// A server with a live run `new` and a run `old` of `quick` only its archive holds, and the
/// answers about `old` of the server it ran on.
async fn with_archived_run() -> (TestServer, Vec<Value>) {
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
    (target, expected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archived_run_is_answered_from_the_archive() {
    let (target, expected) = with_archived_run().await;
    assert_eq!(answers(&target, "old").await, expected);
    target.stop().await;
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
    let live = target.run("new").await;
    assert_eq!(live["archived"], false);
    assert_eq!(live["allowed"]["override"], true);
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
    assert_eq!(listed(&target, "").await, ["new"]);
    assert_eq!(listed(&target, "?all=false").await, ["new"]);
    assert_eq!(
        listed(&target, "?all=true").await,
        ["new", "old (archived)"]
    );
    assert!(listed(&target, "?all=true&workflow=none").await.is_empty());
    let first = target.client.get("/api/v1/runs?all=true&limit=1").await;
    let first = first.unwrap().json();
    let cursor = first["next_cursor"].as_str().expect("a second page");
    let query = format!("?all=true&limit=1&cursor={cursor}");
    assert_eq!(listed(&target, &query).await, ["old (archived)"]);
    let bad = target.client.get("/api/v1/runs?all=yes").await.unwrap();
    assert_error(&bad, 400, "invalid");
    target.stop().await;
}
