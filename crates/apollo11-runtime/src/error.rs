//! Errors of the engine's API. `#[non_exhaustive]`: the engine will learn new ways to fail
//! (leases, a server's limits), and callers must not break when it does.

use crate::WorkflowError;
use apollo11_core::{EventId, RunId};
use apollo11_machine::{Refusal, RunAction};
use apollo11_store::StoreError;

/// Why an engine operation failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The workflow is invalid.
    #[error(transparent)]
    Workflow(#[from] WorkflowError),
    /// A run with this id exists already.
    #[error("run `{run_id}` exists already")]
    RunExists {
        /// The run.
        run_id: RunId,
    },
    /// No run with this id.
    #[error("no run `{run_id}`")]
    UnknownRun {
        /// The run.
        run_id: RunId,
    },
    /// A point in time asked for is before the run's first event.
    #[error("run `{run_id}` begins at event {begins}; event {at} is before it existed (event ids count every run's events)")]
    BeforeRun {
        /// The run.
        run_id: RunId,
        /// The event asked for.
        at: EventId,
        /// The run's first event.
        begins: EventId,
    },
    /// The workflow given for a run is another workflow than the one the run pinned.
    #[error("run `{run_id}` is a run of workflow `{workflow}`: it is driven only by that workflow's definition")]
    UnknownWorkflow {
        /// The run.
        run_id: RunId,
        /// The workflow it pinned.
        workflow: String,
    },
    /// The workflow given for a run differs from the definition the run pinned.
    #[error("run `{run_id}` was created with a different definition of workflow `{workflow}`: a run always resumes with the definition it started with")]
    DefinitionChanged {
        /// The run.
        run_id: RunId,
        /// The workflow.
        workflow: String,
    },
    /// The pinned definition cannot be read.
    #[error("run `{run_id}` has an unreadable pinned definition: {reason}")]
    BadDefinition {
        /// The run.
        run_id: RunId,
        /// Why.
        reason: String,
    },
    /// The workflow has no such step.
    #[error("run `{run_id}` has no step `{step}`")]
    UnknownStep {
        /// The run.
        run_id: RunId,
        /// The step asked for.
        step: String,
    },
    /// The run does not allow this operator action now (pausing a finished run, resuming
    /// a run no operator paused, …).
    #[error("cannot {action} run `{run_id}`: {refusal}")]
    NotAllowed {
        /// The run.
        run_id: RunId,
        /// The action refused.
        action: RunAction,
        /// Why.
        refusal: Refusal,
    },
    /// The run does not allow a step override now (the run is finished).
    #[error("cannot override step `{step}` of run `{run_id}` to {to}: {refusal}")]
    OverrideNotAllowed {
        /// The run.
        run_id: RunId,
        /// The step.
        step: String,
        /// The state asked for.
        to: &'static str,
        /// Why.
        refusal: Refusal,
    },
    /// The run does not allow a rerun of the step now (a step of the set is at work, the
    /// step has not run, …).
    #[error("cannot rerun step `{step}` of run `{run_id}`: {refusal}")]
    RerunNotAllowed {
        /// The run.
        run_id: RunId,
        /// The step asked for.
        step: String,
        /// Why.
        refusal: Refusal,
    },
    /// The step does not take a signal now (it runs code, waits for a timer, is not at its
    /// wait), or the signal's data is too large.
    #[error("cannot signal step `{step}` of run `{run_id}`: {refusal}")]
    SignalNotAllowed {
        /// The run.
        run_id: RunId,
        /// The step.
        step: String,
        /// Why.
        refusal: Refusal,
    },
    /// An operator's action found the run changed under it at every try: someone kept
    /// appending to it between the action's read and its append.
    #[error("run `{run_id}` changed under the action {tries} times in a row (someone keeps appending to it); nothing was appended: try again")]
    Contended {
        /// The run.
        run_id: RunId,
        /// How many times the action was tried.
        tries: u32,
    },
    /// This engine is driving the run already.
    #[error("run `{run_id}` is already being driven by this engine")]
    AlreadyRunning {
        /// The run.
        run_id: RunId,
    },
    /// Another instance holds the run's lease: it drives the run.
    #[error("run `{run_id}` is driven by instance {owner:?}, which holds its lease")]
    Leased {
        /// The run.
        run_id: RunId,
        /// The lease's holder.
        owner: String,
    },
    /// The run's driver stopped without an outcome (aborted or panicked).
    #[error("the driver of run `{run_id}` stopped: {reason}")]
    Stopped {
        /// The run.
        run_id: RunId,
        /// Why.
        reason: String,
    },
}

impl EngineError {
    /// A signal to `step` refused: an unknown step as such, any other refusal as
    /// [`EngineError::SignalNotAllowed`].
    pub(crate) fn signal_refused(run_id: &RunId, step: &str, refusal: Refusal) -> EngineError {
        step_refused(run_id, step, refusal, |run_id, step, refusal| {
            EngineError::SignalNotAllowed {
                run_id,
                step,
                refusal,
            }
        })
    }

    /// A rerun of `step` refused: an unknown step as such, any other refusal as
    /// [`EngineError::RerunNotAllowed`].
    pub(crate) fn rerun_refused(run_id: &RunId, step: &str, refusal: Refusal) -> EngineError {
        step_refused(run_id, step, refusal, |run_id, step, refusal| {
            EngineError::RerunNotAllowed {
                run_id,
                step,
                refusal,
            }
        })
    }
}

/// An action on `step` refused: an unknown step as such, any other refusal as `other` makes
/// it.
fn step_refused(
    run_id: &RunId,
    step: &str,
    refusal: Refusal,
    other: fn(RunId, String, Refusal) -> EngineError,
) -> EngineError {
    match refusal {
        Refusal::UnknownStep { .. } => EngineError::UnknownStep {
            run_id: run_id.clone(),
            step: step.to_owned(),
        },
        refusal => other(run_id.clone(), step.to_owned(), refusal),
    }
}
