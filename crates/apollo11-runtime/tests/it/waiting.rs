//! Waiting steps through the engine: a signal's data reaches the dependent step, a signal
//! to a step not waiting is refused and appends nothing, a waiting step leaves the one
//! slot to other steps, a timer keeps its instant across engines and fires once, and a
//! deadline fails the wait with class `timeout`.

use crate::scripted::{kinds, open, timeline};
use apollo11_core::{EventKind, Payload, Seq, Value};
use apollo11_runtime::{
    EngineError, Output, RetryPolicy, RunId, RunStatus, Step, StepBuilder, StepContext, StepError,
    Timeout, Wait, Workflow,
};
use apollo11_store::{EventStore, MemStore};
use async_trait::async_trait;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Outputs what `gate` output, or takes 1 s and outputs nothing.
struct Echo;

#[async_trait]
impl Step for Echo {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        match ctx.input("gate") {
            Some(bytes) => Ok(Output::text(String::from_utf8_lossy(bytes))),
            None => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok(Output::empty())
            }
        }
    }
}

/// `gate` waits for `wait` (with `deadline`), `after` echoes it, `other` runs beside it;
/// one slot, one attempt each.
fn gated(wait: Wait, deadline: Timeout) -> Arc<Workflow> {
    let once = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    let workflow = Workflow::builder("gated")
        .max_concurrency(1)
        .step(
            StepBuilder::waiting("gate", wait)
                .timeout(deadline)
                .retry(once),
        )
        .step(StepBuilder::new("other", Echo).idempotency(apollo11_runtime::Idempotency::Natural))
        .step(
            StepBuilder::new("after", Echo)
                .idempotency(apollo11_runtime::Idempotency::Natural)
                .depends_on(&["gate"]),
        )
        .build()
        .unwrap();
    Arc::new(workflow)
}

async fn event_count(store: &MemStore, run: &RunId) -> usize {
    store.read_run(run, Seq(1)).await.unwrap().len()
}

#[tokio::test(start_paused = true)]
async fn a_signal_ends_the_wait_and_its_data_reaches_the_dependent_step() {
    let store = Arc::new(MemStore::new());
    let engine = open(&store).await;
    let wf = gated(Wait::Signal, Timeout::None);
    let run = RunId::from("r");
    let handle = engine.start(&wf, run.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    // The one slot went to `other` while `gate` waits.
    assert_eq!(kinds(&store, "r", "other").await, ["started", "succeeded"]);
    assert_eq!(kinds(&store, "r", "gate").await, ["started"]);
    let before = event_count(&store, &run).await;
    let refused = engine.signal(&run, "after", None, "ada", "too early").await;
    assert!(
        matches!(refused, Err(EngineError::SignalNotAllowed { .. })),
        "{refused:?}"
    );
    let refused = engine.signal(&run, "other", None, "ada", "runs code").await;
    assert!(refused.unwrap_err().to_string().contains("it runs code"));
    assert_eq!(event_count(&store, &run).await, before, "nothing appended");

    let data = json!({"approved": true, "wave": 2});
    engine
        .signal(&run, "gate", Some(&data), "ada", "wave 1 is fine")
        .await
        .unwrap();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Succeeded);
    let output = engine.step_payload(&run, "after").await.unwrap();
    let Payload::Inline(bytes) = output else {
        panic!("{output:?}")
    };
    assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), data);
    let signalled = timeline(&store, "r")
        .await
        .into_iter()
        .find_map(|(_, k, _)| match k {
            EventKind::Signalled { by, reason } => Some((by, reason)),
            _ => None,
        });
    assert_eq!(signalled, Some(("ada".into(), "wave 1 is fine".into())));
    let late = engine.signal(&run, "gate", None, "ada", "again").await;
    assert!(late.unwrap_err().to_string().contains("it is succeeded"));
}

#[tokio::test(start_paused = true)]
async fn a_timer_keeps_its_instant_across_engines_and_fires_once() {
    let store = Arc::new(MemStore::new());
    let wf = gated(Wait::After { ms: 3_000 }, Timeout::None);
    let run = RunId::from("r");
    let first = open(&store).await;
    let handle = first.start(&wf, run.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    handle.abort();
    let _ = handle.outcome().await;
    let second = open(&store).await;
    let resumed = second.resume(&wf, run.clone()).await.unwrap();
    assert_eq!(resumed.outcome().await.unwrap(), RunStatus::Succeeded);
    let gate: Vec<(EventKind, u64)> = (timeline(&store, "r").await.into_iter())
        .filter(|(s, _, _)| s == "gate")
        .map(|(_, k, at)| (k, at))
        .collect();
    let [(EventKind::Started, started), (EventKind::Succeeded, fired)] = gate[..] else {
        panic!("one start, one firing: {gate:?}")
    };
    assert_eq!(
        fired - started,
        3_000,
        "the instant the first engine's start set"
    );
}

#[tokio::test(start_paused = true)]
async fn a_deadline_fails_the_wait_with_class_timeout() {
    let store = Arc::new(MemStore::new());
    let engine = open(&store).await;
    let wf = gated(Wait::Signal, Timeout::Fixed(2_000));
    let run = RunId::from("r");
    let handle = engine.start(&wf, run.clone()).await.unwrap();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Paused);
    let state = engine.state(&run).await.unwrap();
    let failure = state.step("gate").last_error.clone().unwrap();
    assert_eq!(failure.class.name(), "timeout");
    assert_eq!(kinds(&store, "r", "after").await, Vec::<&str>::new());
}
