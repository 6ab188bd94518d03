//! An engine that dies spends none of a step's attempts or compensation tries; a step
//! whose tries keep dying with the engine pauses its run until a person resumes it.

use crate::engine::{ok, Fixture, Spec};
use crate::scripted::{kinds, open, Act, Undo};
use apollo11_runtime::{Idempotency as I, OnFailure, RunId, RunStatus};
use std::sync::Arc;
use std::time::Duration;

/// Hangs on its first three attempts (until the engine is killed), then succeeds.
fn hangs_three_times(attempt: u32) -> Act {
    if attempt <= 3 {
        Act::Hang
    } else {
        Act::Ok(10)
    }
}

/// `a` (with a compensation), then `b`, then `c`, under `on_failure = "rollback"`, every
/// step allowed one attempt.
fn one_attempt(f: &mut Fixture, b: fn(u32) -> Act) -> apollo11_runtime::Workflow {
    f.retry.max_attempts = 1;
    let steps: &[Spec] = &[
        ("a", &[], I::Keyed, ok, true),
        ("b", &["a"], I::Keyed, b, false),
        ("c", &["b"], I::Keyed, ok, false),
    ];
    f.workflow("once", OnFailure::Rollback, steps)
}

/// Starts (or resumes) run `r` on a new engine, then kills its driver 10 s in, as a crash.
async fn drive_then_kill(f: &mut Fixture, b: fn(u32) -> Act, start: bool) {
    let engine = open(&f.store).await;
    let wf = Arc::new(one_attempt(f, b));
    let run = RunId::from("r");
    let handle = if start {
        engine.start(&wf, run).await.unwrap()
    } else {
        engine.resume(&wf, run).await.unwrap()
    };
    tokio::time::sleep(Duration::from_secs(10)).await;
    handle.abort();
    let _ = handle.outcome().await;
}

/// Resumes run `r` on a new engine and waits for its outcome.
async fn resume_to_end(f: &mut Fixture, b: fn(u32) -> Act) -> RunStatus {
    let engine = open(&f.store).await;
    let wf = Arc::new(one_attempt(f, b));
    let handle = engine.resume(&wf, RunId::from("r")).await.unwrap();
    handle.outcome().await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_one_attempt_step_left_running_by_a_killed_engine_runs_again_on_resume() {
    let mut f = Fixture::new();
    drive_then_kill(&mut f, hangs_three_times, true).await;
    let status = resume_to_end(&mut f, |_| Act::Ok(10)).await;
    assert_eq!(status, RunStatus::Succeeded);
    assert_eq!(
        kinds(&f.store, "r", "b").await,
        ["started", "interrupted", "started", "succeeded"]
    );
    assert!(
        f.ledger().iter().all(|(_, _, what)| *what == "run"),
        "nothing compensated: {:?}",
        f.ledger()
    );
}

#[tokio::test(start_paused = true)]
async fn a_compensation_left_running_by_a_killed_engine_spends_no_try() {
    let mut f = Fixture::new().undo("a", |t| if t == 1 { Undo::Hang } else { Undo::Ok });
    drive_then_kill(&mut f, |_| Act::Fail(10, false), true).await;
    let status = resume_to_end(&mut f, |_| Act::Fail(10, false)).await;
    assert_eq!(status, RunStatus::RolledBack, "not paused out of tries");
    assert_eq!(
        kinds(&f.store, "r", "a").await,
        [
            "started",
            "succeeded",
            "compensating",
            "interrupted",
            "compensating",
            "compensated"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_interrupted_three_times_in_a_row_pauses_the_run_until_it_is_resumed() {
    let mut f = Fixture::new();
    for start in [true, false, false] {
        drive_then_kill(&mut f, hangs_three_times, start).await;
    }
    let status = resume_to_end(&mut f, hangs_three_times).await;
    assert_eq!(status, RunStatus::Paused);
    let engine = open(&f.store).await;
    let wf = Arc::new(one_attempt(&mut f, hangs_three_times));
    let run = RunId::from("r");
    let state = engine.state(&run).await.unwrap();
    let reason = &state.paused.as_ref().expect("paused by the engine").reason;
    assert!(
        reason.contains("step `b`") && reason.contains("3 times in a row"),
        "{reason}"
    );
    assert!(
        f.ledger().iter().all(|(_, _, what)| *what == "run"),
        "nothing compensated: {:?}",
        f.ledger()
    );
    engine
        .unpause(&run, "alice", "the host is fixed")
        .await
        .unwrap();
    let status = engine
        .resume(&wf, run)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Succeeded);
    assert_eq!(
        engine
            .state(&RunId::from("r"))
            .await
            .unwrap()
            .step("b")
            .attempt,
        4
    );
}
