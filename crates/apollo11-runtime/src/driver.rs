//! The driver of one run: fold, decide, append, execute, repeat. Every state change is
//! appended before anything acts on it (a step starts only once its `Started` is durable),
//! so a crash at any instant leaves a log from which `decide` knows what to do. Where tries
//! run and how a try the driver did not see end is settled are in `settle.rs`.

mod adopt;
mod condition;
mod expand;
mod first_poll;
mod gauges;
mod inputs;
mod recorded;
mod running;
mod settle;

use crate::engine::{Shared, Store};
use crate::lease::{Held, LostSignal};
use crate::metrics;
use crate::step::{Cancel, Leftover, PlaceRequest, Placer, RecordedHook};
use crate::{EngineError, Output, StepContext, StepError, Try, TryKind, Workflow, WorkflowError};
use apollo11_core::{
    limits, AttemptFailure, EventKind, FailureClass, Idempotency, Payload, RunId, Seq, StepName,
    StepSpec, Usage, Value, WorkflowSpec,
};
use apollo11_machine::{Command, FailReason, Now, RunMachine, RunState, RunStatus};
use apollo11_store::{resolve, NewEvent, StoreError};
use expand::{learn_auto, load};
use first_poll::{poll_once, Polled};
use gauges::{step_pending, Counted};
use inputs::Prepared;
use recorded::Hooks;
use running::Running;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::{mpsc, Notify};
use tokio::task::{Id, JoinError, JoinSet};
use tracing::Instrument;

/// How many requests to record a place may wait for the driver at once; a try asking past
/// that waits for room. This cannot deadlock: a try has one request out at a time (it
/// waits for the answer), the driver takes requests first whenever it waits for anything,
/// and nothing else the driver awaits (appends, reads, settling a try it does not execute)
/// waits on a try.
pub const PLACE_REQUESTS_MAX: usize = 64;

/// What an executed attempt or compensation came back with.
struct Done {
    step: StepName,
    attempt: u32,
    outcome: Outcome,
    /// What the try asked to call once its outcome is durable.
    recorded: Option<RecordedHook>,
    /// What the try used, as its step recorded it.
    usage: Option<Usage>,
}

enum Outcome {
    /// An attempt's result.
    Ran(Result<Output, StepError>),
    /// One try of a compensation: the driver never retries inside the task; a failed try is
    /// an event, and `decide` says when to try again.
    Compensation(Result<(), StepError>),
}

impl Done {
    /// The try that came back.
    fn tried(&self) -> Try {
        let kind = match self.outcome {
            Outcome::Ran(_) => TryKind::Run,
            Outcome::Compensation(_) => TryKind::Compensation,
        };
        Try {
            step: self.step.clone(),
            attempt: self.attempt,
            kind,
        }
    }
}

pub(crate) struct Driver<S: Store> {
    shared: Arc<Shared<S>>,
    workflow: Arc<Workflow>,
    /// The run's definition as it stands: the pinned one, grown by the expansions so far.
    spec: WorkflowSpec,
    /// How many of the state's expansions `spec` is grown by.
    grown: usize,
    /// The items of expansions this driver appended, until `spec` grows by them.
    fresh: BTreeMap<StepName, Vec<Value>>,
    /// The learned timeouts of the steps with `timeout = "auto"`, by step.
    auto: BTreeMap<String, u64>,
    /// The run's state with what decisions read of it, kept together event by event, so
    /// each decision costs what the run is doing.
    machine: RunMachine,
    notify: Arc<Notify>,
    /// The tries at work, each in a task of `tasks`.
    running: Running,
    tasks: JoinSet<Done>,
    /// Set when events may have been appended by someone else (an override).
    stale: bool,
    /// Outcomes already folded into `state` but not yet appended: they go out with the next
    /// decision's events in one atomic batch, so a chain costs one sync per step.
    unsent: Vec<NewEvent>,
    /// The hooks of outcomes not yet appended.
    hooks: Hooks,
    /// Where tries ask to record their place (`StepContext::placed`).
    places: mpsc::Sender<PlaceRequest>,
    place_requests: mpsc::Receiver<PlaceRequest>,
    /// What the engine's gauges count of the run.
    counted: Counted,
    /// The run's lease, under leases: every append is fenced by it, and its loss stops the
    /// driver at once.
    held: Option<Held>,
    /// Whether the tries a dead engine left at work were looked at for adoption.
    adopted: bool,
    /// Tries that finished within their first poll, their outcomes not yet looked at.
    finished: Vec<Done>,
}

impl<S: Store> Driver<S> {
    /// A driver for the run as the log holds it; a store error a retry may cure is waited
    /// out as in [`Driver::drive`].
    pub async fn new(
        shared: Arc<Shared<S>>,
        workflow: Arc<Workflow>,
        run_id: RunId,
        notify: Arc<Notify>,
        held: Option<Held>,
    ) -> Result<Driver<S>, EngineError> {
        let mut failures = 0;
        let (state, spec) = loop {
            match load(&shared, &run_id, workflow.spec()).await {
                Ok(loaded) => break loaded,
                Err(EngineError::Store(e)) if e.is_retryable() => {
                    failures += 1;
                    wait_out(shared.clock, &e, failures).await;
                }
                Err(e) => return Err(e),
            }
        };
        metrics::run_started(&workflow.spec().name);
        let mut auto = BTreeMap::new();
        learn_auto(&shared, &spec, &mut auto).await;
        let grown = state.expansions.len();
        let machine = RunMachine::compile(&spec, state, |name, fallback| {
            auto.get(name).copied().unwrap_or(fallback)
        })
        .map_err(WorkflowError::Invalid)?;
        let finished = machine.status().is_finished();
        let counted = Counted::new(shared.runs.clone(), machine.state(), finished);
        let (places, place_requests) = mpsc::channel(PLACE_REQUESTS_MAX);
        Ok(Driver {
            shared,
            workflow,
            spec,
            grown,
            fresh: BTreeMap::new(),
            auto,
            machine,
            notify,
            running: Running::default(),
            tasks: JoinSet::new(),
            stale: false,
            unsent: Vec::new(),
            hooks: Hooks::default(),
            places,
            place_requests,
            counted,
            held,
            adopted: false,
            finished: Vec::new(),
        })
    }

    /// Drives the run to a terminal status. A store error that a retry may cure (the store
    /// unavailable, a transaction that lost a race) is waited out with a growing pause and
    /// the turn made again from what the log holds; any other error stops the run with it.
    ///
    /// Under leases, a lost lease stops it at once with the store's `LeaseLost` or `Fenced`
    /// (its steps are stopped with it); any other end parks the run, so that no instance
    /// claims it until someone acts on it.
    pub async fn drive(mut self) -> Result<RunStatus, EngineError> {
        let span = tracing::info_span!("run", run_id = %self.run_id(), workflow = %self.workflow.spec().name);
        async move {
            let mut lost = self.held.as_ref().map(Held::signal);
            // Biased, as every choice of the driver: the same readiness gives the same
            // choice (tokio's random pick would make a simulation's seed replay differently).
            let outcome = tokio::select! {
                biased;
                outcome = self.drive_to_end() => outcome,
                lost = wait_lost(lost.as_mut()) => Err(lost.into()),
            };
            self.let_go(&outcome).await;
            outcome
        }
        .instrument(span)
        .await
    }

    /// Parks the run's lease when its driver ended for any reason but losing it.
    async fn let_go(&mut self, outcome: &Result<RunStatus, EngineError>) {
        let lost = matches!(
            outcome,
            Err(EngineError::Store(
                StoreError::LeaseLost { .. } | StoreError::Fenced { .. }
            ))
        );
        let Some(held) = self.held.take() else {
            return;
        };
        if !lost {
            if let Err(e) = held.park().await {
                tracing::warn!(error = %e, "lease not parked; it expires instead");
            }
        }
    }

    async fn drive_to_end(&mut self) -> Result<RunStatus, EngineError> {
        {
            let mut failures = 0u32;
            loop {
                // A chain of tries that finish at once never makes the driver wait: it
                // gives its worker thread back to others now and then all the same.
                tokio::task::consume_budget().await;
                match self.turn().await {
                    Ok(Some(status)) => {
                        tracing::info!(status = %status, "run finished");
                        self.counted.finished(status);
                        metrics::run_finished(&self.workflow.spec().name, status);
                        return Ok(status);
                    }
                    Ok(None) => failures = 0,
                    Err(EngineError::Store(e)) if e.is_retryable() => {
                        failures += 1;
                        self.wait_out(&e, failures).await;
                        // What failed may have been written: read the log before deciding.
                        self.stale = true;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }

    async fn wait_out(&self, error: &StoreError, failures: u32) {
        wait_out(self.shared.clock, error, failures).await;
    }

    /// One decision: act on it, or wait for something to happen.
    async fn turn(&mut self) -> Result<Option<RunStatus>, EngineError> {
        if std::mem::take(&mut self.stale) && self.commit(Vec::new()).await? {
            self.catch_up().await?;
        }
        if !self.adopted {
            self.adopt_leftovers().await?;
            self.adopted = true;
        }
        self.regrow().await?;
        let started = std::time::Instant::now();
        let executing = self.running.steps();
        let now = Now {
            ms: self.shared.clock.now_ms(),
            executing: &executing,
        };
        let commands = self.machine.decide(now);
        metrics::decided(started.elapsed().as_secs_f64());
        let mut events = Vec::new();
        let mut launches = Vec::new();
        let mut stops = Vec::new();
        let mut wake = None;
        for command in commands {
            if let Some((step, kind, attempt)) = command.event() {
                match &command {
                    // A waiting step's deadline: nothing of it runs anywhere to settle.
                    Command::Fail { .. } if self.waits(step) => {
                        events.push(self.event(step, kind, attempt, Payload::Empty));
                    }
                    // A try ended without the driver seeing it end: settle it first.
                    Command::Fail { .. } => {
                        let tried = Try::of(step, attempt, TryKind::Run);
                        events.extend(self.settled_failure(&tried, kind).await?);
                    }
                    Command::FailCompensation { .. } => {
                        let tried = Try::of(step, attempt, TryKind::Compensation);
                        events.extend(self.settled_failure(&tried, kind).await?);
                    }
                    // A template expands, a step whose condition says so does not run:
                    // their events take the place of the start.
                    Command::Start { .. } if self.is_template(step) => {
                        events.extend(self.expansion(step, attempt).await?);
                        continue;
                    }
                    Command::Start { .. } => match self.unless_condition(step, attempt).await? {
                        Some(instead) => {
                            events.extend(instead);
                            continue;
                        }
                        None => events.push(self.event(step, kind, attempt, Payload::Empty)),
                    },
                    Command::Compensate { .. } if self.is_template(step) => {
                        events.extend(self.compensated_template(step, attempt));
                        continue;
                    }
                    _ => events.push(self.event(step, kind, attempt, Payload::Empty)),
                }
            }
            match command {
                // A waiting step runs nothing: its `Started` is all there is until its
                // signal, its timer or its deadline.
                Command::Start { step, .. } if self.waits(&step) => {
                    tracing::info!(step = %step, "the step waits");
                }
                Command::Start { step, attempt } => {
                    launches.push(Try::of(&step, attempt, TryKind::Run));
                }
                // Its `Succeeded` is appended above.
                Command::Fire { step, .. } => {
                    tracing::info!(step = %step, "the step's timer fired")
                }
                Command::Fail { step, reason, .. } => {
                    if reason == FailReason::Timeout {
                        metrics::attempt_failed(self.workflow_name(), &FailureClass::Timeout);
                    }
                    let seconds = self.seconds_at_work(&step);
                    metrics::attempt_ended(
                        self.workflow_name(),
                        step.as_str(),
                        reason.as_str(),
                        seconds,
                    );
                    stops.push(step);
                }
                Command::Compensate { step, attempt } => {
                    launches.push(Try::of(&step, attempt, TryKind::Compensation));
                }
                Command::FailCompensation { step, .. } => {
                    metrics::compensation_ended(self.workflow_name(), "interrupted");
                    stops.push(step);
                }
                // Its `Skipped` event is appended above; nothing runs.
                Command::Skip { step, reason, .. } => {
                    tracing::info!(step = %step, reason = %reason, "skipping the step");
                }
                Command::Pause { step, reason } => {
                    tracing::warn!(step = %step, reason = %reason, "pausing the run");
                    events.push(self.pause_event(&reason));
                }
                Command::WakeAt { ms } => wake = Some(ms),
                Command::Finish { status } => {
                    assert!(self.running.is_empty(), "a finished run executes nothing");
                    // The outcomes that finished the run must be durable before it is reported.
                    return Ok(self.commit(Vec::new()).await?.then_some(status));
                }
            }
        }
        if events.is_empty() && launches.is_empty() && self.unsent.is_empty() {
            self.wait(wake).await?;
            return Ok(None);
        }
        let prepared = self.prepare(&launches).await?;
        if !self.commit(events).await? {
            return Ok(None);
        }
        // A timed-out attempt (or an interrupted compensation) is stopped once its failure is
        // durable: were the append to fail, the next turn would decide about it again.
        for step in stops {
            self.stop(&step);
        }
        for (tried, prepared) in launches.into_iter().zip(prepared) {
            self.launch(tried, prepared, None);
        }
        Ok(None)
    }

    /// A `RunPaused` by this engine for `reason`, clipped to what an event may carry.
    fn pause_event(&self, reason: &str) -> NewEvent {
        let kind = EventKind::RunPaused {
            by: self.shared.config.instance.clone(),
            reason: clip(reason),
        };
        NewEvent {
            step: None,
            ..self.event(&StepName(String::new()), kind, 0, Payload::Empty)
        }
    }

    fn event(&self, step: &StepName, kind: EventKind, attempt: u32, payload: Payload) -> NewEvent {
        NewEvent {
            step: Some(step.clone()),
            kind,
            attempt,
            at_ms: self.shared.clock.now_ms(),
            instance: self.shared.config.instance.clone(),
            payload,
        }
    }

    /// Appends the unsent outcomes and `events` as one batch, and folds `events` in. Returns
    /// false on a conflict (someone else appended, or an earlier append whose answer was lost
    /// did land): the state is then rebuilt from the log, outcomes still current are kept for
    /// the next batch, and `events` are dropped. On any other error the driver is left as it
    /// was before the call (the outcomes unsent, `events` dropped), so a retry can follow.
    async fn commit(&mut self, events: Vec<NewEvent>) -> Result<bool, StoreError> {
        let mut batch = std::mem::take(&mut self.unsent);
        let unsent = batch.len();
        if unsent + events.len() == 0 {
            return Ok(true);
        }
        let run_id = self.run_id().clone();
        let first = Seq(self.state().last_seq.0 + 1 - unsent as u32);
        batch.extend(events.iter().cloned());
        match self.append_in_parts(&run_id, first, &batch).await {
            Ok(ids) => {
                self.hooks.appended(&batch);
                let last = *ids.last().expect("a batch has events");
                for (i, (event, id)) in events.into_iter().zip(&ids[unsent..]).enumerate() {
                    let seq = Seq(first.0 + (unsent + i) as u32);
                    self.fold(&event.into_event(*id, run_id.clone(), seq));
                }
                self.machine.acknowledge(last);
                Ok(true)
            }
            Err(StoreError::Conflict { .. }) => {
                batch.truncate(unsent);
                if let Err(e) = self.refold(batch.clone()).await {
                    self.unsent = batch;
                    return Err(e);
                }
                Ok(false)
            }
            Err(e) => {
                batch.truncate(unsent);
                self.unsent = batch;
                Err(e)
            }
        }
    }

    /// Appends `batch` in order, in parts of at most `APPEND_BATCH_EVENTS_MAX` events (a wide
    /// run starts more steps at once than one append may carry). The caller launches nothing
    /// before every part is durable; a crash between parts leaves a prefix of the batch, as a
    /// crash between two decisions would, and steps started in it are found interrupted.
    async fn append_in_parts(
        &self,
        run_id: &RunId,
        first: Seq,
        batch: &[NewEvent],
    ) -> Result<Vec<apollo11_core::EventId>, StoreError> {
        let mut ids = Vec::with_capacity(batch.len());
        for part in batch.chunks(limits::APPEND_BATCH_EVENTS_MAX as usize) {
            let seq = Seq(first.0 + ids.len() as u32);
            let appended = match &self.held {
                Some(held) => held.append(seq, part.to_vec()).await?,
                None => self.shared.store.append(run_id, seq, part.to_vec()).await?,
            };
            self.shared.appended(appended.len() as u64);
            ids.extend(appended);
        }
        Ok(ids)
    }

    /// Rebuilds the state from the log, then re-folds the unsent outcomes that still apply.
    async fn refold(&mut self, unsent: Vec<NewEvent>) -> Result<(), StoreError> {
        let events = self.shared.store.read_run(self.run_id(), Seq(1)).await?;
        let state = apollo11_machine::fold(self.run_id(), &events);
        self.machine.reset(state);
        self.counted.recount(self.machine.state());
        // Each outcome, with the usage that goes just before it when there is one.
        let mut used = None;
        for event in unsent {
            if let EventKind::AttemptUsage(_) = event.kind {
                used = Some(event);
                continue;
            }
            let tried = recorded::outcome_of(&event).expect("unsent events are outcomes");
            let used = used.take();
            if self.still_current(&tried) {
                used.into_iter().for_each(|u| self.fold_unsent(u));
                self.fold_unsent(event);
            }
        }
        let unsent = &self.unsent;
        self.hooks.retain(|tried| {
            unsent
                .iter()
                .any(|e| recorded::outcome_of(e).as_ref() == Some(tried))
        });
        self.stop_stale();
        Ok(())
    }

    /// Folds an outcome before it is appended (its event id is known only after).
    fn fold_unsent(&mut self, event: NewEvent) {
        let seq = Seq(self.state().last_seq.0 + 1);
        let id = self.state().last_event_id;
        self.fold(&event.clone().into_event(id, self.run_id().clone(), seq));
        self.unsent.push(event);
    }

    /// Folds one event into the run's machine, and counts a compensation it makes pending
    /// or ends.
    fn fold(&mut self, event: &apollo11_core::Event) {
        let before = step_pending(self.machine.state(), event);
        self.machine.apply(event);
        let after = step_pending(self.machine.state(), event);
        self.counted.folded(before, after);
    }

    fn workflow_name(&self) -> &str {
        &self.workflow.spec().name
    }

    /// Seconds since the step's current attempt or compensation started, as its events say
    /// (the clock its timeout is counted on), when this driver executes it.
    fn seconds_at_work(&self, step: &StepName) -> Option<f64> {
        if !self.running.has(step) {
            return None;
        }
        let since_ms = self.state().step(step.as_str()).since_ms;
        Some(self.shared.clock.now_ms().saturating_sub(since_ms) as f64 / 1000.0)
    }

    fn state(&self) -> &RunState {
        self.machine.state()
    }

    fn run_id(&self) -> &RunId {
        &self.machine.state().run_id
    }

    /// Folds events someone else appended, and stops work they made stale.
    async fn catch_up(&mut self) -> Result<(), StoreError> {
        let from = Seq(self.state().last_seq.0 + 1);
        for event in self.shared.store.read_run(self.run_id(), from).await? {
            self.fold(&event);
        }
        self.stop_stale();
        Ok(())
    }

    /// Stops executing work that the state no longer expects (an override changed the step).
    fn stop_stale(&mut self) {
        let stale: Vec<StepName> = self
            .running
            .tries()
            .filter(|tried| !self.still_current(tried))
            .map(|tried| tried.step.clone())
            .collect();
        for step in stale {
            tracing::info!(step = %step, "stopping work an override made stale");
            self.stop(&step);
        }
    }

    /// Whether `tried` is the step's current try, as the state says.
    fn still_current(&self, tried: &Try) -> bool {
        let s = self.state().step(tried.step.as_str());
        s.status == tried.kind.status() && s.attempt == tried.attempt
    }

    fn stop(&mut self, step: &StepName) {
        self.running.stop(step);
    }

    /// The payload a step's state points at, when its launch uses it; one of an outcome not
    /// yet appended is taken from the unsent batch.
    async fn recorded_payload(
        &self,
        step: &StepName,
        kind: TryKind,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let recorded = self.state().step(step.as_str());
        // A compensation gets the output of a success, not the marker of a failure.
        let used = !kind.is_compensation() || recorded.last_error.is_none();
        self.payload_at(recorded.payload_seq.filter(|_| used)).await
    }

    /// The bytes of the payload of the run's event `seq`; one of an outcome not yet
    /// appended is taken from the unsent batch.
    async fn payload_at(&self, seq: Option<Seq>) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(seq) = seq else {
            return Ok(None);
        };
        let first_unsent = self.state().last_seq.0 + 1 - self.unsent.len() as u32;
        match seq.0.checked_sub(first_unsent) {
            Some(i) => {
                let payload = &self.unsent[i as usize].payload;
                resolve(self.shared.store.as_ref(), payload).await.map(Some)
            }
            None => {
                let run_id = self.run_id();
                self.shared.recorded_bytes(run_id, Some(seq)).await
            }
        }
    }

    /// The definition of `step`, one of the run's.
    fn step_spec(&self, step: &StepName) -> &StepSpec {
        let node = self.machine.dag().node(step.as_str());
        &self.spec.steps[node.expect("decide only names steps of the run").index()]
    }

    /// Whether `step` waits instead of running code.
    fn waits(&self, step: &StepName) -> bool {
        self.step_spec(step).wait.is_some()
    }

    /// The code of `step`: its own, or for a step a `for_each` made, its declaration's.
    fn code(&self, step: &StepName) -> Arc<dyn crate::Step> {
        let origin = self.step_spec(step).origin.as_ref();
        let name = origin.map_or(step.as_str(), |o| o.declaration.as_str());
        (self.workflow.step(step.as_str()))
            .or_else(|| self.workflow.step(name))
            .expect("decide only names steps of the workflow")
            .clone()
    }

    /// Executes `tried`: runs the step's code (or its compensation), or, for a try a dead
    /// engine left at work (`adopt`), watches it to its end. The code runs here, on the
    /// driver's task, until it first waits, and on in a task of its own from there
    /// (`first_poll.rs`).
    fn launch(&mut self, tried: Try, prepared: Prepared, adopt: Option<Leftover>) {
        let code = self.code(&tried.step);
        let secrets: Vec<_> = (self.spec.params.iter())
            .filter(|p| p.secret.is_some())
            .cloned()
            .collect();
        let Prepared { payload, scope } = prepared;
        let (cancel_tx, cancel) = Cancel::new();
        let run_id = self.run_id().clone();
        let (step, attempt) = (tried.step.clone(), tried.attempt);
        let compensation = tried.kind.is_compensation();
        let span = tracing::info_span!("step", step = %step, attempt, compensation);
        let placer = Placer {
            requests: self.places.clone(),
            kind: tried.kind,
        };
        let memory_limit = (!compensation)
            .then(|| self.machine.memory_limit(step.as_str()))
            .flatten();
        let meter = Arc::<crate::step::Meter>::default();
        let usage = meter.clone();
        let work = async move {
            let mut ctx = StepContext {
                idempotency_key: format!("{run_id}/{step}"),
                run_id,
                step: step.clone(),
                attempt,
                previous_payload: if compensation { None } else { payload.clone() },
                output: if compensation { payload } else { None },
                cancel,
                placer: Some(placer),
                scope,
                recorded: Arc::default(),
                memory_limit,
                usage,
            };
            let result = match inputs::read_secrets(&secrets) {
                Err(e) => Err(e),
                Ok(secrets) => {
                    ctx.scope.secrets = secrets;
                    match (&adopt, compensation) {
                        (Some(leftover), _) => code.adopt(&ctx, leftover).await,
                        (None, true) => code.compensate(&ctx).await.map(|()| Output::empty()),
                        (None, false) => code.run(&ctx).await,
                    }
                }
            };
            let outcome = if compensation {
                Outcome::Compensation(result.map(|_| ()))
            } else {
                Outcome::Ran(result)
            };
            Done {
                step,
                attempt,
                outcome,
                recorded: ctx.take_recorded(),
                usage: ctx.usage.usage(),
            }
        };
        let abort = match poll_once(Box::pin(work.instrument(span))) {
            Polled::Waits(work) => Some(self.tasks.spawn(work)),
            Polled::Done(done) => {
                self.finished.push(done);
                None
            }
            Polled::Panicked(message) => {
                self.finished.push(panicked(tried.clone(), &message));
                None
            }
        };
        self.running.insert(tried, cancel_tx, abort, meter);
    }

    /// Waits for an attempt to finish, the wake-up time, or an override.
    async fn wait(&mut self, wake: Option<u64>) -> Result<(), EngineError> {
        if !self.finished.is_empty() {
            let finished = std::mem::take(&mut self.finished);
            return self.record(finished).await;
        }
        let clock = self.shared.clock;
        let sleep = async move {
            match wake {
                Some(ms) => clock.sleep_until_ms(ms).await,
                None => std::future::pending().await,
            }
        };
        // Biased, so that the same readiness gives the same choice: places first (a try
        // waits on each, and each try asks once), then finished work, then operators and
        // the wake-up. Every branch is polled at every turn.
        tokio::select! {
            biased;
            Some(request) = self.place_requests.recv() => self.place(request).await?,
            Some(first) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                let mut joined = vec![first];
                while let Some(more) = self.tasks.try_join_next_with_id() {
                    joined.push(more);
                }
                let finished = self.joined(joined);
                self.record(finished).await?;
            }
            () = self.notify.notified() => self.stale = true,
            () = sleep => {}
        }
        Ok(())
    }

    /// What the tasks that ended came back with: a panic is a retryable failure (`decide`
    /// retries it after the step's backoff, like any other failed attempt or try); a stale
    /// try's is dropped, and an aborted task has nothing to say.
    fn joined(&self, joined: Vec<Result<(Id, Done), JoinError>>) -> Vec<Done> {
        let mut done = Vec::new();
        for result in joined {
            match result {
                Ok((_, d)) => done.push(d),
                Err(e) if e.is_cancelled() => {}
                Err(e) => {
                    let tried = self.running.of_task(e.id());
                    done.extend(tried.map(|t| panicked(t, &e.to_string())));
                }
            }
        }
        done
    }

    /// Appends the outcome of finished work that is still current.
    async fn record(&mut self, done: Vec<Done>) -> Result<(), EngineError> {
        for mut d in done {
            let tried = d.tried();
            let mine = self.running.is_mine(&tried);
            if mine && self.still_current(&tried) {
                if let Some(hook) = d.recorded.take() {
                    self.hooks.insert(tried.clone(), hook);
                }
                let seconds = self.seconds_at_work(&d.step);
                let used = (d.usage.clone()).map(|u| self.usage_event(&d.step, d.attempt, u));
                let event = self.outcome_event(&d, seconds).await?;
                let events = used.into_iter().chain([event]);
                match self.unsafe_to_redo(&d) {
                    Some(pause) => {
                        self.commit([pause].into_iter().chain(events).collect())
                            .await?;
                    }
                    None => events.for_each(|e| self.fold_unsent(e)),
                }
            }
            if mine {
                self.running.remove(&d.step);
            }
        }
        Ok(())
    }

    /// For an attempt whose step lost sight of it while it may still run, of a step of class
    /// `compensate` (which must be neither compensated nor run again while the old try may
    /// act): the pause that goes before its failure, for a person to make sure it stopped.
    fn unsafe_to_redo(&self, done: &Done) -> Option<NewEvent> {
        let Outcome::Ran(Err(e)) = &done.outcome else {
            return None;
        };
        let compensate = self.step_spec(&done.step).idempotency == Idempotency::Compensate;
        (e.may_still_run && compensate).then(|| {
            tracing::warn!(step = %done.step, attempt = done.attempt, error = %e.message, "a try may still run; pausing the run");
            self.pause_event(&format!(
                "the attempt {} of step `{}` may still run ({}); make sure it stopped, then resume the run",
                done.attempt, done.step, e.message
            ))
        })
    }

    /// The `AttemptUsage` event of a try of `step` whose step recorded what it used, which
    /// goes just before its outcome; the usage counted in the metrics.
    fn usage_event(&self, step: &StepName, attempt: u32, usage: Usage) -> NewEvent {
        metrics::try_used(self.workflow_name(), step.as_str(), &usage);
        let kind = EventKind::AttemptUsage(usage);
        self.event(step, kind, attempt, Payload::Empty)
    }

    /// The event recording a finished attempt or compensation, its payload offloaded to the
    /// blob store.
    async fn outcome_event(
        &self,
        done: &Done,
        seconds: Option<f64>,
    ) -> Result<NewEvent, StoreError> {
        let (kind, payload, outcome) = match &done.outcome {
            Outcome::Compensation(result) => {
                let (kind, outcome) = match result {
                    Ok(()) => (EventKind::Compensated, "compensated"),
                    Err(e) => {
                        let kind = EventKind::CompensationTryFailed(
                            self.compensation_failure(&done.step, e),
                        );
                        tracing::warn!(error = %e.message, retryable = e.retryable, "compensation failed");
                        (kind, "failed")
                    }
                };
                metrics::compensation_ended(self.workflow_name(), outcome);
                return Ok(self.event(&done.step, kind, done.attempt, Payload::Empty));
            }
            Outcome::Ran(Ok(output)) => (
                EventKind::Succeeded,
                Payload::inline(output.0.clone()),
                "succeeded",
            ),
            Outcome::Ran(Err(e)) => {
                let failure = self.failure(&done.step, e);
                metrics::attempt_failed(self.workflow_name(), &failure.class);
                let kind = EventKind::AttemptFailed(failure);
                (
                    kind,
                    e.payload.clone().map_or(Payload::Empty, Payload::inline),
                    "failed",
                )
            }
        };
        metrics::attempt_ended(self.workflow_name(), done.step.as_str(), outcome, seconds);
        let payload = self.offload_patiently(payload).await?;
        Ok(self.event(&done.step, kind, done.attempt, payload))
    }

    /// What the `Failed` event of `step` records of `e`: its class, text and fingerprint,
    /// and the machine's note when no attempt will follow.
    fn failure(&self, step: &StepName, e: &StepError) -> AttemptFailure {
        let mut failure = AttemptFailure {
            fingerprint: e.fingerprint,
            retry_after_ms: e.retry_after_ms,
            ..AttemptFailure::new(e.class(), clip(&e.message), e.retryable)
        };
        failure.note =
            self.machine
                .failure_note(step.as_str(), &failure, self.shared.clock.now_ms());
        failure
    }

    /// What the `CompensationTryFailed` event of `step` records of `e`: its class, text,
    /// fingerprint and the delay it asked for, and the machine's note on that delay.
    fn compensation_failure(&self, step: &StepName, e: &StepError) -> AttemptFailure {
        let mut failure = AttemptFailure {
            fingerprint: e.fingerprint,
            retry_after_ms: e.retry_after_ms,
            ..AttemptFailure::new(e.class(), clip(&e.message), e.retryable)
        };
        failure.note = (self.machine).compensation_failure_note(step.as_str(), &failure);
        failure
    }

    /// Offloads a payload to the blob store, retried while the store fails transiently: it
    /// exists only in memory until it is appended, so giving up on it would lose it.
    async fn offload_patiently(&self, payload: Payload) -> Result<Payload, StoreError> {
        let mut failures = 0;
        loop {
            match self.shared.offload(payload.clone()).await {
                Ok(payload) => return Ok(payload),
                Err(e) if e.is_retryable() => {
                    failures += 1;
                    self.wait_out(&e, failures).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// What a try that panicked came back with.
fn panicked(tried: Try, panic: &str) -> Done {
    let outcome = match tried.kind {
        TryKind::Run => Outcome::Ran(Err(StepError::retryable(format!("step panicked: {panic}")))),
        TryKind::Compensation => Outcome::Compensation(Err(StepError::retryable(format!(
            "compensation panicked: {panic}"
        )))),
    };
    Done {
        step: tried.step,
        attempt: tried.attempt,
        outcome,
        recorded: None,
        usage: None,
    }
}

/// Waits until a held lease is lost; forever without a lease.
async fn wait_lost(lost: Option<&mut LostSignal>) -> StoreError {
    match lost {
        Some(lost) => lost.wait().await,
        None => std::future::pending().await,
    }
}

/// Pauses after the `failures`-th retryable store error in a row.
async fn wait_out(clock: crate::Clock, error: &StoreError, failures: u32) {
    let delay_ms = store_retry_delay_ms(failures);
    tracing::warn!(error = %error, failures, delay_ms, "store failed; retrying");
    metrics::store_retry();
    clock.sleep_until_ms(clock.now_ms() + delay_ms).await;
}

/// The pause after the `failures`-th retryable store error in a row: 100 ms, doubling, at
/// most 10 s (a store that comes back is used again within 10 s).
fn store_retry_delay_ms(failures: u32) -> u64 {
    const FIRST_MS: u64 = 100;
    const MAX_MS: u64 = 10_000;
    FIRST_MS
        .saturating_mul(1 << failures.saturating_sub(1).min(16))
        .min(MAX_MS)
}

/// Cuts an error message to the limit, at a character boundary.
pub(crate) fn clip(message: &str) -> String {
    let max = limits::ERROR_MESSAGE_BYTES_MAX as usize;
    if message.len() <= max {
        return message.to_owned();
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_owned()
}
