//! A run wider than one append: more steps start at once than `APPEND_BATCH_EVENTS_MAX`
//! events fit in one append, and a resume must fail more of them at once.

use crate::scripted::{open, Act, Ledger, Scripted};
use apollo11_core::{limits, Seq};
use apollo11_runtime::{Idempotency, OnFailure, RunId, RunStatus, StepBuilder, Timeout, Workflow};
use apollo11_store::{EventStore, MemStore};
use std::sync::{Arc, Mutex};

const STEPS: usize = 1_200;

fn wide(ledger: &Ledger, gauge: &Arc<Mutex<(u32, u32)>>, script: fn(u32) -> Act) -> Workflow {
    let mut builder = Workflow::builder("wide")
        .on_failure(OnFailure::Pause)
        .max_concurrency(1_500);
    for i in 0..STEPS {
        let name: &'static str = Box::leak(format!("s{i:04}").into_boxed_str());
        let code = Scripted::new(name, script, ledger, gauge);
        builder = builder.step(
            StepBuilder::new(name, code)
                .idempotency(Idempotency::Natural)
                .timeout(Timeout::None),
        );
    }
    builder.build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn twelve_hundred_steps_start_at_once_and_a_crashed_run_of_them_resumes() {
    assert!(STEPS > limits::APPEND_BATCH_EVENTS_MAX as usize);
    let store = Arc::new(MemStore::new());
    let ledger = Ledger::default();
    let gauge = Arc::default();
    let run = RunId::from("w");
    {
        // Every step starts at once, then the engine dies with all of them running.
        let first = open(&store).await;
        let wf = Arc::new(wide(&ledger, &gauge, |_| Act::Hang));
        let handle = first.start(&wf, run.clone()).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        assert_eq!(gauge.lock().unwrap().1 as usize, STEPS, "all at once");
        handle.abort();
        let _ = handle.outcome().await;
    }
    let second = open(&store).await;
    let wf = Arc::new(wide(&ledger, &gauge, |_| Act::Ok(10)));
    let outcome = second
        .resume(&wf, run.clone())
        .await
        .unwrap()
        .outcome()
        .await;
    assert_eq!(outcome.unwrap(), RunStatus::Succeeded);
    let events = store.read_run(&run, Seq(1)).await.unwrap();
    let count = |kind: &str| events.iter().filter(|e| e.kind.name() == kind).count();
    assert_eq!(
        (count("started"), count("interrupted"), count("succeeded")),
        (2 * STEPS, STEPS, STEPS)
    );
    assert_eq!(count("failed"), 0);
    assert_eq!(ledger.lock().unwrap().len(), 2 * STEPS);
}
