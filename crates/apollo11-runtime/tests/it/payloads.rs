//! What a launch hands its step is read before the launch is appended, including a marker
//! whose failure is appended in the same batch as the retry that needs it.

use crate::scripted::{open, Act, Ledger, Scripted};
use apollo11_core::Payload;
use apollo11_runtime::{
    Backoff, Idempotency, OnFailure, RetryPolicy, RunId, RunStatus, StepBuilder, Timeout, Workflow,
};
use apollo11_store::MemStore;
use std::sync::Arc;

#[tokio::test(start_paused = true)]
async fn a_retry_without_backoff_gets_the_marker_appended_with_it() {
    let store = Arc::new(MemStore::new());
    let engine = open(&store).await;
    let code = Scripted::new(
        "ck",
        |attempt| {
            if attempt == 1 {
                Act::Fail(10, true)
            } else {
                Act::Ok(10)
            }
        },
        &Ledger::default(),
        &Arc::default(),
    );
    let no_backoff = RetryPolicy {
        max_attempts: 2,
        backoff: Backoff::Fixed,
        initial_ms: 0,
        max_ms: 0,
        jitter_pct: 0,
        ..RetryPolicy::default()
    };
    let wf = Workflow::builder("ck")
        .on_failure(OnFailure::Pause)
        .step(
            StepBuilder::new("ck", code)
                .idempotency(Idempotency::Checkpoint)
                .retry(no_backoff)
                .timeout(Timeout::None),
        )
        .build()
        .unwrap();
    let wf = Arc::new(wf);
    let run = RunId::from("r");
    let outcome = engine
        .start(&wf, run.clone())
        .await
        .unwrap()
        .outcome()
        .await;
    assert_eq!(outcome.unwrap(), RunStatus::Succeeded);
    assert_eq!(
        engine.step_payload(&run, "ck").await.unwrap(),
        Payload::inline("ck#2 after marker-1")
    );
}
