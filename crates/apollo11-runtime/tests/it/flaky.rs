//! A store that fails the way a database does: unavailable for a while, an append whose
//! answer was lost after it was written, a constraint it refuses. A driver waits out what a
//! retry may cure and stops the run with anything else.

use crate::scripted::{Act, Ledger, Scripted};
use apollo11_core::{BlobRef, Event, EventId, RunId, Seq};
use apollo11_runtime::{
    Engine, EngineError, Idempotency, OnFailure, Output, RetryPolicy, RunStatus, Step, StepBuilder,
    StepContext, StepError, Timeout, Workflow, OPERATOR_APPEND_TRIES,
};
use apollo11_store::{
    BlobStore, EventStore, MemStore, NewEvent, RunSummary, Snapshot, SnapshotStore, StoreError,
};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// What the n-th call of a kind does instead of answering.
#[derive(Clone)]
enum Fault {
    /// Fails without writing anything.
    Fail(StoreError),
    /// Writes, then fails as if the answer were lost on the way back.
    LoseAnswer(StoreError),
    /// Writes, says so to the `Notify`, and lets other tasks run before answering: an
    /// answer slow on its way back.
    AnswerLate(Arc<tokio::sync::Notify>),
}

#[derive(Default)]
struct Flaky {
    inner: MemStore,
    appends: AtomicU32,
    reads: AtomicU32,
    /// By the number (from 1) of the `append` call they strike.
    append_faults: Mutex<BTreeMap<u32, Fault>>,
    /// By the number (from 1) of the `read_run` call they strike.
    read_faults: Mutex<BTreeMap<u32, StoreError>>,
}

fn unavailable() -> StoreError {
    StoreError::unavailable("connection reset by peer (simulated)")
}

impl Flaky {
    fn faults_left(&self) -> usize {
        self.append_faults.lock().unwrap().len() + self.read_faults.lock().unwrap().len()
    }
}

#[async_trait]
impl EventStore for Flaky {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        let n = self.appends.fetch_add(1, Ordering::SeqCst) + 1;
        let fault = self.append_faults.lock().unwrap().remove(&n);
        match fault {
            None => self.inner.append(run_id, expected_seq, events).await,
            Some(Fault::Fail(e)) => Err(e),
            Some(Fault::LoseAnswer(e)) => {
                self.inner.append(run_id, expected_seq, events).await?;
                Err(e)
            }
            Some(Fault::AnswerLate(written)) => {
                let ids = self.inner.append(run_id, expected_seq, events).await;
                written.notify_one();
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
                ids
            }
        }
    }

    async fn read_run(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError> {
        let n = self.reads.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(e) = self.read_faults.lock().unwrap().remove(&n) {
            return Err(e);
        }
        self.inner.read_run(run_id, from_seq).await
    }

    async fn read_from(&self, from: EventId, max_events: u32) -> Result<Vec<Event>, StoreError> {
        self.inner.read_from(from, max_events).await
    }

    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.inner.list_runs().await
    }

    async fn last_event_id(&self) -> Result<EventId, StoreError> {
        self.inner.last_event_id().await
    }
}

#[async_trait]
impl SnapshotStore for Flaky {
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.inner.save_snapshot(snapshot).await
    }

    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        self.inner.load_snapshot().await
    }
}

#[async_trait]
impl BlobStore for Flaky {
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
        self.inner.put_blob(bytes).await
    }

    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
        self.inner.get_blob(blob).await
    }
}

/// `a` → `b` → `c`, every step succeeding at once.
fn chain(ledger: &Ledger) -> Workflow {
    let retry = RetryPolicy {
        max_attempts: 3,
        ..RetryPolicy::default()
    };
    let mut builder = Workflow::builder("chain")
        .on_failure(OnFailure::Pause)
        .defaults(retry, Timeout::None);
    for (step, deps) in [("a", &[][..]), ("b", &["a"]), ("c", &["b"])] {
        let code = Scripted::new(step, |_| Act::Ok(10), ledger, &Arc::default());
        builder = builder.step(
            StepBuilder::new(step, code)
                .depends_on(deps)
                .idempotency(Idempotency::Natural),
        );
    }
    builder.build().unwrap()
}

async fn run(store: &Arc<Flaky>, ledger: &Ledger) -> Result<RunStatus, EngineError> {
    let engine = Engine::open(store.clone(), Default::default())
        .await
        .unwrap();
    let wf = Arc::new(chain(ledger));
    let handle = engine.start(&wf, RunId::from("r")).await.unwrap();
    handle.outcome().await
}

#[tokio::test(start_paused = true)]
async fn a_run_waits_out_an_unavailable_store_and_an_append_whose_answer_was_lost() {
    let store = Arc::new(Flaky::default());
    // Append 1 creates the run. The driver's first read fails; then appends 2 and 3 (a's
    // start) fail unwritten; append 4 (a's start again) is written but its answer lost; a
    // later one fails with a serialization failure, which a retry cures too.
    store.read_faults.lock().unwrap().insert(1, unavailable());
    let retryable_refusal = StoreError::Backend {
        message: "40001 could not serialize access (simulated)".into(),
        retryable: true,
        sqlstate: Some("40001".into()),
    };
    store.append_faults.lock().unwrap().extend([
        (2, Fault::Fail(unavailable())),
        (3, Fault::Fail(unavailable())),
        (4, Fault::LoseAnswer(unavailable())),
        (7, Fault::Fail(retryable_refusal)),
    ]);
    let ledger = Ledger::default();
    let status = run(&store, &ledger).await;
    assert_eq!(status.unwrap(), RunStatus::Succeeded);
    assert_eq!(store.faults_left(), 0, "every fault struck");
    let runs: Vec<(String, u32)> = ledger
        .lock()
        .unwrap()
        .iter()
        .map(|(s, a, _)| (s.clone(), *a))
        .collect();
    // `a`'s first start was written, but the driver never heard so and never ran it: the
    // log says it was left running, so it is marked interrupted and run as attempt 2.
    assert_eq!(runs, [("a".into(), 2), ("b".into(), 1), ("c".into(), 1)]);
    let events = store
        .inner
        .read_run(&RunId::from("r"), Seq(1))
        .await
        .unwrap();
    let interrupted = events
        .iter()
        .filter(|e| e.kind == apollo11_core::EventKind::Interrupted);
    assert_eq!(interrupted.count(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_store_error_no_retry_can_cure_stops_the_run_with_it() {
    let store = Arc::new(Flaky::default());
    let refusal = StoreError::Backend {
        message: "23514 check constraint violated (simulated)".into(),
        retryable: false,
        sqlstate: Some("23514".into()),
    };
    store
        .append_faults
        .lock()
        .unwrap()
        .insert(3, Fault::Fail(refusal));
    let ledger = Ledger::default();
    match run(&store, &ledger).await {
        Err(EngineError::Store(StoreError::Backend {
            message, retryable, ..
        })) => {
            assert!(!retryable && message.starts_with("23514"), "{message}");
        }
        other => panic!("the run must stop with the store's error, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_fenced_append_stops_the_run_at_once() {
    let store = Arc::new(Flaky::default());
    let fenced = StoreError::Fenced {
        run_id: RunId::from("r"),
        epoch: 1,
        current: 2,
    };
    store
        .append_faults
        .lock()
        .unwrap()
        .insert(3, Fault::Fail(fenced));
    let ledger = Ledger::default();
    match run(&store, &ledger).await {
        Err(EngineError::Store(StoreError::Fenced { epoch, current, .. })) => {
            assert_eq!((epoch, current), (1, 2))
        }
        other => panic!("the run must stop with the fencing error, got {other:?}"),
    }
    assert_eq!(
        store.appends.load(Ordering::SeqCst),
        3,
        "nothing tried after the fenced append"
    );
    let ran: Vec<String> = ledger
        .lock()
        .unwrap()
        .iter()
        .map(|(s, ..)| s.clone())
        .collect();
    assert_eq!(ran, ["a"], "no step launched after it");
}

#[tokio::test(start_paused = true)]
async fn an_unpause_appended_as_the_driver_ends_paused_has_the_run_driven_on() {
    let store = Arc::new(Flaky::default());
    // Appends: 1 the run, 2 `a` started, 3 the pause, 4 `a` succeeded, answered late: in
    // the meantime the operator's unpause is appended (5) and the driver woken, after its
    // last look at the log. Were that wake-up lost, the run would end `paused` unpaused.
    let written = Arc::new(tokio::sync::Notify::new());
    let late = Fault::AnswerLate(written.clone());
    store.append_faults.lock().unwrap().insert(4, late);
    let ledger = Ledger::default();
    let engine = Arc::new(
        Engine::open(store.clone(), Default::default())
            .await
            .unwrap(),
    );
    let wf = Arc::new(chain(&ledger));
    let run = RunId::from("r");
    let handle = engine.start(&wf, run.clone()).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    engine.pause(&run, "op", "pause").await.unwrap();
    let operator = tokio::spawn({
        let (engine, run) = (engine.clone(), run.clone());
        async move {
            written.notified().await;
            engine.unpause(&run, "op", "go on").await.unwrap();
        }
    });
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Succeeded);
    operator.await.unwrap();
    assert_eq!(store.faults_left(), 0, "the late answer struck");
}

#[tokio::test(start_paused = true)]
async fn an_operator_action_on_a_run_that_always_moves_gives_up_after_its_tries() {
    let store = Arc::new(Flaky::default());
    let run = RunId::from("r");
    let conflict = StoreError::Conflict {
        run_id: run.clone(),
        expected: Seq(2),
        actual: Seq(2),
    };
    // Append 1 creates the run; every later one conflicts, more of them than the action tries.
    let tries = OPERATOR_APPEND_TRIES;
    let conflicts = (2..=tries + 10).map(|n| (n, Fault::Fail(conflict.clone())));
    store.append_faults.lock().unwrap().extend(conflicts);
    let engine = Engine::open(store.clone(), Default::default())
        .await
        .unwrap();
    let wf = Arc::new(chain(&Ledger::default()));
    // Stopped before its driver's first turn: nothing but the operator appends to the run.
    engine.start(&wf, run.clone()).await.unwrap().abort();
    match engine.pause(&run, "op", "hold").await {
        Err(EngineError::Contended { run_id, tries: n }) => {
            assert_eq!((run_id, n), (run.clone(), tries));
        }
        other => panic!("the action must give up as contended, got {other:?}"),
    }
    assert_eq!(store.appends.load(Ordering::SeqCst), 1 + tries);
    let events = store.inner.read_run(&run, Seq(1)).await.unwrap();
    assert_eq!(
        events.len(),
        1,
        "nothing but the run's creation was written"
    );
}

/// A step that asks to hear when its outcome is durable, and notes the kinds of its events
/// the store holds at that moment.
struct Recording {
    store: Arc<Flaky>,
    seen: Arc<Mutex<Option<Vec<&'static str>>>>,
}

#[async_trait]
impl Step for Recording {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        let (store, seen) = (self.store.clone(), self.seen.clone());
        ctx.when_recorded(move || {
            let run = RunId::from("r");
            let events = ready(store.inner.read_run(&run, Seq(1)))
                .expect("the memory store answers at once");
            let kinds = events.unwrap().iter().map(|e| e.kind.name()).collect();
            *seen.lock().unwrap() = Some(kinds);
        });
        Ok(Output::text("done"))
    }
}

/// The output of a future that is ready at its first poll.
fn ready<F: std::future::Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(output) => Some(output),
        std::task::Poll::Pending => None,
    }
}

async fn run_recording(
    store: &Arc<Flaky>,
) -> (Result<RunStatus, EngineError>, Option<Vec<&'static str>>) {
    let seen = Arc::default();
    let code = Recording {
        store: store.clone(),
        seen: Arc::clone(&seen),
    };
    let wf = Workflow::builder("recording")
        .step(StepBuilder::new("a", code).idempotency(Idempotency::Natural))
        .build()
        .unwrap();
    let engine = Engine::open(store.clone(), Default::default())
        .await
        .unwrap();
    let handle = engine.start(&Arc::new(wf), RunId::from("r")).await.unwrap();
    let status = handle.outcome().await;
    let seen = seen.lock().unwrap().take();
    (status, seen)
}

#[tokio::test(start_paused = true)]
async fn a_try_hears_its_outcome_is_recorded_only_once_the_store_holds_it() {
    let store = Arc::new(Flaky::default());
    let (status, seen) = run_recording(&store).await;
    assert_eq!(status.unwrap(), RunStatus::Succeeded);
    assert_eq!(
        seen.expect("the hook was called"),
        ["run_created", "started", "succeeded"]
    );

    // The append carrying the outcome fails for good: the hook is never called.
    let store = Arc::new(Flaky::default());
    let refusal = StoreError::Backend {
        message: "53100 disk full (simulated)".into(),
        retryable: false,
        sqlstate: Some("53100".into()),
    };
    store
        .append_faults
        .lock()
        .unwrap()
        .insert(3, Fault::Fail(refusal));
    let (status, seen) = run_recording(&store).await;
    assert!(status.is_err(), "{status:?}");
    assert_eq!(seen, None, "told recorded though it never was");
    assert_eq!(
        store.faults_left(),
        0,
        "the outcome's append was the one refused"
    );
}
