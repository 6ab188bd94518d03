//! The engine's scheduling, recovery and operator paths.

use crate::scripted::{kinds, open, timeline, undo_ok, Act, Ledger, Scripted, Undo};
use apollo11_core::EventKind;
use apollo11_runtime::{
    Backoff, Engine, EngineError, Idempotency as I, OnFailure, OverrideTarget, RetryPolicy, RunId,
    RunStatus, StepBuilder, Timeout, TriggerRule, Workflow, WorkflowError,
};
use apollo11_store::{EventStore, MemStore, SnapshotStore};
use std::sync::{Arc, Mutex};

pub type Spec = (
    &'static str,
    &'static [&'static str],
    I,
    fn(u32) -> Act,
    bool,
);

pub struct Fixture {
    pub store: Arc<MemStore>,
    pub ledger: Ledger,
    pub gauge: Arc<Mutex<(u32, u32)>>,
    /// Compensation scripts by step (others that have one always succeed).
    undo: std::collections::BTreeMap<&'static str, fn(u32) -> Undo>,
    pub retry: RetryPolicy,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture::on(MemStore::new())
    }

    pub fn on(store: MemStore) -> Fixture {
        Fixture {
            store: Arc::new(store),
            ledger: Ledger::default(),
            gauge: Arc::default(),
            undo: Default::default(),
            retry: RetryPolicy {
                max_attempts: 3,
                backoff: Backoff::Exponential,
                initial_ms: 1_000,
                max_ms: 60_000,
                jitter_pct: 0,
                ..RetryPolicy::default()
            },
        }
    }

    pub fn undo(mut self, step: &'static str, script: fn(u32) -> Undo) -> Fixture {
        self.undo.insert(step, script);
        self
    }

    pub fn workflow(&self, name: &str, on_failure: OnFailure, steps: &[Spec]) -> Workflow {
        let mut builder = Workflow::builder(name)
            .on_failure(on_failure)
            .max_concurrency(4)
            .defaults(self.retry.clone(), Timeout::None);
        for &(step, deps, class, script, compensation) in steps {
            let mut code = Scripted::new(step, script, &self.ledger, &self.gauge);
            if compensation {
                code = code.undo(self.undo.get(step).copied().unwrap_or(undo_ok));
            }
            builder = builder.step(
                StepBuilder::new(step, code)
                    .depends_on(deps)
                    .idempotency(class),
            );
        }
        builder.build().unwrap()
    }

    pub fn ledger(&self) -> Vec<(String, u32, &'static str)> {
        self.ledger.lock().unwrap().clone()
    }
}

pub fn ok(_: u32) -> Act {
    Act::Ok(100)
}

/// Fails its first attempt (retryably), then succeeds.
fn fails_once(attempt: u32) -> Act {
    if attempt == 1 {
        Act::Fail(10, true)
    } else {
        Act::Ok(10)
    }
}

/// Hangs on its first attempt, then succeeds.
fn hangs_once(attempt: u32) -> Act {
    if attempt == 1 {
        Act::Hang
    } else {
        Act::Ok(10)
    }
}

/// Starts a run and waits for its outcome.
pub async fn run_to_end(engine: &Engine<MemStore>, wf: &Arc<Workflow>, run: &str) -> RunStatus {
    engine
        .start(wf, RunId::from(run))
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_failing_step_is_retried_with_exponential_backoff() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(f.workflow(
        "retry",
        OnFailure::Pause,
        &[(
            "flaky",
            &[],
            I::Natural,
            |a| {
                if a < 3 {
                    Act::Fail(10, true)
                } else {
                    Act::Ok(10)
                }
            },
            false,
        )],
    ));
    let status = run_to_end(&engine, &wf, "r").await;
    assert_eq!(status, RunStatus::Succeeded);
    let t = timeline(&f.store, "r").await;
    let starts: Vec<u64> = t
        .iter()
        .filter(|(_, k, _)| *k == EventKind::Started)
        .map(|(_, _, at)| *at)
        .collect();
    let fails: Vec<u64> = t
        .iter()
        .filter(|(_, k, _)| k.failure().is_some())
        .map(|(_, _, at)| *at)
        .collect();
    assert_eq!((starts.len(), fails.len()), (3, 2));
    assert_eq!(starts[1] - fails[0], 1_000, "1 s after the first failure");
    assert_eq!(starts[2] - fails[1], 2_000, "2 s after the second");
}

#[tokio::test(start_paused = true)]
async fn an_attempt_past_its_timeout_is_failed_then_retried() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let code = Scripted::new("slow", hangs_once, &f.ledger, &f.gauge);
    let wf = Workflow::builder("timeout")
        .defaults(
            RetryPolicy {
                initial_ms: 100,
                ..RetryPolicy::default()
            },
            Timeout::Fixed(500),
        )
        .step(StepBuilder::new("slow", code).idempotency(I::Natural))
        .build()
        .unwrap();
    let wf = Arc::new(wf);
    assert_eq!(run_to_end(&engine, &wf, "r").await, RunStatus::Succeeded);
    let t = timeline(&f.store, "r").await;
    assert_eq!(
        t[1].1,
        EventKind::AttemptFailed(apollo11_core::AttemptFailure::new(
            apollo11_core::FailureClass::Timeout,
            "timeout",
            true
        ))
    );
    assert_eq!(t[1].2 - t[0].2, 500, "failed exactly at the deadline");
    assert_eq!(
        kinds(&f.store, "r", "slow").await,
        ["started", "failed", "started", "succeeded"]
    );
}

#[tokio::test(start_paused = true)]
async fn parallel_steps_respect_the_concurrency_limit() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let steps: Vec<Spec> = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
        .iter()
        .map(|n| (*n, &[][..], I::Natural, ok as fn(u32) -> Act, false))
        .collect();
    let wf = Arc::new(f.workflow("wide", OnFailure::Pause, &steps));
    assert_eq!(run_to_end(&engine, &wf, "r").await, RunStatus::Succeeded);
    assert_eq!(
        f.gauge.lock().unwrap().1,
        4,
        "at most 4 at once, and 4 were used"
    );
    assert_eq!(f.ledger().len(), 10);
}

#[tokio::test(start_paused = true)]
async fn rollback_on_a_diamond_compensates_d_then_b_and_c_in_parallel_then_a() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(f.workflow(
        "diamond",
        OnFailure::Rollback,
        &[
            ("a", &[], I::Keyed, ok, true),
            ("b", &["a"], I::Keyed, ok, true),
            ("c", &["a"], I::Keyed, ok, true),
            (
                "d",
                &["b", "c"],
                I::Compensate,
                |_| Act::Fail(10, false),
                true,
            ),
        ],
    ));
    assert_eq!(run_to_end(&engine, &wf, "r").await, RunStatus::RolledBack);
    let compensations: Vec<(String, &str)> = timeline(&f.store, "r")
        .await
        .into_iter()
        .filter(|(_, k, _)| matches!(k, EventKind::Compensating | EventKind::Compensated))
        .map(|(s, k, _)| (s, k.name()))
        .collect();
    let order: Vec<String> = compensations
        .iter()
        .map(|(s, k)| format!("{s}:{k}"))
        .collect();
    assert_eq!(order[..2], ["d:compensating", "d:compensated"]);
    assert_eq!(
        order[2..4],
        ["b:compensating", "c:compensating"],
        "b and c start together"
    );
    assert_eq!(order[6..], ["a:compensating", "a:compensated"]);
    let state = engine.state(&RunId::from("r")).await.unwrap();
    assert!(["a", "b", "c", "d"]
        .iter()
        .all(|s| state.status(s) == apollo11_machine::StepStatus::Compensated));
}

#[tokio::test(start_paused = true)]
async fn a_compensate_class_step_is_compensated_then_rerun() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(f.workflow(
        "pay",
        OnFailure::Pause,
        &[("charge", &[], I::Compensate, fails_once, true)],
    ));
    assert_eq!(run_to_end(&engine, &wf, "r").await, RunStatus::Succeeded);
    assert_eq!(
        kinds(&f.store, "r", "charge").await,
        [
            "started",
            "failed",
            "compensating",
            "compensated",
            "started",
            "succeeded"
        ]
    );
    assert_eq!(
        f.ledger()
            .iter()
            .map(|(_, a, w)| format!("{a}{w}"))
            .collect::<Vec<_>>(),
        ["1run", "1compensate", "2run"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_paused_run_continues_downstream_after_an_override() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(f.workflow(
        "ops",
        OnFailure::Pause,
        &[
            ("a", &[], I::Natural, ok, false),
            ("b", &["a"], I::Natural, |_| Act::Fail(10, false), false),
            ("c", &["b"], I::Natural, ok, false),
        ],
    ));
    let run = RunId::from("r");
    assert_eq!(
        engine
            .start(&wf, run.clone())
            .await
            .unwrap()
            .outcome()
            .await
            .unwrap(),
        RunStatus::Paused
    );
    let err = engine
        .override_step(&run, "nope", OverrideTarget::Succeeded, "ops", "x")
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::UnknownStep { .. }), "{err}");
    engine
        .override_step(
            &run,
            "b",
            OverrideTarget::Succeeded,
            "alice",
            "fixed the table by hand",
        )
        .await
        .unwrap();
    assert_eq!(
        engine
            .resume(&wf, run.clone())
            .await
            .unwrap()
            .outcome()
            .await
            .unwrap(),
        RunStatus::Succeeded
    );
    assert_eq!(
        kinds(&f.store, "r", "b").await,
        ["started", "failed", "manual_override"]
    );
    let names: Vec<String> = f.ledger().into_iter().map(|(s, _, _)| s).collect();
    assert_eq!(names, ["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn an_override_reaches_a_run_that_is_being_driven() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(f.workflow(
        "live",
        OnFailure::Pause,
        &[
            ("stuck", &[], I::Natural, |_| Act::Hang, false),
            ("next", &["stuck"], I::Natural, ok, false),
        ],
    ));
    let run = RunId::from("r");
    let handle = engine.start(&wf, run.clone()).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    engine
        .override_step(
            &run,
            "stuck",
            OverrideTarget::Skipped,
            "bob",
            "not needed today",
        )
        .await
        .unwrap();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Succeeded);
    assert_eq!(kinds(&f.store, "r", "next").await, ["started", "succeeded"]);
}

#[tokio::test(start_paused = true)]
async fn a_fresh_engine_resumes_a_crashed_run_without_rerunning_succeeded_steps() {
    let f = Fixture::new();
    let steps: &[Spec] = &[
        ("s1", &[], I::Keyed, ok, false),
        ("s2", &["s1"], I::Keyed, ok, false),
        (
            "s3",
            &["s2"],
            I::Checkpoint,
            |a| if a == 1 { Act::Hang } else { Act::Ok(100) },
            false,
        ),
        ("s4", &["s3"], I::Keyed, ok, false),
        ("s5", &["s4"], I::Keyed, ok, false),
    ];
    let run = RunId::from("r");
    {
        let first = open(&f.store).await;
        let wf = Arc::new(f.workflow("five", OnFailure::Pause, steps));
        let handle = first.start(&wf, run.clone()).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        handle.abort();
        let _ = handle.outcome().await;
    }
    let second = open(&f.store).await;
    let wf = Arc::new(f.workflow("five", OnFailure::Pause, steps));
    assert_eq!(
        second
            .resume(&wf, run.clone())
            .await
            .unwrap()
            .outcome()
            .await
            .unwrap(),
        RunStatus::Succeeded
    );
    let runs: Vec<String> = f
        .ledger()
        .into_iter()
        .map(|(s, a, _)| format!("{s}#{a}"))
        .collect();
    assert_eq!(runs, ["s1#1", "s2#1", "s3#1", "s3#2", "s4#1", "s5#1"]);
    let s3 = timeline(&f.store, "r")
        .await
        .into_iter()
        .filter(|(s, _, _)| s == "s3")
        .map(|(_, k, _)| k)
        .collect::<Vec<_>>();
    assert_eq!(s3[1], EventKind::Interrupted);
}

#[tokio::test(start_paused = true)]
async fn a_checkpoint_step_gets_its_previous_attempts_marker_and_large_outputs_go_to_blobs() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(f.workflow(
        "ck",
        OnFailure::Pause,
        &[("ck", &[], I::Checkpoint, fails_once, false)],
    ));
    run_to_end(&engine, &wf, "r").await;
    assert_eq!(
        engine.step_payload(&RunId::from("r"), "ck").await.unwrap(),
        apollo11_core::Payload::inline("ck#2 after marker-1")
    );
    let big = f.workflow(
        "big",
        OnFailure::Pause,
        &[("x", &[], I::Natural, ok, false)],
    );
    let engine = apollo11_runtime::Engine::open(
        f.store.clone(),
        apollo11_runtime::EngineConfig {
            inline_payload_bytes_max: 2,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let big = Arc::new(big);
    run_to_end(&engine, &big, "b").await;
    let payload = engine.step_payload(&RunId::from("b"), "x").await.unwrap();
    let apollo11_core::Payload::Blob(blob) = &payload else {
        panic!("expected a blob, got {payload:?}")
    };
    assert_eq!(
        apollo11_store::resolve(f.store.as_ref(), &payload)
            .await
            .unwrap(),
        b"x#1"
    );
    assert_eq!(blob.bytes, 3);
}

#[tokio::test(start_paused = true)]
async fn a_changed_definition_or_another_workflow_is_an_error_not_a_silent_switch() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(f.workflow(
        "v",
        OnFailure::Pause,
        &[("a", &[], I::Natural, |_| Act::Fail(1, false), false)],
    ));
    run_to_end(&engine, &wf, "r").await;
    assert!(matches!(
        engine.start(&wf, RunId::from("r")).await,
        Err(EngineError::RunExists { .. })
    ));
    let other = open(&f.store).await;
    let another = Arc::new(f.workflow("w", OnFailure::Pause, &[("a", &[], I::Natural, ok, false)]));
    assert!(matches!(
        other.resume(&another, RunId::from("r")).await,
        Err(EngineError::UnknownWorkflow { .. })
    ));
    let wf = Arc::new(f.workflow("v", OnFailure::Pause, &[("a", &[], I::Keyed, ok, false)]));
    let err = other.resume(&wf, RunId::from("r")).await.err().unwrap();
    assert!(
        matches!(err, EngineError::DefinitionChanged { .. }),
        "{err}"
    );
    assert!(matches!(
        other.resume(&wf, RunId::from("nope")).await,
        Err(EngineError::UnknownRun { .. })
    ));
}

#[test]
fn registration_refuses_missing_idempotency_missing_compensation_and_cycles() {
    let f = Fixture::new();
    let code = |n| Scripted::new(n, ok, &f.ledger, &f.gauge);
    let missing = Workflow::builder("w")
        .step(StepBuilder::new("a", code("a")))
        .build();
    assert_eq!(
        missing.err(),
        Some(WorkflowError::MissingIdempotency { step: "a".into() })
    );
    let uncompensated = Workflow::builder("w")
        .step(StepBuilder::new("a", code("a")).idempotency(I::Compensate))
        .build();
    assert!(uncompensated
        .err()
        .unwrap()
        .to_string()
        .contains("`a` has idempotency class `compensate` but no compensation"));
    let cycle = Workflow::builder("w")
        .step(
            StepBuilder::new("a", code("a"))
                .idempotency(I::Natural)
                .depends_on(&["b"]),
        )
        .step(
            StepBuilder::new("b", code("b"))
                .idempotency(I::Natural)
                .depends_on(&["a"]),
        )
        .build();
    assert_eq!(
        cycle.err().unwrap().to_string(),
        "dependency cycle: a -> b -> a"
    );
}

#[tokio::test(start_paused = true)]
async fn a_thousand_runs_share_one_engine_and_snapshots_are_taken() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(f.workflow(
        "many",
        OnFailure::Pause,
        &[
            ("a", &[], I::Natural, ok, false),
            ("b", &["a"], I::Natural, ok, false),
        ],
    ));
    let mut handles = Vec::new();
    for i in 0..1_000 {
        handles.push(
            engine
                .start(&wf, RunId(format!("run-{i:04}")))
                .await
                .unwrap(),
        );
    }
    for h in handles {
        assert_eq!(h.outcome().await.unwrap(), RunStatus::Succeeded);
    }
    assert_eq!(f.ledger().len(), 2_000);
    // Several snapshots were due during the runs; closing takes a last one.
    engine.close().await;
    let snapshot = f
        .store
        .load_snapshot()
        .await
        .unwrap()
        .expect("5,000 events trigger snapshots");
    assert!(snapshot.watermark.0 >= 1_000, "{}", snapshot.watermark);
    let reopened = open(&f.store).await;
    assert_eq!(
        reopened
            .state(&RunId::from("run-0999"))
            .await
            .unwrap()
            .status("b"),
        apollo11_machine::StepStatus::Succeeded
    );
}

#[tokio::test(start_paused = true)]
async fn auto_timeout_is_twice_the_p99_of_past_successful_durations() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let build = |script: fn(u32) -> Act| {
        Workflow::builder("auto")
            .defaults(
                RetryPolicy {
                    max_attempts: 1,
                    ..RetryPolicy::default()
                },
                Timeout::Auto {
                    fallback_ms: 60_000,
                },
            )
            .step(
                StepBuilder::new("s", Scripted::new("s", script, &f.ledger, &f.gauge))
                    .idempotency(I::Natural),
            )
            .build()
            .unwrap()
    };
    let wf = Arc::new(build(|_| Act::Ok(100)));
    for i in 0..25 {
        engine
            .start(&wf, RunId(format!("warm-{i}")))
            .await
            .unwrap()
            .outcome()
            .await
            .unwrap();
    }
    // The engine's view learns durations from the log; a fresh engine starts from it.
    let engine = open(&f.store).await;
    let wf = Arc::new(build(|_| Act::Hang));
    assert_eq!(run_to_end(&engine, &wf, "hung").await, RunStatus::Paused);
    let t = timeline(&f.store, "hung").await;
    assert_eq!(
        t[1].1,
        EventKind::AttemptFailed(apollo11_core::AttemptFailure::new(
            apollo11_core::FailureClass::Timeout,
            "timeout",
            true
        ))
    );
    assert_eq!(t[1].2 - t[0].2, 200, "2 x p99 of 100 ms");
}

#[tokio::test(start_paused = true)]
async fn a_conflicting_append_is_refolded_and_outcomes_still_current_are_kept() {
    use apollo11_store::EventStore;
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(f.workflow(
        "race",
        OnFailure::Pause,
        &[
            ("stuck", &[], I::Natural, |_| Act::Hang, false),
            ("quick", &[], I::Natural, ok, false),
            ("next", &["stuck", "quick"], I::Natural, ok, false),
        ],
    ));
    let run = RunId::from("r");
    let handle = engine.start(&wf, run.clone()).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    // Another writer (not this engine, so nobody is notified) overrides `stuck` while `quick`
    // is still running: the driver's next append must conflict.
    let state = engine.state(&run).await.unwrap();
    let over = apollo11_store::NewEvent {
        step: Some("stuck".into()),
        kind: EventKind::ManualOverride {
            to: OverrideTarget::Skipped,
            by: "other".into(),
            reason: "race".into(),
        },
        attempt: 1,
        at_ms: 0,
        instance: "elsewhere".into(),
        payload: apollo11_core::Payload::Empty,
    };
    f.store
        .append(&run, apollo11_core::Seq(state.last_seq.0 + 1), vec![over])
        .await
        .unwrap();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Succeeded);
    assert_eq!(
        kinds(&f.store, "r", "quick").await,
        ["started", "succeeded"],
        "the outcome survived the conflict"
    );
    assert_eq!(
        kinds(&f.store, "r", "stuck").await,
        ["started", "manual_override"]
    );
    assert_eq!(kinds(&f.store, "r", "next").await, ["started", "succeeded"]);
}

#[tokio::test(start_paused = true)]
async fn closing_snapshots_every_event_appended_since_the_last_snapshot() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = Arc::new(f.workflow(
        "few",
        OnFailure::Pause,
        &[("a", &[], I::Natural, ok, false)],
    ));
    for i in 0..3 {
        let run = engine.start(&wf, RunId(format!("run-{i}"))).await.unwrap();
        assert_eq!(run.outcome().await.unwrap(), RunStatus::Succeeded);
    }
    assert!(
        f.store.load_snapshot().await.unwrap().is_none(),
        "9 events are far from a due snapshot"
    );
    engine.close().await;
    let last = f.store.last_event_id().await.unwrap();
    let snapshot = f
        .store
        .load_snapshot()
        .await
        .unwrap()
        .expect("closing saves one");
    assert_eq!(snapshot.watermark, last);
}

/// On a store whose event ids have gaps (as a database sequence may leave), the engine's
/// view tails the log, snapshots at a real event id, reloads the snapshot and catches up
/// after it, and `auto` timeouts learn across all of it.
#[tokio::test(start_paused = true)]
async fn the_view_and_its_snapshots_follow_event_ids_with_gaps() {
    use apollo11_runtime::EngineConfig;
    use apollo11_store::{EventStore, IdGaps};
    for gaps in [IdGaps::Even, IdGaps::Random { seed: 11 }] {
        let f = Fixture::on(MemStore::with_id_gaps(gaps));
        let config = EngineConfig {
            snapshot_every_events: 7,
            ..EngineConfig::default()
        };
        let build = |script: fn(u32) -> Act| {
            let retry = RetryPolicy {
                max_attempts: 1,
                ..RetryPolicy::default()
            };
            let code = Scripted::new("s", script, &f.ledger, &f.gauge);
            Workflow::builder("auto")
                .defaults(
                    retry,
                    Timeout::Auto {
                        fallback_ms: 60_000,
                    },
                )
                .step(StepBuilder::new("s", code).idempotency(I::Natural))
                .build()
                .unwrap()
        };
        let engine = Engine::open(f.store.clone(), config.clone()).await.unwrap();
        let wf = Arc::new(build(|_| Act::Ok(100)));
        for i in 0..12 {
            assert_eq!(
                run_to_end(&engine, &wf, &format!("warm-{i}")).await,
                RunStatus::Succeeded
            );
        }
        engine.close().await;
        let last = f.store.last_event_id().await.unwrap();
        let snapshot = f.store.load_snapshot().await.unwrap().unwrap();
        assert_eq!(
            snapshot.watermark, last,
            "{gaps:?}: closing snapshots to the end"
        );
        // Events after the snapshot: the next engine folds them from its watermark.
        let engine = Engine::open(f.store.clone(), config.clone()).await.unwrap();
        let wf = Arc::new(build(|_| Act::Ok(100)));
        for i in 12..25 {
            run_to_end(&engine, &wf, &format!("warm-{i}")).await;
        }
        drop(engine);
        let engine = Engine::open(f.store.clone(), config).await.unwrap();
        let saved = f.store.load_snapshot().await.unwrap().unwrap().watermark;
        let ids: Vec<_> = f.store.read_from(saved, 1).await.unwrap();
        assert_eq!(
            ids[0].event_id, saved,
            "{gaps:?}: a snapshot covers a real event"
        );
        let wf = Arc::new(build(|_| Act::Hang));
        assert_eq!(run_to_end(&engine, &wf, "hung").await, RunStatus::Paused);
        let t = timeline(&f.store, "hung").await;
        assert_eq!(
            t[1].2 - t[0].2,
            200,
            "{gaps:?}: 2 x p99 of 100 ms, all 25 learned"
        );
    }
}

/// `work`, and `notify` (one_failed) after it, `work` doing what `script` says.
fn notify_workflow(f: &Fixture, script: fn(u32) -> Act) -> Arc<Workflow> {
    let step = |name, script| Scripted::new(name, script, &f.ledger, &f.gauge);
    let wf = Workflow::builder("notify")
        .on_failure(OnFailure::Pause)
        .defaults(f.retry.clone(), Timeout::None)
        .step(StepBuilder::new("work", step("work", script)).idempotency(I::Natural))
        .step(
            StepBuilder::new("notify", step("notify", ok))
                .depends_on(&["work"])
                .idempotency(I::Natural)
                .trigger(TriggerRule::OneFailed),
        )
        .build()
        .unwrap();
    Arc::new(wf)
}

#[tokio::test(start_paused = true)]
async fn a_step_whose_trigger_rule_cannot_hold_is_skipped_and_the_run_succeeds() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = notify_workflow(&f, ok);
    assert_eq!(
        run_to_end(&engine, &wf, "quiet").await,
        RunStatus::Succeeded
    );
    assert_eq!(kinds(&f.store, "quiet", "notify").await, ["skipped"]);
    let t = timeline(&f.store, "quiet").await;
    let reason = t.iter().find_map(|(_, kind, _)| match kind {
        EventKind::Skipped { reason } => Some(reason.as_str()),
        _ => None,
    });
    assert_eq!(
        reason,
        Some("trigger rule `one_failed`: no dependency failed")
    );
}

#[tokio::test(start_paused = true)]
async fn a_one_failed_step_runs_when_its_dependency_fails_for_good_then_the_run_pauses() {
    let f = Fixture::new();
    let engine = open(&f.store).await;
    let wf = notify_workflow(&f, |_| Act::Fail(10, false));
    assert_eq!(run_to_end(&engine, &wf, "loud").await, RunStatus::Paused);
    assert_eq!(
        kinds(&f.store, "loud", "notify").await,
        ["started", "succeeded"]
    );
}
