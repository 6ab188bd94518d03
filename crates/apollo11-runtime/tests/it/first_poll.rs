//! A try's first poll on its run's driver: a try that finishes there, panics there, or
//! waits and goes on in a task of its own.

use apollo11_core::Payload;
use apollo11_runtime::{
    Backoff, Engine, Idempotency, Output, RetryPolicy, RunId, RunStatus, Step, StepBuilder,
    StepContext, StepError, Timeout, Workflow,
};
use apollo11_store::{EventStore, MemStore};
use async_trait::async_trait;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A step that waits for a timer first, or never waits: it may panic on its first attempt,
/// and notes how far a task beside the engine has counted when it runs to its end.
#[derive(Clone, Default)]
struct Probe {
    waits: bool,
    panics_first: bool,
    ticks: Arc<AtomicU64>,
    seen: Arc<Mutex<Vec<u64>>>,
}

#[async_trait]
impl Step for Probe {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        if self.waits {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        if self.panics_first && ctx.attempt == 1 {
            panic!("{} broke before it waited", ctx.step);
        }
        self.seen
            .lock()
            .unwrap()
            .push(self.ticks.load(Ordering::Relaxed));
        Ok(Output::text(ctx.step.as_str()))
    }
}

fn chain(steps: usize, code: impl Fn(usize) -> Probe) -> Workflow {
    let names: Vec<String> = (0..steps).map(|i| format!("s{i:04}")).collect();
    let mut builder = Workflow::builder("first-poll").defaults(
        RetryPolicy {
            max_attempts: 2,
            backoff: Backoff::Fixed,
            initial_ms: 1,
            max_ms: 1,
            jitter_pct: 0,
            ..RetryPolicy::default()
        },
        Timeout::None,
    );
    for (i, name) in names.iter().enumerate() {
        let deps: Vec<&str> = names[..i]
            .iter()
            .rev()
            .take(1)
            .map(String::as_str)
            .collect();
        builder = builder.step(
            StepBuilder::new(name, code(i))
                .idempotency(Idempotency::Natural)
                .depends_on(&deps),
        );
    }
    builder.build().unwrap()
}

async fn run(store: &Arc<MemStore>, wf: Workflow) -> RunStatus {
    let engine = Engine::open(store.clone(), Default::default())
        .await
        .unwrap();
    let handle = engine.start(&Arc::new(wf), RunId::from("r")).await.unwrap();
    handle.outcome().await.unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn a_chain_of_steps_that_never_wait_still_lets_other_tasks_run() {
    let ticks = Arc::new(AtomicU64::new(0));
    let counting = ticks.clone();
    let counter = tokio::spawn(async move {
        loop {
            counting.fetch_add(1, Ordering::Relaxed);
            tokio::task::yield_now().await;
        }
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let wf = chain(600, |_| Probe {
        ticks: ticks.clone(),
        seen: seen.clone(),
        ..Probe::default()
    });
    let store = Arc::new(MemStore::new());
    assert_eq!(run(&store, wf).await, RunStatus::Succeeded);
    counter.abort();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 600);
    // On one thread, the task beside counts only while the run's driver gives the thread
    // back: it must have, more than once, in the middle of the chain.
    let moved = seen.windows(2).filter(|w| w[1] > w[0]).count();
    assert!(moved >= 2, "the counter moved {moved} times in 600 steps");
}

#[tokio::test(start_paused = true)]
async fn a_step_that_panics_before_it_waits_fails_retryably_and_is_retried() {
    let probe = Probe::default();
    let wf = chain(3, |i| Probe {
        waits: i != 1,
        panics_first: i == 1,
        ..probe.clone()
    });
    let store = Arc::new(MemStore::new());
    assert_eq!(run(&store, wf).await, RunStatus::Succeeded);
    let events = store
        .read_run(&RunId::from("r"), apollo11_core::Seq(1))
        .await
        .unwrap();
    let of = |step: &str| -> Vec<&'static str> {
        (events.iter())
            .filter(|e| e.step.as_ref().is_some_and(|s| s.as_str() == step))
            .map(|e| e.kind.name())
            .collect()
    };
    assert_eq!(of("s0001"), ["started", "failed", "started", "succeeded"]);
    let failure = (events.iter())
        .find_map(|e| e.kind.failure())
        .expect("the panic is recorded");
    assert!(failure.retryable, "{failure:?}");
    assert!(
        failure
            .error
            .contains("panicked: s0001 broke before it waited"),
        "{}",
        failure.error
    );
    // Each step ran to its end once: the two that waited went on in tasks of their own.
    assert_eq!(probe.seen.lock().unwrap().len(), 3);
    for step in ["s0000", "s0002"] {
        assert_eq!(of(step), ["started", "succeeded"]);
    }
    for e in events.iter().filter(|e| e.kind.name() == "succeeded") {
        let step = e.step.as_ref().expect("a step's event").as_str();
        assert_eq!(
            e.payload,
            Payload::inline(step.as_bytes().to_vec()),
            "{step}"
        );
    }
}
