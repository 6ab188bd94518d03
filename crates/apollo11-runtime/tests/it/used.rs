//! What a try used: recorded by its step, appended as `attempt_usage` just before its
//! outcome (a try stopped by its timeout: when its step measures it then), shown per try by
//! the inspector; and the memory limit an `oom` retry runs with,
//! grown from the limit the log recorded.

use crate::scripted::{kinds, open};
use apollo11_core::{ClassRetry, FailureClass};
use apollo11_runtime::{
    Idempotency, Inspector, OnFailure, Output, RetryPolicy, RunId, RunStatus, Step, StepBuilder,
    StepContext, StepError, Timeout, Usage, Workflow,
};
use apollo11_store::MemStore;
use async_trait::async_trait;
use std::sync::{Arc, Mutex};

const MIB: u64 = 1 << 20;

/// A step that runs with the memory its context gives (256 MiB when it gives none) and is
/// killed as `oom` until it has 1 GiB; what each attempt was given, kept.
struct Hungry {
    given: Arc<Mutex<Vec<Option<u64>>>>,
}

#[async_trait]
impl Step for Hungry {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        self.given.lock().unwrap().push(ctx.memory_limit);
        let limit = ctx.memory_limit.unwrap_or(256 * MIB);
        ctx.used(Usage {
            isolation: "cgroup".into(),
            wall_ms: 5,
            cpu_user_ms: Some(3),
            cpu_system_ms: Some(1),
            peak_memory_bytes: Some(limit),
            memory_limit_bytes: Some(limit),
        });
        if limit < 1024 * MIB {
            return Err(StepError::retryable("killed").with_class(FailureClass::Oom));
        }
        Ok(Output::empty())
    }
}

fn workflow(given: &Arc<Mutex<Vec<Option<u64>>>>) -> Workflow {
    let mut retry = RetryPolicy {
        max_attempts: 5,
        initial_ms: 10,
        same_failure_max: 0,
        ..RetryPolicy::default()
    };
    let oom = ClassRetry {
        memory_factor_pct: Some(200),
        memory_max: Some(2048 * MIB),
        ..ClassRetry::default()
    };
    retry.by_class.insert("oom".into(), oom);
    let hungry = Hungry {
        given: given.clone(),
    };
    Workflow::builder("hungry")
        .on_failure(OnFailure::Pause)
        .step(
            StepBuilder::new("load", hungry)
                .idempotency(Idempotency::Natural)
                .retry(retry),
        )
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn each_try_records_its_usage_before_its_outcome_and_an_oom_retry_gets_twice_the_memory() {
    let store = Arc::new(MemStore::new());
    let given = Arc::new(Mutex::new(Vec::new()));
    let engine = open(&store).await;
    let handle = engine
        .start(&Arc::new(workflow(&given)), RunId::from("r"))
        .await
        .unwrap();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Succeeded);
    assert_eq!(
        *given.lock().unwrap(),
        [None, Some(512 * MIB), Some(1024 * MIB)],
        "the step's own, then doubled after each oom"
    );
    let attempt = ["started", "attempt_usage", "failed"];
    let last = ["started", "attempt_usage", "succeeded"];
    assert_eq!(
        kinds(&store, "r", "load").await,
        [&attempt[..], &attempt[..], &last[..]].concat()
    );
    let inspector = Inspector::new(store.clone());
    let view = inspector.status(&RunId::from("r"), None).await.unwrap();
    let used = &view.steps[0].usage;
    let limits: Vec<_> = used.iter().map(|u| u.usage.memory_limit_bytes).collect();
    assert_eq!(limits, [Some(256 * MIB), Some(512 * MIB), Some(1024 * MIB)]);
    assert_eq!((used[2].attempt, used[2].compensation), (3, false));
}

/// A step that promises to measure its try once stopped, when `promises`: it works until
/// cancelled, then records a wall time of 1 s; else it works until dropped.
struct Stoppable {
    promises: bool,
}

#[async_trait]
impl Step for Stoppable {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        if !self.promises {
            std::future::pending::<()>().await;
        }
        ctx.measures_when_stopped();
        ctx.cancel.clone().cancelled().await;
        ctx.used(Usage {
            isolation: "none".into(),
            wall_ms: 1_000,
            ..Usage::default()
        });
        Err(StepError::retryable("stopped"))
    }
}

#[tokio::test(start_paused = true)]
async fn a_try_stopped_by_its_timeout_records_its_usage_with_its_failure_when_its_step_measures_it()
{
    let store = Arc::new(MemStore::new());
    let engine = open(&store).await;
    let once = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    let step = |name, promises| {
        StepBuilder::new(name, Stoppable { promises })
            .idempotency(Idempotency::Natural)
            .retry(once.clone())
            .timeout(Timeout::Fixed(1_000))
    };
    let workflow = Workflow::builder("stopped")
        .on_failure(OnFailure::Pause)
        .step(step("measured", true))
        .step(step("dropped", false))
        .build()
        .unwrap();
    let handle = engine
        .start(&Arc::new(workflow), RunId::from("r"))
        .await
        .unwrap();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Paused);
    assert_eq!(
        kinds(&store, "r", "measured").await,
        ["started", "attempt_usage", "failed"]
    );
    assert_eq!(kinds(&store, "r", "dropped").await, ["started", "failed"]);
    let view = Inspector::new(store.clone())
        .status(&RunId::from("r"), None)
        .await
        .unwrap();
    let measured = view.steps.iter().find(|s| s.name == "measured").unwrap();
    assert_eq!(measured.usage[0].usage.wall_ms, 1_000);
}
