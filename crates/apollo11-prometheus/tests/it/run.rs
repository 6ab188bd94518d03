//! A real run with the recorder installed: a step that fails then succeeds, one that times
//! out then fails for good, a compensation that fails once, a run rolled back and one paused.

use crate::scrape::{samples, value, Sample};
use crate::{prometheus, TURN};
use apollo11_core::Seq;
use apollo11_log::{FileLog, Options};
use apollo11_runtime::{
    Backoff, Engine, EngineConfig, Idempotency, OnFailure, Output, RetryPolicy, RunId, RunStatus,
    Step, StepBuilder, StepContext, StepError, Timeout, Usage, Workflow,
};
use apollo11_store::EventStore;
use async_trait::async_trait;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What an attempt does.
#[derive(Clone, Copy)]
enum Act {
    Ok,
    Fail {
        retryable: bool,
    },
    /// Sleeps far past any timeout here.
    Hang,
}

/// A step following a script by attempt number, its compensation failing its first
/// `undo_failures` tries.
struct Scripted {
    act: fn(u32) -> Act,
    undo_failures: Option<u32>,
    undo_tries: AtomicU32,
}

#[async_trait]
impl Step for Scripted {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        ctx.used(Usage {
            isolation: "cgroup".into(),
            wall_ms: 5,
            cpu_user_ms: Some(300),
            cpu_system_ms: Some(100),
            peak_memory_bytes: Some(100 << 20),
            memory_limit_bytes: None,
        });
        match (self.act)(ctx.attempt) {
            Act::Ok => Ok(Output::text("done")),
            Act::Fail { retryable: true } => Err(StepError::retryable("try again")),
            Act::Fail { retryable: false } => Err(StepError::fatal("refused")),
            Act::Hang => {
                tokio::time::sleep(Duration::from_secs(600)).await;
                Ok(Output::empty())
            }
        }
    }

    async fn compensate(&self, _: &StepContext) -> Result<(), StepError> {
        let tries = self.undo_tries.fetch_add(1, Ordering::SeqCst) + 1;
        match self.undo_failures {
            Some(failures) if tries <= failures => Err(StepError::retryable("undo failed")),
            _ => Ok(()),
        }
    }

    fn has_compensation(&self) -> bool {
        self.undo_failures.is_some()
    }
}

fn step(name: &str, act: fn(u32) -> Act, undo_failures: Option<u32>) -> StepBuilder {
    StepBuilder::new(
        name,
        Scripted {
            act,
            undo_failures,
            undo_tries: AtomicU32::new(0),
        },
    )
}

/// Up to `max_attempts` attempts (and tries of a compensation), 10 ms apart.
fn retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        backoff: Backoff::Fixed,
        initial_ms: 10,
        max_ms: 10,
        jitter_pct: 0,
        ..RetryPolicy::default()
    }
}

/// `reserve` fails once then succeeds (its compensation fails once); `ship` times out, then
/// fails for good: the run rolls `reserve` back.
fn shop() -> Workflow {
    let reserve = |attempt| match attempt {
        1 => Act::Fail { retryable: true },
        _ => Act::Ok,
    };
    let ship = |attempt| match attempt {
        1 => Act::Hang,
        _ => Act::Fail { retryable: false },
    };
    Workflow::builder("shop")
        .on_failure(OnFailure::Rollback)
        .defaults(retry(3), Timeout::None)
        .step(step("reserve", reserve, Some(1)).idempotency(Idempotency::Keyed))
        .step(
            step("ship", ship, None)
                .idempotency(Idempotency::Natural)
                .depends_on(&["reserve"])
                .timeout(Timeout::Fixed(200)),
        )
        .build()
        .expect("a valid workflow")
}

/// `take` succeeds, `check` fails for good: the rollback's one try at undoing `take`
/// fails, and the run pauses with that compensation pending.
fn audit() -> Workflow {
    Workflow::builder("audit")
        .on_failure(OnFailure::Rollback)
        .defaults(retry(1), Timeout::None)
        .step(step("take", |_| Act::Ok, Some(u32::MAX)).idempotency(Idempotency::Keyed))
        .step(
            step("check", |_| Act::Fail { retryable: false }, None)
                .idempotency(Idempotency::Natural)
                .depends_on(&["take"]),
        )
        .build()
        .expect("a valid workflow")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_run_renders_every_metric_with_sane_values_and_promtool_accepts_it() {
    let _turn = TURN.lock().await;
    let prometheus = prometheus();
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FileLog::open(dir.path(), Options::default()).unwrap());
    let engine = Engine::open(log.clone(), EngineConfig::default())
        .await
        .unwrap();
    let appended_before = counter(
        &samples(&prometheus.render()),
        "apollo11_events_appended_total",
    );
    let shop = Arc::new(shop());
    let audit = Arc::new(audit());
    let runs = [
        (&shop, "shop-1", RunStatus::RolledBack),
        (&audit, "audit-1", RunStatus::Paused),
    ];
    let mut events = 0;
    for (workflow, run, status) in runs {
        let handle = engine.start(workflow, RunId::from(run)).await.unwrap();
        assert_eq!(handle.outcome().await.unwrap(), status, "{run}");
        events += log.read_run(&RunId::from(run), Seq(1)).await.unwrap().len();
    }
    // A finished run driven again is counted once, as it was when it finished.
    let again = engine.resume(&shop, RunId::from("shop-1")).await.unwrap();
    assert_eq!(again.outcome().await.unwrap(), RunStatus::RolledBack);
    let text = prometheus.render();
    let s = samples(&text);
    let appended = counter(&s, "apollo11_events_appended_total") - appended_before;
    assert_eq!(
        appended, events as f64,
        "every event of both runs, counted once\n{text}"
    );
    check_log(&s);
    check_steps(&s);
    check_runs(&s);
    apollo11_prometheus::promtool::assert_accepted(&text);
}

fn counter(s: &[Sample], name: &str) -> f64 {
    s.iter().find(|x| x.name == name).map_or(0.0, |x| x.value)
}

/// The log: batches add up to the events appended, each synced, and it accepts writes.
fn check_log(s: &[Sample]) {
    let batches = value(s, "apollo11_append_batch_events_count", &[]);
    let syncs = value(s, "apollo11_fsync_seconds_count", &[]);
    assert!(
        batches >= 1.0 && syncs == batches,
        "{batches} batches, {syncs} syncs"
    );
    assert_eq!(
        value(s, "apollo11_append_batch_events_sum", &[]),
        value(s, "apollo11_events_appended_total", &[]),
        "the batches hold every event appended"
    );
    // Buckets, not a summary: alerts compute quantiles from them.
    let all = value(s, "apollo11_fsync_seconds_bucket", &[("le", "+Inf")]);
    assert_eq!(all, syncs);
    assert!(value(s, "apollo11_fsync_seconds_sum", &[]) > 0.0);
    assert_eq!(value(s, "apollo11_log_writable", &[]), 1.0);
    for phase in ["log", "engine"] {
        let seconds = value(s, "apollo11_recovery_seconds", &[("phase", phase)]);
        assert!((0.0..30.0).contains(&seconds), "{phase} recovery {seconds}");
    }
}

/// Attempts, durations and compensations, by workflow, step and outcome.
fn check_steps(s: &[Sample]) {
    let attempts = |workflow, outcome| {
        let labels = [("workflow", workflow), ("outcome", outcome)];
        value(s, "apollo11_step_attempts_total", &labels)
    };
    assert_eq!(
        attempts("shop", "failed"),
        2.0,
        "reserve's first, ship's second"
    );
    assert_eq!(attempts("shop", "succeeded"), 1.0);
    assert_eq!(attempts("shop", "timeout"), 1.0);
    assert_eq!(attempts("audit", "failed"), 1.0);
    assert_eq!(
        attempts("audit", "timeout"),
        0.0,
        "every outcome is present from the start"
    );
    let failures = |class| {
        let labels = [("workflow", "shop"), ("class", class)];
        value(s, "apollo11_step_failures_total", &labels)
    };
    assert_eq!(
        (failures("error"), failures("timeout")),
        (2.0, 1.0),
        "failed attempts by class"
    );
    let duration = |step, outcome, part: &str| {
        let labels = [("workflow", "shop"), ("step", step), ("outcome", outcome)];
        value(
            s,
            &format!("apollo11_step_duration_seconds_{part}"),
            &labels,
        )
    };
    assert_eq!(duration("ship", "timeout", "count"), 1.0);
    assert!(
        duration("ship", "timeout", "sum") >= 0.2,
        "stopped after its 200 ms"
    );
    assert_eq!(duration("reserve", "succeeded", "count"), 1.0);
    let used = |metric: &str| {
        let labels = [("workflow", "shop"), ("step", "reserve")];
        value(s, metric, &labels)
    };
    assert_eq!(
        used("apollo11_step_peak_memory_bytes_count"),
        2.0,
        "both of reserve's tries recorded what they used; ship's timed-out one did not"
    );
    assert_eq!(
        used("apollo11_step_peak_memory_bytes_sum"),
        200.0 * 1_048_576.0
    );
    assert!((used("apollo11_step_cpu_seconds_sum") - 0.8).abs() < 1e-9);
    let compensations = |outcome| {
        let labels = [("workflow", "shop"), ("outcome", outcome)];
        value(s, "apollo11_compensations_total", &labels)
    };
    assert_eq!(compensations("failed"), 1.0);
    assert_eq!(compensations("compensated"), 1.0);
    let audit = [("workflow", "audit"), ("outcome", "failed")];
    assert_eq!(value(s, "apollo11_compensations_total", &audit), 1.0);
    assert!(value(s, "apollo11_scheduler_loop_seconds_count", &[]) >= 6.0);
}

/// Runs by state, and nothing left pending.
fn check_runs(s: &[Sample]) {
    let runs = |state| value(s, "apollo11_runs", &[("state", state)]);
    assert_eq!(runs("rolled_back"), 1.0);
    assert_eq!(runs("paused"), 1.0);
    assert_eq!(runs("running"), 0.0);
    assert_eq!(runs("succeeded"), 0.0);
    assert_eq!(
        value(s, "apollo11_compensations_pending", &[]),
        1.0,
        "audit's, out of tries: still pending while its run waits"
    );
    let finished = [("workflow", "shop"), ("status", "rolled_back")];
    assert_eq!(
        value(s, "apollo11_runs_finished_total", &finished),
        2.0,
        "driver ends: shop-1's, and its resume's once it was finished"
    );
}
