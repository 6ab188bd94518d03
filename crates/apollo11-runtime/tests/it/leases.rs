//! Driving under leases, on `MemStore` whose leases expire by tokio's paused clock: a
//! driver renews its lease while its steps run, stops at once when the lease is taken (its
//! steps with it), is fenced off when it appends after a takeover, and a claim by another
//! instance takes over a dead instance's run and finishes it.

use apollo11_core::{Event, EventKind};
use apollo11_runtime::{
    Engine, EngineConfig, EngineError, Idempotency, Leasing, Output, RunId, RunStatus, Step,
    StepBuilder, StepContext, StepError, StoreError, Workflow,
};
use apollo11_store::{Clock, EventStore, LeaseStore, MemStore};
use async_trait::async_trait;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

const TTL: Duration = Duration::from_secs(1);

/// Lease expiry on tokio's clock, so a paused test moves both together.
#[derive(Debug)]
struct TokioClock(tokio::time::Instant);

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        1_000_000 + self.0.elapsed().as_millis() as u64
    }
}

fn store() -> Arc<MemStore> {
    Arc::new(MemStore::new().with_clock(Arc::new(TokioClock(tokio::time::Instant::now()))))
}

async fn engine(store: &Arc<MemStore>, instance: &str) -> Engine<MemStore> {
    let config = EngineConfig {
        instance: instance.to_owned(),
        ..EngineConfig::default()
    };
    let leasing = Leasing::new(store.clone(), TTL).unwrap();
    Engine::open_leased(store.clone(), config, leasing)
        .await
        .unwrap()
}

/// A step that counts its starts and the starts stopped before they ended, then waits for
/// `go` (or `for_ms` of the clock when there is no `go`).
#[derive(Clone, Default)]
struct Waits {
    started: Arc<AtomicU32>,
    stopped: Arc<AtomicU32>,
    go: Option<Arc<Notify>>,
    for_ms: u64,
}

struct Stopped(Arc<AtomicU32>, bool);

impl Drop for Stopped {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[async_trait]
impl Step for Waits {
    async fn run(&self, _: &StepContext) -> Result<Output, StepError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        let mut guard = Stopped(self.stopped.clone(), false);
        match &self.go {
            Some(go) => go.notified().await,
            None => tokio::time::sleep(Duration::from_millis(self.for_ms)).await,
        }
        guard.1 = true;
        Ok(Output::default())
    }
}

fn workflow(step: Waits) -> Workflow {
    Workflow::builder("leased")
        .step(StepBuilder::new("s", step).idempotency(Idempotency::Natural))
        .build()
        .unwrap()
}

async fn events(store: &MemStore, run: &RunId) -> Vec<Event> {
    store.read_run(run, apollo11_core::Seq(1)).await.unwrap()
}

/// Takes the run's lease from its holder as a takeover would, for `owner`.
async fn take_over(store: &MemStore, run: &RunId, owner: &str) -> u64 {
    let held = store.lease(run).await.unwrap().expect("the run is leased");
    store.release(&held).await.unwrap();
    let lease = store.acquire(run, owner, TTL).await.unwrap().unwrap();
    assert_eq!(lease.epoch, held.epoch + 1);
    lease.epoch
}

#[tokio::test(start_paused = true)]
async fn a_driver_renews_its_lease_while_a_long_step_runs_and_parks_it_at_the_end() {
    let store = store();
    let a = engine(&store, "a").await;
    let step = Waits {
        for_ms: 10_000,
        ..Waits::default()
    };
    let wf = Arc::new(workflow(step.clone()));
    let run = RunId::from("r");
    let handle = a.start(&wf, run.clone()).await.unwrap();
    for _ in 0..9 {
        tokio::time::sleep(TTL).await;
        let lease = store.lease(&run).await.unwrap().unwrap();
        assert_eq!(
            (lease.owner.as_str(), lease.epoch),
            ("a", 1),
            "renewed, never lost"
        );
        assert_eq!(store.acquire(&run, "b", TTL).await.unwrap(), None);
    }
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Succeeded);
    assert_eq!(
        store.lease(&run).await.unwrap(),
        None,
        "given up at the end"
    );
    assert_eq!(
        store.unclaimed().await.unwrap(),
        0,
        "parked: nobody claims it"
    );
    assert_eq!(step.started.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_driver_whose_lease_is_taken_stops_at_once_with_its_steps() {
    let store = store();
    let a = engine(&store, "a").await;
    let step = Waits {
        for_ms: 100_000,
        ..Waits::default()
    };
    let wf = Arc::new(workflow(step.clone()));
    let run = RunId::from("r");
    let handle = a.start(&wf, run.clone()).await.unwrap();
    tokio::time::sleep(TTL / 2).await;
    assert_eq!(step.started.load(Ordering::SeqCst), 1);
    let before = events(&store, &run).await.len();
    take_over(&store, &run, "b").await;
    // The next renewal (every ttl/3) finds the lease gone.
    match tokio::time::timeout(TTL, handle.outcome()).await {
        Ok(Err(EngineError::Store(StoreError::LeaseLost {
            owner, epoch: 1, ..
        }))) => {
            assert_eq!(owner, "a")
        }
        other => panic!("expected LeaseLost within the ttl, got {other:?}"),
    }
    assert_eq!(
        step.stopped.load(Ordering::SeqCst),
        1,
        "its step stopped too"
    );
    assert_eq!(
        events(&store, &run).await.len(),
        before,
        "nothing appended after"
    );
    assert_eq!(
        store.lease(&run).await.unwrap().unwrap().owner,
        "b",
        "not parked"
    );
}

#[tokio::test(start_paused = true)]
async fn an_append_after_a_takeover_is_fenced_and_stops_the_driver() {
    let store = store();
    let a = engine(&store, "a").await;
    let go = Arc::new(Notify::new());
    let step = Waits {
        go: Some(go.clone()),
        ..Waits::default()
    };
    let wf = Arc::new(workflow(step.clone()));
    let run = RunId::from("r");
    let handle = a.start(&wf, run.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let before = events(&store, &run).await.len();
    let epoch = take_over(&store, &run, "b").await;
    // The step ends before the next renewal: its success is appended under the old epoch.
    go.notify_one();
    match handle.outcome().await {
        Err(EngineError::Store(StoreError::Fenced {
            epoch: 1, current, ..
        })) => {
            assert_eq!(current, epoch)
        }
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert_eq!(
        events(&store, &run).await.len(),
        before,
        "the success was refused"
    );
}

#[tokio::test(start_paused = true)]
async fn a_claim_takes_over_a_dead_instance_run_after_its_ttl_and_finishes_it() {
    let store = store();
    let a = engine(&store, "a").await;
    let slow = Waits {
        for_ms: 100_000,
        ..Waits::default()
    };
    let wf = Arc::new(workflow(slow.clone()));
    let run = RunId::from("r");
    let handle = a.start(&wf, run.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    handle.abort(); // a crash: the lease stays until it expires
    let b = engine(&store, "b").await;
    let quick = Waits::default();
    let wf = Arc::new(workflow(quick.clone()));
    assert_eq!(
        b.claim().await.unwrap(),
        Vec::<RunId>::new(),
        "a's lease is live"
    );
    tokio::time::sleep(TTL).await;
    assert_eq!(b.claim().await.unwrap(), vec![run.clone()]);
    let lease = store.lease(&run).await.unwrap().unwrap();
    assert_eq!((lease.owner.as_str(), lease.epoch), ("b", 2));
    let status = b
        .resume(&wf, run.clone())
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Succeeded);
    let tail: Vec<(String, u32, String)> = events(&store, &run).await[1..]
        .iter()
        .map(|e| (e.kind.name().to_owned(), e.attempt, e.instance.clone()))
        .collect();
    let expected = [
        ("started", 1, "a"),
        ("interrupted", 1, "b"),
        ("started", 2, "b"),
        ("succeeded", 2, "b"),
    ];
    let expected: Vec<(String, u32, String)> = expected
        .iter()
        .map(|(k, n, i)| ((*k).to_owned(), *n, (*i).to_owned()))
        .collect();
    assert_eq!(tail, expected);
    assert_eq!(events(&store, &run).await[2].kind, EventKind::Interrupted);
    assert_eq!(quick.started.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_run_another_instance_drives_is_refused_to_resume_and_start() {
    let store = store();
    let a = engine(&store, "a").await;
    let b = engine(&store, "b").await;
    let go = Arc::new(Notify::new());
    let step = Waits {
        go: Some(go.clone()),
        ..Waits::default()
    };
    let wf_a = Arc::new(workflow(step.clone()));
    let wf_b = Arc::new(workflow(step.clone()));
    let run = RunId::from("r");
    let handle = a.start(&wf_a, run.clone()).await.unwrap();
    match b.resume(&wf_b, run.clone()).await.map(|_| ()) {
        Err(EngineError::Leased { owner, .. }) => assert_eq!(owner, "a"),
        other => panic!("expected Leased, got {other:?}"),
    }
    assert!(matches!(
        b.start(&wf_b, run.clone()).await.map(|_| ()),
        Err(EngineError::RunExists { .. })
    ));
    go.notify_one();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Succeeded);
    assert!(
        matches!(
            b.start(&wf_b, run.clone()).await.map(|_| ()),
            Err(EngineError::RunExists { .. })
        ),
        "a finished run exists too"
    );
    assert_eq!(
        store.lease(&run).await.unwrap(),
        None,
        "and b let go of its lease"
    );
}
