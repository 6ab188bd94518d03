//! Operator actions on a whole run through the engine: pause, unpause, rollback.

use crate::engine::{ok, run_to_end, Fixture};
use crate::scripted::{kinds, open, timeline, Act};
use apollo11_core::EventKind;
use apollo11_runtime::{
    EngineError, Idempotency as I, OnFailure, Refusal, RunAction, RunId, RunStatus,
};
use apollo11_store::EventStore;
use std::sync::Arc;
use std::time::Duration;

fn slow(_: u32) -> Act {
    Act::Ok(1_000)
}

/// `a` (1 s) and `b` in parallel, then `c`; each has a compensation.
fn fork(f: &Fixture) -> apollo11_runtime::Workflow {
    f.workflow(
        "fork",
        OnFailure::Pause,
        &[
            ("a", &[], I::Keyed, slow, true),
            ("b", &[], I::Keyed, ok, true),
            ("c", &["a", "b"], I::Keyed, ok, true),
        ],
    )
}

#[tokio::test(start_paused = true)]
async fn a_paused_run_finishes_what_runs_and_goes_on_once_unpaused() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(fork(&f));
    let run = RunId::from("r");
    let handle = engine.start(&wf, run.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    engine.pause(&run, "alice", "maintenance").await.unwrap();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Paused);
    assert_eq!(kinds(&f.store, "r", "a").await, ["started", "succeeded"]);
    assert_eq!(kinds(&f.store, "r", "c").await, Vec::<&str>::new());
    let err = engine.pause(&run, "bob", "again").await.unwrap_err();
    assert!(
        matches!(
            &err,
            EngineError::NotAllowed {
                action: RunAction::Pause,
                refusal: Refusal::AlreadyPaused { .. },
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "cannot pause run `r`: the run is already paused by alice"
    );
    // A resume without lifting the pause finds the run paused at once.
    let again = engine.resume(&wf, run.clone()).await.unwrap();
    assert_eq!(again.outcome().await.unwrap(), RunStatus::Paused);
    engine
        .unpause(&run, "alice", "maintenance over")
        .await
        .unwrap();
    let status = engine
        .resume(&wf, run.clone())
        .await
        .unwrap()
        .outcome()
        .await;
    assert_eq!(status.unwrap(), RunStatus::Succeeded);
    let run_events: Vec<(String, String)> = f
        .store
        .read_run(&run, apollo11_core::Seq(1))
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.step.is_none())
        .filter_map(|e| match e.kind {
            EventKind::RunPaused { by, reason } => {
                Some(("paused".into(), format!("{by}: {reason}")))
            }
            EventKind::RunResumed { by, reason } => {
                Some(("resumed".into(), format!("{by}: {reason}")))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        run_events,
        [
            ("paused".into(), "alice: maintenance".into()),
            ("resumed".into(), "alice: maintenance over".into())
        ]
    );
    let err = engine.unpause(&run, "alice", "x").await.unwrap_err();
    assert!(
        matches!(
            err,
            EngineError::NotAllowed {
                refusal: Refusal::Finished { .. },
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pause_reaches_a_driver_waiting_for_a_retry_at_once() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(f.workflow(
        "flaky",
        OnFailure::Pause,
        &[("a", &[], I::Natural, |_| Act::Fail(10, true), false)],
    ));
    let run = RunId::from("r");
    let handle = engine.start(&wf, run.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let paused_at = tokio::time::Instant::now();
    engine.pause(&run, "alice", "stop retrying").await.unwrap();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Paused);
    assert!(
        paused_at.elapsed() < Duration::from_millis(900),
        "the driver did not wait for the 1 s backoff"
    );
    assert_eq!(kinds(&f.store, "r", "a").await, ["started", "failed"]);
}

#[tokio::test(start_paused = true)]
async fn a_rollback_request_waits_for_running_attempts_then_compensates_in_reverse_order() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(fork(&f));
    let run = RunId::from("r");
    let handle = engine.start(&wf, run.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    engine
        .request_rollback(&run, "bob", "wrong input")
        .await
        .unwrap();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::RolledBack);
    let undo: Vec<String> = timeline(&f.store, "r")
        .await
        .into_iter()
        .filter(|(_, k, _)| matches!(k, EventKind::Compensating))
        .map(|(s, _, _)| s)
        .collect();
    assert_eq!(
        undo,
        ["a", "b"],
        "a finished its attempt, then both were undone"
    );
    assert_eq!(kinds(&f.store, "r", "c").await, Vec::<&str>::new());
    let err = engine
        .request_rollback(&run, "bob", "again")
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::NotAllowed { .. }), "{err}");
    let err = engine
        .pause(&RunId::from("nope"), "x", "y")
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::UnknownRun { .. }), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_run_paused_for_a_failure_can_be_rolled_back_instead() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(f.workflow(
        "p",
        OnFailure::Pause,
        &[
            ("a", &[], I::Keyed, ok, true),
            ("b", &["a"], I::Natural, |_| Act::Fail(10, false), false),
        ],
    ));
    assert_eq!(run_to_end(&engine, &wf, "r").await, RunStatus::Paused);
    let run = RunId::from("r");
    engine
        .request_rollback(&run, "carol", "give up on this one")
        .await
        .unwrap();
    let status = engine
        .resume(&wf, run)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(status, RunStatus::RolledBack);
    assert_eq!(
        kinds(&f.store, "r", "a").await,
        ["started", "succeeded", "compensating", "compensated"]
    );
}
