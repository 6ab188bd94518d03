//! The read-only query layer: what a run is, was, and would do, as plain data. Every front
//! end (the command line, the HTTP server) renders these types and computes nothing itself,
//! so they all answer the same question the same way. Generic over the store traits: it
//! reads, never appends.

mod archived;
mod event;
mod list;
mod plan;
mod retention;
mod run;
mod usage;
mod waiting;

pub use archived::ListedRun;
pub use event::{EventDetail, EventPage, EventView, PayloadView};
use list::Rows;
pub use list::{RunFilter, RunList, RunRow, Unreadable};
use plan::Planner;
pub use plan::{millis, Plan, PlanStep};
pub use retention::{Kept, Retention, RetentionPlan};
pub use run::{
    archived_refusal, OverrideChoice, ParamView, Pause, Placement, RunView, StepLog, StepView,
    Unplaced, STARTED_BY,
};
pub use usage::TryUsage;
pub use waiting::Waiting;

use crate::condition::{to_judge, verdict, Verdict};
use crate::reads::{frame, Frame};
use crate::{Clock, EngineError, Store};
use apollo11_core::{Event, EventId, Payload, RunId, Seq, StepName, WorkflowSpec};
use apollo11_machine::{Command, RerunPlan, RunMachine, RunState};
use apollo11_store::{resolve, Archive, BlobStore, EventStore, StoreError};
use std::sync::{Arc, Mutex};

/// Read-only answers about the runs in a store. Cheap to share behind an `Arc`; it keeps
/// the rows of [`Inspector::runs`] between calls and re-reads only the runs whose last
/// event changed since. Given the store's archive ([`Inspector::with_archive`]), it answers
/// about the runs only the archive holds too.
pub struct Inspector<S> {
    store: Arc<S>,
    archive: Option<Arc<dyn Archive>>,
    clock: Clock,
    rows: Mutex<Rows>,
}

/// A run read up to a point: its events, the machine folded from them, its definition
/// grown by the expansions among them.
struct Loaded {
    events: Vec<Event>,
    machine: RunMachine,
    spec: WorkflowSpec,
}

impl<S: Store> Inspector<S> {
    /// An inspector of `store`, planning with the system clock.
    pub fn new(store: Arc<S>) -> Inspector<S> {
        Inspector::with_clock(store, Clock::system())
    }

    /// An inspector of `store` whose [`Inspector::plan`] reads `clock` for "now".
    pub fn with_clock(store: Arc<S>, clock: Clock) -> Inspector<S> {
        Inspector {
            store,
            archive: None,
            clock,
            rows: Mutex::new(Rows::default()),
        }
    }

    /// The run as it is now, or as it stood after event `at` (the fold of its events with
    /// id ≤ `at`; an id in a gap of the store's ids, or another run's, means the event
    /// before it).
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownRun`]; [`EngineError::BeforeRun`] for an `at` before the run's
    /// first event; [`EngineError::BadDefinition`] when the pinned definition cannot be read
    /// or compiled; store errors.
    pub async fn status(
        &self,
        run_id: &RunId,
        at: Option<EventId>,
    ) -> Result<RunView, EngineError> {
        let loaded = self.load(run_id, at).await?;
        Ok(RunView::new(&loaded.machine, &loaded.spec, &loaded.events))
    }

    /// What [`Engine::resume`](crate::Engine::resume) would do now, changing nothing.
    ///
    /// # Errors
    ///
    /// As [`Inspector::status`].
    pub async fn plan(&self, run_id: &RunId) -> Result<Plan, EngineError> {
        let Loaded { machine, spec, .. } = self.load(run_id, None).await?;
        let mut planner = Planner::new(machine, self.clock.now_ms());
        while let Some(commands) = planner.decide() {
            let mut verdicts = Vec::with_capacity(commands.len());
            for command in &commands {
                verdicts.push(match command {
                    Command::Start { step, .. } => {
                        self.judged(&spec, planner.machine(), step).await?
                    }
                    _ => None,
                });
            }
            planner.take(&commands, verdicts);
        }
        Ok(planner.plan())
    }

    /// What [`Engine::rerun`](crate::Engine::rerun) of `step` (with `downstream`, and of
    /// every step after it) would do now, changing nothing.
    ///
    /// # Errors
    ///
    /// [`EngineError::RerunNotAllowed`] naming why the run refuses it,
    /// [`EngineError::UnknownStep`], and the errors of [`Inspector::status`].
    pub async fn rerun_plan(
        &self,
        run_id: &RunId,
        step: &str,
        downstream: bool,
    ) -> Result<RerunPlan, EngineError> {
        let Loaded { machine, .. } = self.load(run_id, None).await?;
        machine
            .check_rerun(step, downstream)
            .map_err(|refusal| EngineError::rerun_refused(run_id, step, refusal))
    }

    /// What the condition of `step` would say were it started now, read as the driver reads
    /// it: over the run's arguments and the outputs its steps recorded in the store.
    async fn judged(
        &self,
        spec: &WorkflowSpec,
        machine: &RunMachine,
        step: &StepName,
    ) -> Result<Option<Verdict>, EngineError> {
        let (dag, state) = (machine.dag(), machine.state());
        let node = dag
            .node(step.as_str())
            .expect("decide only names steps of the run");
        let Some(text) = to_judge(&spec.steps[node.index()], state) else {
            return Ok(None);
        };
        let Frame { mut scope, outputs } = frame(spec, dag, state, step);
        let store = self.store.as_ref();
        for (name, seq) in outputs {
            let payload = recorded_payload(store, &state.run_id, Some(seq)).await?;
            scope.outputs.insert(name, resolve(store, &payload).await?);
        }
        Ok(verdict(step, text, &scope))
    }

    /// The definition the run pinned when it was created.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownRun`], [`EngineError::BadDefinition`], store errors.
    pub async fn definition(&self, run_id: &RunId) -> Result<WorkflowSpec, EngineError> {
        let events = self.store.read_run(run_id, Seq(1)).await?;
        let first = events.first().ok_or_else(|| unknown(run_id))?;
        pinned_spec(self.store.as_ref(), run_id, &first.payload).await
    }

    /// The run's definition as it stood after event `at` (now if `None`): the pinned one
    /// grown by the expansions of its template steps until then (each with its items'
    /// steps, their `origin` naming the template).
    ///
    /// # Errors
    ///
    /// As [`Inspector::status`].
    pub async fn grown_definition(
        &self,
        run_id: &RunId,
        at: Option<EventId>,
    ) -> Result<WorkflowSpec, EngineError> {
        Ok(self.load(run_id, at).await?.spec)
    }

    /// The run's events with id > `after`, at most `limit` of them, in order.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownRun`], store errors.
    pub async fn events(
        &self,
        run_id: &RunId,
        after: EventId,
        limit: usize,
    ) -> Result<EventPage, EngineError> {
        let events = self.store.read_run(run_id, Seq(1)).await?;
        if events.is_empty() {
            return Err(unknown(run_id));
        }
        Ok(EventPage::new(&events, after, limit))
    }

    /// The bytes of the payload a step recorded last (the output of its success, or the
    /// marker it left before failing), fetched from the blob store when it is a reference;
    /// `None` when it recorded none.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownRun`], [`EngineError::UnknownStep`] for a step the definition
    /// does not have, store errors (a blob that is gone or fails its hash among them).
    pub async fn step_payload(
        &self,
        run_id: &RunId,
        step: &str,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        let loaded = self.load(run_id, None).await?;
        if !loaded.spec.steps.iter().any(|s| s.name == step) {
            return Err(EngineError::UnknownStep {
                run_id: run_id.clone(),
                step: step.to_owned(),
            });
        }
        let seq = loaded.machine.state().step(step).payload_seq;
        let payload = recorded_payload(self.store.as_ref(), run_id, seq).await?;
        Ok(match payload {
            Payload::Empty => None,
            payload => Some(resolve(self.store.as_ref(), &payload).await?),
        })
    }

    /// Reads a run's events up to `at`, its pinned definition, and folds them.
    async fn load(&self, run_id: &RunId, at: Option<EventId>) -> Result<Loaded, EngineError> {
        let mut events = self.store.read_run(run_id, Seq(1)).await?;
        let first = events.first().ok_or_else(|| unknown(run_id))?;
        if let Some(at) = at.filter(|at| *at < first.event_id) {
            return Err(EngineError::BeforeRun {
                run_id: run_id.clone(),
                at,
                begins: first.event_id,
            });
        }
        // The definition is pinned by the first event, whatever point in time is asked for.
        let spec = pinned_spec(self.store.as_ref(), run_id, &first.payload).await?;
        events.retain(|e| at.is_none_or(|at| e.event_id <= at));
        let mut state = RunState::new(run_id.clone());
        events.iter().for_each(|e| {
            state.apply(e);
        });
        let store = self.store.as_ref();
        let spec = crate::grown::grown_spec(store, run_id, spec, &state.expansions).await?;
        let machine = RunMachine::compile(&spec, state, |_, fallback| fallback).map_err(|e| {
            EngineError::BadDefinition {
                run_id: run_id.clone(),
                reason: format!("it does not compile: {e}"),
            }
        })?;
        Ok(Loaded {
            events,
            machine,
            spec,
        })
    }
}

fn unknown(run_id: &RunId) -> EngineError {
    EngineError::UnknownRun {
        run_id: run_id.clone(),
    }
}

/// The definition a run pinned in the payload of its `RunCreated` event.
///
/// # Errors
///
/// [`EngineError::BadDefinition`] when the bytes are no definition; store errors when a
/// blob holding them cannot be read.
pub(crate) async fn pinned_spec<S: BlobStore>(
    store: &S,
    run_id: &RunId,
    definition: &Payload,
) -> Result<WorkflowSpec, EngineError> {
    let bytes = resolve(store, definition).await?;
    serde_json::from_slice(&bytes).map_err(|e| EngineError::BadDefinition {
        run_id: run_id.clone(),
        reason: e.to_string(),
    })
}

/// The payload a step's state points at (`payload_seq`), as recorded: inline or a blob
/// reference; empty when it points at none.
pub(crate) async fn recorded_payload<S: EventStore>(
    store: &S,
    run_id: &RunId,
    seq: Option<Seq>,
) -> Result<Payload, StoreError> {
    let Some(seq) = seq else {
        return Ok(Payload::Empty);
    };
    let event = store.read_event(run_id, seq).await?;
    let event = event.ok_or_else(|| StoreError::NotFound {
        what: format!("event {seq} of run {run_id}"),
    })?;
    Ok(event.payload)
}
