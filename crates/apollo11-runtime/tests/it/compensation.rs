//! Compensations: one try per decision, every try and failure an event, retries at the
//! step's backoff, and a person called when no try is left.

use crate::engine::{ok, run_to_end, Fixture};
use crate::scripted::{kinds, open, timeline, Act, Undo};
use apollo11_core::{AttemptFailure, EventKind, FailureClass};
use apollo11_runtime::{
    Backoff, Idempotency as I, OnFailure, OverrideTarget, RetryPolicy, RunId, RunStatus,
};
use apollo11_store::MemStore;
use std::sync::Arc;

/// `a` (with a compensation) then `b`, which fails for good: the run rolls back `a`.
fn undo_a(f: &Fixture) -> apollo11_runtime::Workflow {
    f.workflow(
        "undo",
        OnFailure::Rollback,
        &[
            ("a", &[], I::Keyed, ok, true),
            ("b", &["a"], I::Natural, |_| Act::Fail(10, false), false),
        ],
    )
}

/// `(kind, at_ms)` of a step's compensation events.
async fn compensation_events(store: &MemStore, run: &str, step: &str) -> Vec<(EventKind, u64)> {
    timeline(store, run)
        .await
        .into_iter()
        .filter(|(s, k, _)| {
            s == step && (k.name().starts_with("compensat") || *k == EventKind::Interrupted)
        })
        .map(|(_, k, at)| (k, at))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_compensation_failing_twice_then_succeeding_shows_both_failures_as_events() {
    let f = Fixture::new().undo("a", |t| if t < 3 { Undo::Fail(true) } else { Undo::Ok });
    let engine = open(&f.store).await;
    let wf = Arc::new(undo_a(&f));
    assert_eq!(run_to_end(&engine, &wf, "r").await, RunStatus::RolledBack);
    let events = compensation_events(&f.store, "r", "a").await;
    let failed = |n: u32| {
        let error = format!("undo {n} failed");
        EventKind::CompensationTryFailed(AttemptFailure::new(FailureClass::Error, error, true))
    };
    let got: Vec<&EventKind> = events.iter().map(|(k, _)| k).collect();
    assert_eq!(
        got,
        [
            &EventKind::Compensating,
            &failed(1),
            &EventKind::Compensating,
            &failed(2),
            &EventKind::Compensating,
            &EventKind::Compensated
        ]
    );
    assert_eq!(
        events[2].1 - events[1].1,
        1_000,
        "retried 1 s after the first failure"
    );
    assert_eq!(events[4].1 - events[3].1, 2_000, "and 2 s after the second");
    assert_eq!(
        f.ledger()
            .iter()
            .filter(|(_, _, what)| *what == "compensate")
            .count(),
        3
    );
}

#[tokio::test(start_paused = true)]
async fn a_panicking_compensation_is_retried_at_the_backoff_rate_not_hot() {
    let mut f = Fixture::new().undo("a", |_| Undo::Panic);
    f.retry = RetryPolicy {
        max_attempts: 1_000,
        backoff: Backoff::Fixed,
        initial_ms: 50,
        max_ms: 50,
        jitter_pct: 0,
        ..RetryPolicy::default()
    };
    let engine = open(&f.store).await;
    let wf = Arc::new(undo_a(&f));
    let handle = engine.start(&wf, RunId::from("r")).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    handle.abort();
    let _ = handle.outcome().await;
    // The compensation panics at once, and the next try starts 50 ms after: about 100
    // tries in 5 s (a retry without backoff spins thousands of times, or never lets the
    // paused clock move).
    let tries = f
        .ledger()
        .iter()
        .filter(|(_, _, what)| *what == "compensate")
        .count();
    assert!((95..=101).contains(&tries), "{tries} tries in 5 s");
    let events = compensation_events(&f.store, "r", "a").await;
    let appended = events
        .iter()
        .filter(|(k, _)| *k == EventKind::Compensating)
        .count();
    assert_eq!(appended, tries, "every try is an event");
    let mut failures = 0;
    for pair in events.windows(2) {
        if let (Some(failed), EventKind::Compensating) =
            (pair[0].0.compensation_failure(), &pair[1].0)
        {
            failures += 1;
            let (error, retryable) = (&failed.error, failed.retryable);
            assert!(error.contains("panicked") && retryable, "{error}");
            assert_eq!(pair[1].1 - pair[0].1, 50, "the next try waits the backoff");
        }
    }
    assert_eq!(failures, tries - 1, "each try but the last failed");
}

#[tokio::test(start_paused = true)]
async fn a_compensation_out_of_tries_pauses_the_run_and_an_override_lets_it_finish() {
    let f = Fixture::new().undo("a", |_| Undo::Fail(true));
    let engine = open(&f.store).await;
    let wf = Arc::new(undo_a(&f));
    assert_eq!(run_to_end(&engine, &wf, "r").await, RunStatus::Paused);
    assert_eq!(
        kinds(&f.store, "r", "a").await[2..],
        [
            "compensating",
            "compensation_failed",
            "compensating",
            "compensation_failed",
            "compensating",
            "compensation_failed"
        ],
        "max_attempts (3) tries"
    );
    let run = RunId::from("r");
    let state = engine.state(&run).await.unwrap();
    assert_eq!(
        state.status("a"),
        apollo11_machine::StepStatus::CompensationFailed
    );
    engine
        .override_step(&run, "a", OverrideTarget::Skipped, "ops", "deleted by hand")
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
}

#[tokio::test(start_paused = true)]
async fn a_compensation_left_running_by_a_dead_engine_is_an_interrupted_try() {
    let f = Fixture::new().undo("a", |t| if t == 1 { Undo::Hang } else { Undo::Ok });
    let run = RunId::from("r");
    {
        let first = open(&f.store).await;
        let wf = Arc::new(undo_a(&f));
        let handle = first.start(&wf, run.clone()).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        handle.abort();
        let _ = handle.outcome().await;
    }
    let second = open(&f.store).await;
    let wf = Arc::new(undo_a(&f));
    let status = second
        .resume(&wf, run)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(status, RunStatus::RolledBack);
    let events = compensation_events(&f.store, "r", "a").await;
    assert_eq!(events[1].0, EventKind::Interrupted);
    assert_eq!(
        events[2].1 - events[1].1,
        1_000,
        "retried after the backoff"
    );
    assert_eq!(events.last().unwrap().0, EventKind::Compensated);
}
