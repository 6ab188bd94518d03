//! The engine: starts runs and resumes them with the definition each pinned (one driver
//! task each), claims runs under leases, and keeps the view of all runs with its snapshots.
//! Operators' actions are in `operate.rs`, a signal to a waiting step in `signal.rs`.

mod operate;
mod signal;

pub use operate::OPERATOR_APPEND_TRIES;

use crate::driver::Driver;
use crate::lease::{Held, Leasing};
use crate::metrics::RunGauges;
use crate::view::View;
use crate::{Clock, EngineError, Workflow};
use apollo11_core::{EventKind, EventRef, Payload, RunId, Seq, WorkflowSpec};
use apollo11_machine::{RunState, RunStatus};
use apollo11_store::{
    offload, resolve, BlobStore, EventStore, NewEvent, SnapshotStore, StoreError,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// What the engine needs of a store.
pub trait Store: EventStore + SnapshotStore + BlobStore + 'static {}
impl<T: EventStore + SnapshotStore + BlobStore + 'static> Store for T {}

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Written in every event as the writer's identity.
    pub instance: String,
    /// Payloads larger than this go to the blob store.
    pub inline_payload_bytes_max: u32,
    /// A snapshot of every run's state is saved after this many appended events.
    pub snapshot_every_events: u64,
    /// What the engine's clock reads at open, in ms since the epoch; `None` (the default)
    /// reads the system's. A simulation sets it, so that a seed gives the same events.
    pub clock_start_ms: Option<u64>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            instance: format!("engine-{}", std::process::id()),
            inline_payload_bytes_max: apollo11_core::limits::PAYLOAD_INLINE_BYTES_MAX,
            snapshot_every_events: apollo11_core::limits::SNAPSHOT_EVERY_EVENTS,
            clock_start_ms: None,
        }
    }
}

/// State shared by the engine, its drivers and its snapshotter.
pub(crate) struct Shared<S> {
    pub store: Arc<S>,
    pub config: EngineConfig,
    pub clock: Clock,
    /// The leases runs are driven under, when the store is shared with other instances.
    pub leasing: Option<Leasing>,
    active: Mutex<BTreeMap<RunId, Arc<Notify>>>,
    view: tokio::sync::Mutex<View>,
    appended: AtomicU64,
    snapshot_due: Arc<Notify>,
    /// The runs the gauges count.
    pub runs: Arc<RunGauges>,
}

impl<S: Store> Shared<S> {
    /// Counts appended events; wakes the snapshotter every `snapshot_every_events`.
    pub fn appended(&self, events: u64) {
        let before = self.appended.fetch_add(events, Ordering::Relaxed);
        if before + events >= self.config.snapshot_every_events {
            self.snapshot_due.notify_one();
        }
    }

    /// Moves a payload over the inline limit to the blob store.
    pub async fn offload(&self, payload: Payload) -> Result<Payload, StoreError> {
        offload(
            self.store.as_ref(),
            payload,
            self.config.inline_payload_bytes_max,
        )
        .await
    }

    /// The payload a step's state points at (`payload_seq`), as recorded.
    pub async fn recorded_payload(
        &self,
        run_id: &RunId,
        seq: Option<Seq>,
    ) -> Result<Payload, StoreError> {
        crate::inspect::recorded_payload(self.store.as_ref(), run_id, seq).await
    }

    /// The bytes of the payload a step's state points at, fetched from the blob store when
    /// it is a reference; `None` when it points at none.
    pub async fn recorded_bytes(
        &self,
        run_id: &RunId,
        seq: Option<Seq>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        if seq.is_none() {
            return Ok(None);
        }
        let payload = self.recorded_payload(run_id, seq).await?;
        resolve(self.store.as_ref(), &payload).await.map(Some)
    }

    /// Folds the log's new events into the view and returns the view's lock.
    async fn caught_up_view(&self) -> Result<tokio::sync::MutexGuard<'_, View>, StoreError> {
        let mut view = self.view.lock().await;
        loop {
            let from = apollo11_core::EventId(view.watermark.0 + 1);
            let mut fold = |event: &EventRef<'_>| view.apply(event);
            if self
                .store
                .scan_from(from, 10_000, &mut fold)
                .await?
                .is_none()
            {
                crate::metrics::runs_held(crate::metrics::HELD_BY_ENGINE, view.runs());
                return Ok(view);
            }
        }
    }

    /// Under leases, the run's lease for this instance (`Err` naming its holder when
    /// another instance holds it); `None` without leases.
    async fn lease(&self, run_id: &RunId) -> Result<Option<Result<Held, EngineError>>, StoreError> {
        let Some(leasing) = &self.leasing else {
            return Ok(None);
        };
        let owner = &self.config.instance;
        if let Some(held) = leasing.acquire(run_id, owner, self.clock).await? {
            return Ok(Some(Ok(held)));
        }
        let holder = leasing.holder(run_id).await?;
        Ok(Some(Err(EngineError::Leased {
            run_id: run_id.clone(),
            owner: holder.map_or_else(|| "another instance".to_owned(), |l| l.owner),
        })))
    }

    /// The current state of a run, folded from its events.
    pub async fn run_state(&self, run_id: &RunId) -> Result<RunState, StoreError> {
        let mut state = RunState::new(run_id.clone());
        for event in self.store.read_run(run_id, Seq(1)).await? {
            state.apply(&event);
        }
        Ok(state)
    }

    /// `timeout = "auto"` for a step of a workflow.
    pub async fn auto_timeout_ms(&self, workflow: &str, step: &str, fallback_ms: u64) -> u64 {
        self.view
            .lock()
            .await
            .auto_timeout_ms(workflow, step, fallback_ms)
    }

    /// The run's driver, woken by `notify`, is done; returns whether someone appended to the
    /// run after the driver last looked (its wake-up unanswered). [`Engine::wake`] notifies
    /// under the same lock, so an append is either seen here or finds no driver to wake.
    fn finished(&self, run_id: &RunId, notify: &Notify) -> bool {
        self.active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(run_id);
        let mut notified = std::pin::pin!(notify.notified());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        std::future::Future::poll(notified.as_mut(), &mut cx).is_ready()
    }

    /// Makes `notify` the wake-up of the run's driver; false when it has one already.
    fn activate(&self, run_id: &RunId, notify: &Arc<Notify>) -> bool {
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        if active.contains_key(run_id) {
            return false;
        }
        active.insert(run_id.clone(), notify.clone());
        true
    }
}

/// Drives a run to its end, and again when an operator's action was appended after its
/// driver's last decision (the driver would otherwise end with the action unseen, and a
/// resume asked for at that moment is refused as `AlreadyRunning`): as a resume would, under
/// the run's lease, unless someone else drives it by then.
async fn drive_to_rest<S: Store>(
    shared: Arc<Shared<S>>,
    workflow: Arc<Workflow>,
    run_id: RunId,
    mut notify: Arc<Notify>,
    mut held: Option<Held>,
) -> Result<RunStatus, EngineError> {
    loop {
        let driver = Driver::new(
            shared.clone(),
            workflow.clone(),
            run_id.clone(),
            notify.clone(),
            held,
        );
        let outcome = match driver.await {
            Ok(driver) => driver.drive().await,
            Err(e) => Err(e),
        };
        if !shared.finished(&run_id, &notify) || outcome.is_err() {
            return outcome;
        }
        notify = Arc::new(Notify::new());
        if !shared.activate(&run_id, &notify) {
            return outcome;
        }
        held = match shared.lease(&run_id).await {
            Ok(None) => None,
            Ok(Some(Ok(held))) => Some(held),
            Ok(Some(Err(_))) | Err(_) => {
                shared.finished(&run_id, &notify);
                return outcome;
            }
        };
    }
}

/// Runs workflows on a store. Cheap to share: clone the `Arc` it lives in.
pub struct Engine<S: Store> {
    shared: Arc<Shared<S>>,
    snapshotter: JoinHandle<()>,
    closing: Arc<Notify>,
}

/// A run being driven; await its outcome.
pub struct RunHandle {
    run_id: RunId,
    join: JoinHandle<Result<RunStatus, EngineError>>,
}

impl RunHandle {
    /// The run.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// Waits for the run to reach a terminal status.
    ///
    /// # Errors
    ///
    /// [`EngineError::Stopped`] when the driver was aborted or panicked; the error that stopped
    /// the driver otherwise (a store failure, a fenced append, an unreadable definition).
    pub async fn outcome(self) -> Result<RunStatus, EngineError> {
        let run_id = self.run_id;
        self.join.await.unwrap_or_else(|e| {
            Err(EngineError::Stopped {
                run_id,
                reason: e.to_string(),
            })
        })
    }

    /// Stops driving the run at once, as a crash would (its running steps are aborted; a
    /// later resume finds them interrupted).
    pub fn abort(&self) {
        self.join.abort();
    }

    /// A handle that can [`abort`](RunHandle::abort) the run while `outcome` is awaited.
    pub fn abort_handle(&self) -> tokio::task::AbortHandle {
        self.join.abort_handle()
    }
}

impl<S: Store> Engine<S> {
    /// Opens an engine on `store`: loads the newest snapshot and folds the events after it.
    ///
    /// # Errors
    ///
    /// [`EngineError::Store`] when the snapshot or the events after it cannot be read.
    pub async fn open(store: Arc<S>, config: EngineConfig) -> Result<Engine<S>, EngineError> {
        Engine::open_with(store, config, None).await
    }

    /// Opens an engine that shares `store` with other instances: it drives a run only while
    /// it holds the run's lease (from `leasing`, which must be `store`'s), appends fenced by
    /// it, and stops driving the run at once when the lease is lost. [`Engine::claim`] takes
    /// this instance's share of the runs that need a driver.
    ///
    /// # Errors
    ///
    /// As [`Engine::open`].
    pub async fn open_leased(
        store: Arc<S>,
        config: EngineConfig,
        leasing: Leasing,
    ) -> Result<Engine<S>, EngineError> {
        Engine::open_with(store, config, Some(leasing)).await
    }

    /// [`Engine::open`] or, with `leasing`, [`Engine::open_leased`].
    ///
    /// # Errors
    ///
    /// As [`Engine::open`].
    pub async fn open_with(
        store: Arc<S>,
        config: EngineConfig,
        leasing: Option<Leasing>,
    ) -> Result<Engine<S>, EngineError> {
        let started = std::time::Instant::now();
        let view = View::from_snapshot(store.load_snapshot().await?);
        let clock = config
            .clock_start_ms
            .map_or_else(Clock::system, Clock::starting_at);
        let shared = Arc::new(Shared {
            store,
            config,
            clock,
            leasing,
            active: Mutex::new(BTreeMap::new()),
            view: tokio::sync::Mutex::new(view),
            appended: AtomicU64::new(0),
            snapshot_due: Arc::new(Notify::new()),
            runs: Arc::default(),
        });
        let runs = shared.caught_up_view().await?.runs();
        let seconds = started.elapsed().as_secs_f64();
        crate::metrics::engine_opened(seconds);
        tracing::info!(runs, seconds, "engine opened");
        let closing = Arc::new(Notify::new());
        let snapshotter = tokio::spawn(snapshotter(
            Arc::downgrade(&shared),
            shared.snapshot_due.clone(),
            closing.clone(),
        ));
        Ok(Engine {
            shared,
            snapshotter,
            closing,
        })
    }

    /// Stops the engine's background work after a last snapshot of the view, if any event
    /// was appended since the previous one, so the next open folds nothing twice. Runs being
    /// driven are not affected; dropping the engine without closing it stops the same work
    /// without waiting and without that snapshot.
    pub async fn close(mut self) {
        self.closing.notify_one();
        let _ = (&mut self.snapshotter).await;
    }

    /// Creates run `run_id` of `workflow` and drives it. The run pins `workflow`
    /// instantiated with the arguments its definition holds ([`Workflow::instantiate`]: a
    /// declared workflow has none, so its parameters take their defaults); give
    /// `workflow.instantiate(&arguments)?` to start a run with arguments.
    ///
    /// # Errors
    ///
    /// [`EngineError::Workflow`] when the workflow cannot be instantiated (a required
    /// parameter with no value, a list too long): nothing is written;
    /// [`EngineError::RunExists`] when `run_id` is taken; [`EngineError::Store`] when the
    /// definition or the run's first event cannot be written.
    ///
    /// # Panics
    ///
    /// Never in practice: a [`WorkflowSpec`] always serializes to JSON.
    pub async fn start(
        &self,
        workflow: &Arc<Workflow>,
        run_id: RunId,
    ) -> Result<RunHandle, EngineError> {
        let workflow = &workflow.instantiate(&workflow.spec().arguments)?;
        let definition = serde_json::to_vec(workflow.spec()).expect("a spec always serializes");
        let payload = self.shared.offload(Payload::Inline(definition)).await?;
        let created = NewEvent {
            step: None,
            kind: EventKind::RunCreated {
                workflow: workflow.spec().name.clone(),
            },
            attempt: 0,
            at_ms: self.shared.clock.now_ms(),
            instance: self.shared.config.instance.clone(),
            payload,
        };
        let held = self.shared.lease(&run_id).await?;
        let appended = match &held {
            Some(Ok(held)) => held.append(Seq(1), vec![created]).await,
            // Another instance holds it: it exists, or is being created.
            Some(Err(_)) => return Err(EngineError::RunExists { run_id }),
            None => {
                let store = &self.shared.store;
                store.append(&run_id, Seq(1), vec![created]).await
            }
        };
        match appended {
            Err(StoreError::Conflict { .. }) => {
                if let Some(Ok(held)) = held {
                    held.release().await?;
                }
                return Err(EngineError::RunExists { run_id });
            }
            other => other?,
        };
        self.shared.appended(1);
        self.drive(run_id, workflow.clone(), held.and_then(Result::ok))
            .await
    }

    /// The ttl of this engine's leases; `None` without leases.
    pub fn lease_ttl(&self) -> Option<std::time::Duration> {
        self.shared.leasing.as_ref().map(Leasing::ttl)
    }

    /// Takes this instance's fair share of the runs that need a driver and have none (new
    /// runs no instance took, runs whose lease expired): ceil(unclaimed / live instances),
    /// after recording that this instance is alive. Returns the runs claimed: drive each
    /// with [`Engine::resume`], given the workflow its pinned definition builds (the resume
    /// holds the lease on, at the same epoch). Without
    /// leases (an engine opened with [`Engine::open`]) there is nothing to share: none.
    ///
    /// # Errors
    ///
    /// [`EngineError::Store`] when the heartbeat, the count or the claim fails.
    pub async fn claim(&self) -> Result<Vec<RunId>, EngineError> {
        let Some(leasing) = &self.shared.leasing else {
            return Ok(Vec::new());
        };
        let claimed = leasing.claim(&self.shared.config.instance).await?;
        Ok(claimed.into_iter().map(|lease| lease.run_id).collect())
    }

    /// Drives an existing run again (after a crash, a pause, or an override) with
    /// `workflow`, which must be the definition the run was created with, declared or
    /// instantiated (the declared one instantiated with the run's arguments must be the
    /// pinned one): a run is always driven by the definition it pinned. An operator's pause stays in force (the run ends
    /// `paused` at once, having started nothing) until [`Engine::unpause`] lifts it.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownRun`]; [`EngineError::UnknownWorkflow`] when `workflow` is not
    /// the run's workflow; [`EngineError::DefinitionChanged`] when its definition differs
    /// from the pinned one; [`EngineError::BadDefinition`]; [`EngineError::AlreadyRunning`]
    /// when this engine drives the run already; [`EngineError::Store`].
    pub async fn resume(
        &self,
        workflow: &Arc<Workflow>,
        run_id: RunId,
    ) -> Result<RunHandle, EngineError> {
        let state = self.shared.run_state(&run_id).await?;
        let pinned = self.pinned_spec(&state).await?;
        let given = workflow.spec();
        if given.name != pinned.name {
            return Err(EngineError::UnknownWorkflow {
                run_id,
                workflow: pinned.name,
            });
        }
        let instantiated = match *given == pinned {
            true => Some(workflow.clone()),
            false => (workflow.instantiate(&pinned.arguments).ok()).filter(|w| *w.spec() == pinned),
        };
        let Some(workflow) = instantiated else {
            return Err(EngineError::DefinitionChanged {
                run_id,
                workflow: pinned.name,
            });
        };
        self.drive(run_id, workflow, None).await
    }

    /// Forgets `runs`, which a `gc` moved out of the store's live log (`Collected::moved`):
    /// the view drops what it kept of them and is saved as a snapshot at once, so a restart
    /// does not bring them back from an older one. Their state is read from the archive on
    /// demand as before ([`Engine::state`]); what they taught `timeout = "auto"` stays.
    /// A failed snapshot is logged: the runs come back at the next open until one is saved.
    pub async fn forget(&self, runs: &[RunId]) {
        let mut view = self.shared.view.lock().await;
        view.forget(runs);
        crate::metrics::runs_held(crate::metrics::HELD_BY_ENGINE, view.runs());
        drop(view);
        save_snapshot(&self.shared).await;
    }

    /// How many runs the engine's view holds once it has folded the log's new events (each
    /// run created in the store's live log: a few bytes each, until a `gc` moves it out and
    /// [`Engine::forget`] is told).
    ///
    /// # Errors
    ///
    /// [`EngineError::Store`] when the log cannot be read.
    pub async fn runs_held(&self) -> Result<usize, EngineError> {
        Ok(self.shared.caught_up_view().await?.runs())
    }

    /// Whether this engine drives `run_id` now (started or resumed here, not yet at rest).
    /// Says nothing of a run another instance drives.
    pub fn drives(&self, run_id: &RunId) -> bool {
        let active = self.shared.active.lock().unwrap_or_else(|p| p.into_inner());
        active.contains_key(run_id)
    }

    /// The current state of a run.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownRun`], or [`EngineError::Store`] when the run cannot be read.
    pub async fn state(&self, run_id: &RunId) -> Result<RunState, EngineError> {
        let state = self.shared.run_state(run_id).await?;
        if state.last_seq.0 == 0 {
            return Err(EngineError::UnknownRun {
                run_id: run_id.clone(),
            });
        }
        Ok(state)
    }

    /// The payload a step of a run recorded last: the output of its success, or the marker
    /// it left before failing (`Payload::Empty` when it has none). Run states point at
    /// payloads (`StepState::payload_seq`) rather than hold them; this reads one.
    ///
    /// # Errors
    ///
    /// As [`Engine::state`], and [`EngineError::Store`] when the payload's blob cannot be read.
    pub async fn step_payload(&self, run_id: &RunId, step: &str) -> Result<Payload, EngineError> {
        let state = self.state(run_id).await?;
        let seq = state.step(step).payload_seq;
        Ok(self.shared.recorded_payload(run_id, seq).await?)
    }

    pub(crate) async fn pinned_spec(&self, state: &RunState) -> Result<WorkflowSpec, EngineError> {
        if state.workflow.is_none() {
            return Err(EngineError::UnknownRun {
                run_id: state.run_id.clone(),
            });
        }
        let store = self.shared.store.as_ref();
        crate::inspect::pinned_spec(store, &state.run_id, &state.definition).await
    }

    /// Drives a run in a task of its own; under leases, with `held`, or with its lease
    /// acquired here (refused with [`EngineError::Leased`] when another instance holds it).
    async fn drive(
        &self,
        run_id: RunId,
        workflow: Arc<Workflow>,
        held: Option<Held>,
    ) -> Result<RunHandle, EngineError> {
        let held = match held {
            Some(held) => Some(held),
            None => self.shared.lease(&run_id).await?.transpose()?,
        };
        let notify = Arc::new(Notify::new());
        if !self.shared.activate(&run_id, &notify) {
            return Err(EngineError::AlreadyRunning { run_id });
        }
        let shared = self.shared.clone();
        let id = run_id.clone();
        let join = tokio::spawn(drive_to_rest(shared, workflow, id, notify, held));
        Ok(RunHandle { run_id, join })
    }
}

impl<S: Store> Drop for Engine<S> {
    fn drop(&mut self) {
        self.snapshotter.abort();
    }
}

/// Saves a snapshot of the view whenever enough events were appended, and at closing if
/// any were. A failed snapshot is logged and retried at the next trigger: the log stays the
/// truth.
async fn snapshotter<S: Store>(
    shared: std::sync::Weak<Shared<S>>,
    due: Arc<Notify>,
    closing: Arc<Notify>,
) {
    loop {
        // Biased: the same readiness gives the same choice (a simulation replays exactly).
        let last = tokio::select! {
            biased;
            () = due.notified() => false,
            () = closing.notified() => true,
        };
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if shared.appended.swap(0, Ordering::Relaxed) > 0 || !last {
            save_snapshot(&shared).await;
        }
        if last {
            return;
        }
    }
}

async fn save_snapshot<S: Store>(shared: &Shared<S>) {
    let saved = async {
        let view = shared.caught_up_view().await?;
        let snapshot = view.to_snapshot()?;
        drop(view);
        shared.store.save_snapshot(snapshot).await
    };
    if let Err(e) = saved.await {
        tracing::warn!(error = %e, "snapshot not saved");
    }
}
