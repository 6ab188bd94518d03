//! Operator actions: recorded with who and why, refused with 409 when the run does not allow
//! them, and the run driven on afterwards.

use crate::harness::{assert_error, TestServer};
use serde_json::{json, Value};

fn note(reason: &str) -> Value {
    json!({"by": "tester", "reason": reason})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_holds_a_run_resume_lifts_it_and_finished_runs_refuse_both() {
    let server = TestServer::start().await;
    server.start_run("gated", "g").await;
    server
        .wait_for("g", "waiting", |r| r["steps"]["wait"]["state"] == "running")
        .await;
    let paused = server
        .client
        .post("/api/v1/runs/g/pause", &note("hold on"))
        .await
        .unwrap();
    assert_eq!(paused.status, 202, "{}", paused.message());
    let pause_id = paused.json()["event_id"].as_u64().unwrap();
    let run = server.run("g").await;
    assert_eq!(run["allowed"]["pause"], false);
    // Running until its step at work finishes, the pause asked said.
    assert_eq!(run["state"], "running");
    assert_eq!(run["pausing"]["by"], "tester", "{run}");
    assert_eq!(run["pausing"]["event_id"], pause_id, "{run}");
    assert!(
        run["refused"]["pause"].as_str().unwrap().contains("tester"),
        "{run}"
    );
    let again = server
        .client
        .post("/api/v1/runs/g/pause", &note("again"))
        .await
        .unwrap();
    assert_error(&again, 409, "already_paused");
    assert!(
        again
            .message()
            .ends_with(run["refused"]["pause"].as_str().unwrap()),
        "the 409 says what `refused` says: {}",
        again.message()
    );
    server.open_gate();
    let held = server
        .wait_for("g", "paused", |r| r["state"] == "paused")
        .await;
    assert_eq!(
        held["steps"]["after"]["state"], "pending",
        "nothing new starts while paused"
    );
    assert_eq!(held["pausing"], Value::Null, "paused now: {held}");
    let events = server
        .client
        .get("/api/v1/runs/g/events")
        .await
        .unwrap()
        .json();
    let recorded = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event_id"] == pause_id)
        .unwrap()
        .clone();
    assert_eq!(
        (
            recorded["kind"].as_str(),
            recorded["by"].as_str(),
            recorded["reason"].as_str()
        ),
        (Some("run_paused"), Some("tester"), Some("hold on"))
    );
    let resumed = server
        .client
        .post("/api/v1/runs/g/resume", &note("go on"))
        .await
        .unwrap();
    assert_eq!(resumed.status, 202, "{}", resumed.message());
    assert!(resumed.json()["event_id"].as_u64().is_some());
    server
        .wait_for("g", "succeeded", |r| r["state"] == "succeeded")
        .await;
    for action in ["pause", "resume", "rollback"] {
        let refused = server
            .client
            .post(&format!("/api/v1/runs/g/{action}"), &note("late"))
            .await
            .unwrap();
        assert_error(&refused, 409, "finished");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overridden_step_lets_a_paused_run_succeed_and_bad_notes_are_refused() {
    let server = TestServer::start().await;
    server.start_run("stuck", "s").await;
    let run = server
        .wait_for("s", "paused", |r| r["state"] == "paused")
        .await;
    assert_eq!(run["steps"]["fails"]["state"], "failed");
    assert!(
        run["steps"]["fails"]["error"]
            .as_str()
            .unwrap()
            .contains('3'),
        "{run}"
    );
    let path = "/api/v1/runs/s/steps/fails/override";
    let bad = [
        json!({"to": "done", "by": "t", "reason": "r"}),
        json!({"to": "succeeded", "by": "", "reason": "r"}),
        json!({"to": "succeeded", "by": "t", "reason": "two\nlines"}),
        json!({"to": "succeeded", "by": "t".repeat(257), "reason": "r"}),
        json!({"to": "succeeded", "by": "t"}),
        json!({"to": "succeeded", "by": "t", "reason": "r", "extra": 1}),
    ];
    for body in bad {
        assert_error(
            &server.client.post(path, &body).await.unwrap(),
            400,
            "invalid",
        );
    }
    let unknown_step = server
        .client
        .post(
            "/api/v1/runs/s/steps/nope/override",
            &json!({"to": "succeeded", "by": "t", "reason": "r"}),
        )
        .await
        .unwrap();
    assert_error(&unknown_step, 404, "not_found");
    let resumed = server
        .client
        .post("/api/v1/runs/s/resume", &note("cannot help"))
        .await
        .unwrap();
    assert_error(&resumed, 409, "conflict");
    assert!(
        resumed.message().contains("`fails`"),
        "{}",
        resumed.message()
    );
    let unknown_run = server
        .client
        .post("/api/v1/runs/nope/pause", &note("r"))
        .await
        .unwrap();
    assert_error(&unknown_run, 404, "not_found");
    let fixed = server
        .client
        .post(
            path,
            &json!({"to": "succeeded", "by": "t", "reason": "done by hand"}),
        )
        .await
        .unwrap();
    assert_eq!(fixed.status, 200, "{}", fixed.message());
    assert!(fixed.json()["event_id"].as_u64().is_some());
    server
        .wait_for("s", "succeeded", |r| r["state"] == "succeeded")
        .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_waits_for_the_running_step_then_ends_rolled_back() {
    let server = TestServer::start().await;
    server.start_run("gated", "g").await;
    server
        .wait_for("g", "waiting", |r| r["steps"]["wait"]["state"] == "running")
        .await;
    let asked = server
        .client
        .post("/api/v1/runs/g/rollback", &note("wrong input"))
        .await
        .unwrap();
    assert_eq!(asked.status, 202, "{}", asked.message());
    let twice = server
        .client
        .post("/api/v1/runs/g/rollback", &note("again"))
        .await
        .unwrap();
    assert_error(&twice, 409, "already_rolling_back");
    server.open_gate();
    let run = server
        .wait_for("g", "rolled back", |r| r["state"] == "rolled_back")
        .await;
    assert_eq!(run["steps"]["after"]["state"], "pending");
    server.stop().await;
}

/// Starts an `undone` run `u`, checks what its running last step's overrides would do, asks
/// for a rollback while that step runs, lets it end, and returns the run once rolled back.
async fn roll_back_during_the_last_step(server: &TestServer) -> Value {
    server.start_run("undone", "u").await;
    let running = server
        .wait_for("u", "last running", |r| {
            r["steps"]["last"]["state"] == "running"
        })
        .await;
    let overrides = &running["steps"]["last"]["overrides"];
    assert_eq!(overrides["pending"]["does"], "rerun", "{overrides}");
    assert_eq!(overrides["succeeded"]["does"], "done", "{overrides}");
    let asked = server
        .client
        .post("/api/v1/runs/u/rollback", &note("abandon"))
        .await
        .unwrap();
    assert_eq!(asked.status, 202, "{}", asked.message());
    server.open_gate();
    server
        .wait_for("u", "rolled back", |r| r["state"] == "rolled_back")
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_during_the_last_step_undoes_it_once_it_ends() {
    let server = TestServer::start().await;
    let run = roll_back_during_the_last_step(&server).await;
    for step in ["first", "last"] {
        assert_eq!(run["steps"][step]["state"], "compensated", "{run}");
        let undone = server.workflows.path().join(format!("{step}-undone"));
        assert!(undone.exists(), "the compensation of {step} ran");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_on_a_finished_run_is_refused_with_why() {
    let server = TestServer::start().await;
    let run = roll_back_during_the_last_step(&server).await;
    assert_eq!(run["allowed"]["override"], false, "{run}");
    assert_eq!(run["steps"]["last"]["overrides"], json!({}), "{run}");
    let refused = server
        .client
        .post(
            "/api/v1/runs/u/steps/last/override",
            &json!({"to": "pending", "by": "t", "reason": "again"}),
        )
        .await
        .unwrap();
    assert_error(&refused, 409, "finished");
    assert!(
        refused
            .message()
            .ends_with(run["refused"]["override"].as_str().unwrap()),
        "the 409 says what `refused` says: {}",
        refused.message()
    );
    let events = server
        .client
        .get("/api/v1/runs/u/events")
        .await
        .unwrap()
        .json();
    let kinds: Vec<&str> = (events["events"].as_array().unwrap().iter())
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(!kinds.contains(&"manual_override"), "{kinds:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_override_says_what_it_does_to_a_step_whose_compensation_failed() {
    let server = TestServer::start().await;
    server.start_run("undo_fails", "f").await;
    let run = server
        .wait_for("f", "paused", |r| r["state"] == "paused")
        .await;
    assert_eq!(
        run["steps"]["book"]["state"], "compensation_failed",
        "{run}"
    );
    let overrides = &run["steps"]["book"]["overrides"];
    let does = |to: &str| {
        overrides[to]["does"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        ["succeeded", "skipped", "pending", "failed"].map(does),
        ["compensate", "left_as_is", "left_as_is", "left_as_is"],
        "{overrides}"
    );
    assert_eq!(
        overrides["succeeded"]["says"], "its compensation runs again",
        "{overrides}"
    );
    server.stop().await;
}
