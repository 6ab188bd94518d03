//! A scenario played on the production engine: generations of `Engine` on the medium, each
//! ended by its crash (power loss, sync error, kill) and followed by a reopen and a resume
//! of every run; the operator's actions at their simulated times (a run left without a
//! driver is driven again after one); a last generation without faults, where the operator
//! settles what waits for a person, until every run has ended. All of it on one
//! current-thread runtime whose clock only moves when every task waits.

use crate::check::{check, Played};
use crate::fleet::Fleet;
use crate::remote::Post;
use crate::scenario::{Action, Crash, Scenario, Takeover, Timed, WaitPlan};
use crate::steps::{workflow, Ledger};
use crate::store::{Acks, Medium, Recorded};
use apollo11_core::{Event, EventId, EventKind, FailureClass, OverrideTarget, RunId};
use apollo11_machine::{RunStatus, StepStatus};
use apollo11_runtime::{
    Engine, EngineConfig, EngineError, EventStore, Inspector, Leasing, RunHandle, StoreError,
    Workflow,
};
use apollo11_store::Acked;
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::{Duration, Instant};

/// Simulated time after which runs still going count as stuck (I4).
pub const HORIZON_MS: u64 = 3_600_000;
/// The same on a medium that runs on real time.
pub const REAL_HORIZON_MS: u64 = 120_000;
/// What the engine's clock reads when the simulation begins.
const CLOCK_START_MS: u64 = 1_800_000_000_000;
/// How often the operator looks for steps waiting for a signal.
const SIGNAL_EVERY: Duration = Duration::from_millis(20);
/// Rounds of the operator settling paused runs in the last generation.
const SETTLE_ROUNDS: usize = 16;
const BY: &str = "sim";

/// What a played scenario amounted to.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Events in the final log.
    pub events: u64,
    /// Crashes that struck: power losses and sync errors whose sync came (one armed past
    /// the generation's last sync does not), and kills.
    pub crashes: u32,
    /// Tries on workers: `Placed` events in the final log.
    pub placed: u64,
    /// Attempts failed because their worker went silent (`worker_lost`).
    pub lost: u64,
    /// Waiting steps ended by the operator's signal (`Signalled`).
    pub signalled: u64,
    /// The final log, one line an event.
    pub history: Vec<String>,
}

/// Why a scenario failed: the violated invariant, and the history up to it.
#[derive(Clone, Debug)]
pub struct Failure {
    /// What was violated (or what went wrong), named.
    pub message: String,
    /// The log as it was when the failure was found, one line an event (may be empty).
    pub history: Vec<String>,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure {
            message,
            history: Vec::new(),
        }
    }
}

/// Plays `scenario` on `medium` and checks every invariant.
///
/// # Errors
///
/// The first violation found.
pub async fn play<M: Medium>(scenario: &Scenario, medium: &mut M) -> Result<Outcome, Failure> {
    let ledger = Ledger::default();
    let post = Post::default();
    let _fleet =
        (scenario.remote.as_ref()).map(|r| Fleet::start(r, &post, &ledger, Instant::now()));
    let mut world = World {
        scenario,
        workflow: Arc::new(workflow(scenario, &ledger, &post)?),
        post,
        acks: Acks::default(),
        start: Instant::now(),
        actions: scenario.actions.iter().cloned().collect(),
        simulated: M::SIMULATED_TIME,
    };
    let mut crashes = 0;
    for (g, crash) in scenario.crashes.iter().enumerate() {
        let (store, leasing) = world.open(medium, g).await?;
        let kill_ms = match (medium.arm(*crash), *crash) {
            (true, Crash::Kill { after_ms }) => Some(after_ms),
            (true, _) => None,
            (false, Crash::PowerLoss { at_sync, .. } | Crash::SyncError { at_sync }) => {
                Some(u64::from(at_sync) * 20)
            }
            (false, Crash::Kill { after_ms }) => Some(after_ms),
        };
        let kill_at = kill_ms.map(|ms| world.now_ms() + ms);
        let struck = match world.generation(g, medium, &store, leasing, kill_at).await {
            Ok(struck) => struck,
            Err(message) => return Err(with_history(store.as_ref(), message).await),
        };
        crashes += u32::from(struck || kill_at.is_some());
        medium.recover(*crash);
    }
    let g = scenario.crashes.len();
    let (store, leasing) = world.open(medium, g).await?;
    let inspector = Inspector::new(store.clone());
    world.post.open(g);
    let last = async {
        let engine = world.engine(g, store.clone(), leasing).await?;
        let mut driven = Driven::default();
        world.resume_all(&engine, &store, &mut driven, true).await?;
        world.drive(&engine, &mut driven, None, true).await?;
        world
            .settle(&engine, &store, &inspector, &mut driven)
            .await?;
        let events = all_events(store.as_ref()).await?;
        let played = Played {
            scenario,
            events: &events,
            acks: world.acks.all(),
            executions: ledger.executions(),
        };
        check(&played, &inspector).await?;
        medium.verify()?;
        Ok::<_, String>(events)
    };
    match last.await {
        Ok(events) => Ok(Outcome {
            events: events.len() as u64,
            crashes,
            placed: count(&events, |k| matches!(k, EventKind::Placed { .. })),
            lost: count(&events, |k| {
                k.failure()
                    .is_some_and(|f| f.class == FailureClass::WorkerLost)
            }),
            signalled: count(&events, |k| matches!(k, EventKind::Signalled { .. })),
            history: events.iter().map(line).collect(),
        }),
        Err(message) => Err(with_history(store.as_ref(), message).await),
    }
}

fn count(events: &[Event], kind: impl Fn(&EventKind) -> bool) -> u64 {
    events.iter().filter(|e| kind(&e.kind)).count() as u64
}

/// `message` with the history `store` holds now.
async fn with_history(store: &impl EventStore, message: String) -> Failure {
    let events = all_events(store).await.unwrap_or_default();
    Failure {
        message,
        history: events.iter().map(line).collect(),
    }
}

fn i5(generation: usize, e: apollo11_runtime::StoreError) -> String {
    format!("I5: the store does not open after generation {generation}'s crash: {e}")
}

/// One line of history: `#id run/seq step kind attempt at`.
pub fn line(e: &Event) -> String {
    let step = e.step.as_ref().map_or("-", |s| s.as_str());
    format!(
        "#{} {}/{} {step} {} a{} +{}ms",
        e.event_id.0,
        e.run_id.as_str(),
        e.seq.0,
        e.kind.name(),
        e.attempt,
        e.at_ms.saturating_sub(CLOCK_START_MS)
    )
}

/// Every event of `store`, in id order.
async fn all_events(store: &impl EventStore) -> Result<Vec<Event>, String> {
    let mut events: Vec<Event> = Vec::new();
    loop {
        let from = EventId(events.last().map_or(1, |e| e.event_id.0 + 1));
        let more = (store.read_from(from, 1_000).await)
            .map_err(|e| format!("reading the final log: {e}"))?;
        if more.is_empty() {
            return Ok(events);
        }
        events.extend(more);
    }
}

struct World<'s> {
    scenario: &'s Scenario,
    workflow: Arc<Workflow>,
    /// The dispatcher of the generation running now, for placed steps and workers.
    post: Post,
    acks: Acks,
    start: Instant,
    actions: VecDeque<Timed>,
    /// On tokio's paused clock; else on real time, where the world skips ahead over what
    /// nobody waits for (as the paused clock does).
    simulated: bool,
}

/// The runs an engine drives, and how to stop them.
#[derive(Default)]
struct Driven {
    waiting: JoinSet<(RunId, Result<RunStatus, EngineError>)>,
    aborts: Vec<AbortHandle>,
}

impl Driven {
    fn add(&mut self, handle: RunHandle) {
        let run = handle.run_id().clone();
        self.aborts.push(handle.abort_handle());
        self.waiting
            .spawn(async move { (run, handle.outcome().await) });
    }

    /// Stops every driver at once, as a crash of the process would: none runs again.
    fn abort(&mut self) {
        self.aborts.drain(..).for_each(|a| a.abort());
    }

    /// Waits until the aborted drivers are gone.
    async fn join(&mut self) {
        while self.waiting.join_next().await.is_some() {}
    }
}

type Store<S> = Recorded<S>;

impl World<'_> {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn horizon_ms(&self) -> u64 {
        if self.simulated {
            HORIZON_MS
        } else {
            REAL_HORIZON_MS
        }
    }

    /// On real time, with nothing running: moves the world's clock on to `ms` at once, as
    /// a paused clock would.
    fn skip_to(&mut self, ms: u64) {
        let now = self.now_ms();
        if !self.simulated && ms > now {
            self.start -= Duration::from_millis(ms - now);
        }
    }

    /// Generation `g`'s store, opened as a new process would, and its leases.
    async fn open<M: Medium>(
        &self,
        medium: &mut M,
        g: usize,
    ) -> Result<(Arc<Store<M::Store>>, Option<Leasing>), String> {
        let opened = medium.open().await.map_err(|e| i5(g, e))?;
        let store = Arc::new(Acked::new(opened, self.acks.clone()));
        let leasing = (medium.leasing(&store))
            .map_err(|e| format!("generation {g}: the store's leases: {e}"))?;
        Ok((store, leasing))
    }

    /// Who drives generation `g`: the owner of the generation before, unless the crash
    /// between them hands the runs over to a new one.
    fn owner(&self, g: usize) -> String {
        let first = (1..=g)
            .rev()
            .find(|&j| self.scenario.takeovers[j - 1] == Takeover::NewOwner)
            .unwrap_or(0);
        format!("sim-{first}")
    }

    fn run_id(&self, i: usize) -> RunId {
        RunId::from(format!("run-{i}").as_str())
    }

    async fn engine<S>(
        &self,
        g: usize,
        store: Arc<Store<S>>,
        leasing: Option<Leasing>,
    ) -> Result<Engine<Store<S>>, String>
    where
        Store<S>: apollo11_runtime::Store,
    {
        let config = EngineConfig {
            instance: self.owner(g),
            snapshot_every_events: 25,
            clock_start_ms: Some(CLOCK_START_MS + self.now_ms()),
            ..EngineConfig::default()
        };
        Engine::open_with(store, config, leasing)
            .await
            .map_err(|e| format!("generation {g}: the engine does not open: {e}"))
    }

    /// A generation that ends in a crash: returns whether a fault of the medium struck.
    async fn generation<M: Medium>(
        &mut self,
        g: usize,
        medium: &mut M,
        store: &Arc<Store<M::Store>>,
        leasing: Option<Leasing>,
        kill_at: Option<u64>,
    ) -> Result<bool, String> {
        let engine = self.engine(g, store.clone(), leasing).await?;
        let mut driven = Driven::default();
        self.post.open(g);
        if g == 0 {
            for i in 0..self.scenario.runs {
                match engine.start(&self.workflow, self.run_id(i)).await {
                    Ok(handle) => driven.add(handle),
                    Err(EngineError::Store(_)) => {}
                    Err(e) => return Err(format!("starting run-{i}: {e}")),
                }
            }
        } else {
            self.resume_all(&engine, store, &mut driven, false).await?;
        }
        self.drive(&engine, &mut driven, kill_at, false).await?;
        driven.abort();
        self.post.close();
        (medium.crash(store.inner()).await).map_err(|e| format!("generation {g}'s crash: {e}"))?;
        let struck = store.last_event_id().await.is_err();
        driven.join().await;
        drop(engine);
        // Aborted tasks are dropped when the scheduler next runs: the store (and the data
        // dir's lock) is free once they are.
        for _ in 0..10_000 {
            if Arc::strong_count(store) == 1 {
                return Ok(struck);
            }
            tokio::task::yield_now().await;
        }
        Err(format!(
            "generation {g}: the store is still held after its engine was dropped"
        ))
    }

    /// Resumes every run; a store error leaves a run undriven, but in the last generation
    /// (`last`), where the store suffers no fault, it is a failure.
    async fn resume_all<S>(
        &self,
        engine: &Engine<Store<S>>,
        store: &Store<S>,
        driven: &mut Driven,
        last: bool,
    ) -> Result<(), String>
    where
        Store<S>: apollo11_runtime::Store,
    {
        let runs = (store.list_runs().await).map_err(|e| format!("listing runs: {e}"))?;
        for summary in runs {
            match resume_when_free(engine, &self.workflow, &summary.run_id).await {
                Ok(handle) => driven.add(handle),
                Err(EngineError::Store(_)) if !last => {}
                Err(e) => return Err(format!("resuming {}: {e}", summary.run_id.as_str())),
            }
        }
        Ok(())
    }

    /// Drives until every run's driver ended and no action is left (or the store stopped),
    /// or until `kill_at`. In the last generation (`last`) a driver's error is a failure.
    async fn drive<S>(
        &mut self,
        engine: &Engine<Store<S>>,
        driven: &mut Driven,
        kill_at: Option<u64>,
        last: bool,
    ) -> Result<(), String>
    where
        Store<S>: apollo11_runtime::Store,
    {
        loop {
            let idle = driven.waiting.is_empty();
            if idle && (self.actions.is_empty() || engine_stopped(engine).await) {
                return Ok(());
            }
            let horizon = self.horizon_ms();
            let next = self.actions.front().map(|a| a.at_ms);
            let wake = [next, kill_at]
                .into_iter()
                .flatten()
                .fold(horizon, u64::min);
            if idle {
                self.skip_to(wake);
            }
            let wake = self.start + Duration::from_millis(wake);
            tokio::select! {
                biased;
                Some(joined) = driven.waiting.join_next(), if !idle => {
                    let (run, outcome) = joined.map_err(|e| format!("a run's waiter: {e}"))?;
                    match outcome {
                        // As an instance sharing the store would claim it again.
                        Err(EngineError::Store(StoreError::LeaseLost { .. })) => {
                            match resume_when_free(engine, &self.workflow, &run).await {
                                Ok(handle) => driven.add(handle),
                                Err(e) if last => {
                                    return Err(format!("{}: its lease lost, it is not driven again: {e}", run.as_str()));
                                }
                                Err(_) => {}
                            }
                        }
                        Err(e) if last => {
                            return Err(format!("{}: its driver stopped: {e}", run.as_str()));
                        }
                        _ => {}
                    }
                }
                () = tokio::time::sleep(SIGNAL_EVERY), if self.signals() => {
                    self.signal_waiting(engine).await;
                }
                () = tokio::time::sleep_until(wake) => {
                    let now = self.now_ms();
                    if now >= horizon {
                        return Err(format!("I4: runs still going after {horizon} ms"));
                    }
                    if kill_at.is_some_and(|k| now >= k) {
                        return Ok(());
                    }
                    if let Some(timed) = self.actions.pop_front() {
                        let run = self.run_id(timed.run);
                        let done = self.act(engine, &run, &timed.action).await?;
                        // As a server does: a run driven already refuses (`AlreadyRunning`).
                        if done {
                            drive_again(engine, &self.workflow, run, driven).await;
                        }
                    }
                }
            }
        }
    }

    /// Whether a step of the scenario waits for a signal.
    fn signals(&self) -> bool {
        (self.scenario.steps.iter()).any(|p| matches!(p.wait, Some(WaitPlan::Signal { .. })))
    }

    /// The operator's signal to each step that has waited for one as long as its plan says
    /// (refused when it no longer waits: an everyday answer).
    async fn signal_waiting<S>(&self, engine: &Engine<Store<S>>)
    where
        Store<S>: apollo11_runtime::Store,
    {
        let now = CLOCK_START_MS + self.now_ms();
        for i in 0..self.scenario.runs {
            let run = self.run_id(i);
            let Ok(state) = engine.state(&run).await else {
                continue;
            };
            for plan in &self.scenario.steps {
                let Some(WaitPlan::Signal { after_ms }) = plan.wait else {
                    continue;
                };
                let step = state.steps.get(plan.name.as_str());
                let waited = step.filter(|s| s.status == StepStatus::Running);
                if waited
                    .and_then(|s| s.started_ms)
                    .is_some_and(|at| at + after_ms <= now)
                {
                    let _ = engine
                        .signal(&run, &plan.name, None, BY, "simulated approval")
                        .await;
                }
            }
        }
    }

    /// An operator's action; whether it was recorded. Refusals (not allowed now, unknown
    /// run, store stopped) are an operator's everyday answers.
    async fn act<S>(
        &self,
        engine: &Engine<Store<S>>,
        run: &RunId,
        action: &Action,
    ) -> Result<bool, String>
    where
        Store<S>: apollo11_runtime::Store,
    {
        let why = "simulated operator";
        let result = match action {
            Action::Pause => engine.pause(run, BY, why).await,
            Action::Unpause => engine.unpause(run, BY, why).await,
            Action::Rollback => engine.request_rollback(run, BY, why).await,
            Action::Override { step, to } => {
                let step = &self.scenario.steps[*step].name;
                engine.override_step(run, step, *to, BY, why).await
            }
            Action::Skip { step } => {
                (engine.override_step(run, step, OverrideTarget::Skipped, BY, why)).await
            }
            Action::Rerun { step, downstream } => {
                let step = &self.scenario.steps[*step].name;
                engine.rerun(run, step, *downstream, BY, why).await
            }
        };
        match result {
            Ok(_) => Ok(true),
            Err(
                EngineError::NotAllowed { .. }
                | EngineError::OverrideNotAllowed { .. }
                | EngineError::RerunNotAllowed { .. }
                | EngineError::UnknownRun { .. }
                | EngineError::Store(_),
            ) => Ok(false),
            Err(e) => Err(format!("{action:?} on {}: {e}", run.as_str())),
        }
    }

    /// The last generation's operator: lifts pauses, skips a step whose compensation is out
    /// of tries, rolls back runs paused by a failure, and drives each again, until every run has ended
    /// (I4) or the rounds run out.
    async fn settle<S>(
        &mut self,
        engine: &Engine<Store<S>>,
        store: &Store<S>,
        inspector: &Inspector<Store<S>>,
        driven: &mut Driven,
    ) -> Result<(), String>
    where
        Store<S>: apollo11_runtime::Store,
    {
        let mut reran = BTreeSet::new();
        for _ in 0..SETTLE_ROUNDS {
            let mut acted = false;
            for summary in (store.list_runs().await).map_err(|e| format!("listing runs: {e}"))? {
                let run = summary.run_id;
                let view = inspector
                    .status(&run, None)
                    .await
                    .map_err(|e| e.to_string())?;
                match view.state {
                    RunStatus::Paused => {}
                    RunStatus::Succeeded if self.rerun_due() && reran.insert(run.clone()) => {
                        acted |= self.rerun(engine, run, driven).await?;
                        continue;
                    }
                    RunStatus::Succeeded | RunStatus::RolledBack => continue,
                    other => {
                        return Err(format!("{}: {} with no driver", run.as_str(), other.name()))
                    }
                }
                let state = engine.state(&run).await.map_err(|e| e.to_string())?;
                acted = true;
                let mut actions: Vec<Action> = (state.steps.iter())
                    .filter(|(_, s)| s.status == StepStatus::CompensationFailed)
                    .map(|(step, _)| Action::Skip {
                        step: step.as_str().to_owned(),
                    })
                    .collect();
                if state.paused.is_some() {
                    actions.push(Action::Unpause);
                } else if actions.is_empty() && state.rollback.is_none() {
                    actions.push(Action::Rollback);
                }
                for action in &actions {
                    self.act(engine, &run, action).await?;
                }
                drive_again(engine, &self.workflow, run, driven).await;
            }
            if !acted {
                return Ok(());
            }
            self.drive(engine, driven, None, true).await?;
        }
        Err(format!(
            "I4: runs still paused after {SETTLE_ROUNDS} rounds of the operator"
        ))
    }

    /// Whether the last generation's operator reruns each succeeded run once: in one seed
    /// of three.
    fn rerun_due(&self) -> bool {
        self.scenario.seed.is_multiple_of(3)
    }

    /// A rerun of a succeeded run (a step the seed picks; downstream in even seeds), driven
    /// again when accepted; whether it was.
    async fn rerun<S>(
        &self,
        engine: &Engine<Store<S>>,
        run: RunId,
        driven: &mut Driven,
    ) -> Result<bool, String>
    where
        Store<S>: apollo11_runtime::Store,
    {
        let seed = self.scenario.seed as usize;
        let action = Action::Rerun {
            step: (seed / 3) % self.scenario.steps.len(),
            downstream: seed.is_multiple_of(2),
        };
        let accepted = self.act(engine, &run, &action).await?;
        if accepted {
            drive_again(engine, &self.workflow, run, driven).await;
        }
        Ok(accepted)
    }
}

async fn drive_again<S>(
    engine: &Engine<Store<S>>,
    workflow: &Arc<Workflow>,
    run: RunId,
    driven: &mut Driven,
) where
    Store<S>: apollo11_runtime::Store,
{
    // A refusal leaves the run as it is; the checks judge the result.
    if let Ok(handle) = engine.resume(workflow, run).await {
        driven.add(handle);
    }
}

/// Resumes `run`; under leases, as an instance sharing the store would: once the lease a
/// crashed owner held on it has run out, and again after an error a retry may cure (the
/// database busy), for at most three ttls (a lease left longer is an error).
async fn resume_when_free<S>(
    engine: &Engine<Store<S>>,
    workflow: &Arc<Workflow>,
    run: &RunId,
) -> Result<RunHandle, EngineError>
where
    Store<S>: apollo11_runtime::Store,
{
    let ttl = engine.lease_ttl().unwrap_or_default();
    let deadline = Instant::now() + 3 * ttl;
    loop {
        match engine.resume(workflow, run.clone()).await {
            Err(EngineError::Leased { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(ttl / 5).await;
            }
            Err(EngineError::Store(e)) if e.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(ttl / 5).await;
            }
            other => return other,
        }
    }
}

async fn engine_stopped<S>(engine: &Engine<Store<S>>) -> bool
where
    Store<S>: apollo11_runtime::Store,
{
    // Any run will do: a stopped store refuses every read.
    engine
        .state(&RunId::from("run-0"))
        .await
        .is_err_and(|e| matches!(e, EngineError::Store(_)))
}
