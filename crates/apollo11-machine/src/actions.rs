//! Which operator actions a run allows right now: a pure function of its state, so the
//! engine, the command line and the server refuse the same actions for the same reasons
//! (the server answers 409 with the reason).

use crate::rollback::{rolling_back, status_with};
use crate::{Frontier, Policy, RunState, RunStatus, StepStatus};
use apollo11_core::EventKind;
use apollo11_dag::Dag;
use std::fmt;

/// An operator action on a whole run, each recorded as a run-level event. Exhaustive on
/// purpose: every front end maps each action to a command or a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RunAction {
    /// `RunPaused`: start nothing new; what runs finishes.
    Pause,
    /// `RunResumed`: lift an operator's pause (a rollback asked for under it starts then).
    Resume,
    /// `RollbackRequested`: undo the run as if a step had failed for good with
    /// `on_failure = "rollback"`, steps that succeeded while it was asked for included; an
    /// operator's pause holds it until `RunResumed`.
    Rollback,
}

impl RunAction {
    /// Every action.
    pub const ALL: [RunAction; 3] = [RunAction::Pause, RunAction::Resume, RunAction::Rollback];

    /// Lower-case name, as in the server's routes.
    pub fn name(self) -> &'static str {
        match self {
            RunAction::Pause => "pause",
            RunAction::Resume => "resume",
            RunAction::Rollback => "rollback",
        }
    }

    /// The run-level event that records the action.
    pub fn event(self, by: &str, reason: &str) -> EventKind {
        let (by, reason) = (by.to_owned(), reason.to_owned());
        match self {
            RunAction::Pause => EventKind::RunPaused { by, reason },
            RunAction::Resume => EventKind::RunResumed { by, reason },
            RunAction::Rollback => EventKind::RollbackRequested { by, reason },
        }
    }
}

impl fmt::Display for RunAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a run does not allow an action now.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The run succeeded or was rolled back: nothing is left to pause, resume or undo.
    Finished {
        /// How it ended.
        status: RunStatus,
    },
    /// The run's log is anomalous: an operator must override the offending step first.
    Anomalous,
    /// An operator paused it already.
    AlreadyPaused {
        /// Who.
        by: String,
    },
    /// No operator's pause is in force.
    NotPaused,
    /// It rolls back already (an operator asked, or a step failed for good under
    /// `on_failure = "rollback"`).
    AlreadyRollingBack,
    /// The workflow has no such step (an override, a rerun).
    UnknownStep {
        /// The name given.
        step: String,
    },
    /// A step of a rerun's set is at work: it runs, its compensation runs, or its
    /// compensation waits for its next try.
    StepAtWork {
        /// The step.
        step: String,
        /// Its state.
        status: StepStatus,
    },
    /// The step asked to run again has not run (it is pending).
    NotRerunnable {
        /// The step.
        step: String,
    },
    /// A rerun's set holds a template that expanded: its items cannot be made again.
    Expanded {
        /// The template step.
        step: String,
    },
    /// A signal to a step that is not waiting for one: it runs code, waits for a timer, or
    /// is not at its wait now.
    NotWaiting {
        /// The step.
        step: String,
        /// Why, in words: what the step is or does instead.
        why: String,
    },
    /// A signal's data is larger than a signal may carry.
    DataTooLarge {
        /// Its size as JSON.
        bytes: usize,
        /// The most a signal carries.
        max: u32,
    },
}

impl Refusal {
    /// Snake-case name of the reason: the `code` of the server's 409.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::Finished { .. } => "finished",
            Refusal::Anomalous => "anomalous",
            Refusal::AlreadyPaused { .. } => "already_paused",
            Refusal::NotPaused => "not_paused",
            Refusal::AlreadyRollingBack => "already_rolling_back",
            Refusal::UnknownStep { .. } => "unknown_step",
            Refusal::StepAtWork { .. } => "step_at_work",
            Refusal::NotRerunnable { .. } => "not_rerunnable",
            Refusal::Expanded { .. } => "expanded",
            Refusal::NotWaiting { .. } => "not_waiting",
            Refusal::DataTooLarge { .. } => "data_too_large",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Finished { status } => write!(f, "the run is {status}: it is finished"),
            Refusal::Anomalous => write!(
                f,
                "the run's log is anomalous: override the anomalous step first"
            ),
            Refusal::AlreadyPaused { by } => write!(f, "the run is already paused by {by}"),
            Refusal::NotPaused => write!(f, "the run is not paused by an operator"),
            Refusal::AlreadyRollingBack => write!(f, "the run is already rolling back"),
            Refusal::UnknownStep { step } => write!(f, "the workflow has no step `{step}`"),
            Refusal::StepAtWork { step, status } => {
                write!(f, "step `{step}` is {status}: wait until it is done")
            }
            Refusal::NotRerunnable { step } => {
                write!(
                    f,
                    "step `{step}` has not run: there is nothing to run again"
                )
            }
            Refusal::Expanded { step } => write!(
                f,
                "step `{step}` is a template that expanded: its items cannot be made again"
            ),
            Refusal::NotWaiting { step, why } => {
                write!(f, "step `{step}` is not waiting for a signal: {why}")
            }
            Refusal::DataTooLarge { bytes, max } => write!(
                f,
                "the signal's data is {bytes} bytes of JSON; a signal carries at most {max}"
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// Whether the run allows `action` now.
///
/// # Errors
///
/// The [`Refusal`] saying why not.
pub fn check_action(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    action: RunAction,
) -> Result<(), Refusal> {
    check_with(state, dag, policy, &Frontier::new(dag, state), action)
}

/// The actions the run allows now, in [`RunAction::ALL`] order.
pub fn allowed_actions(state: &RunState, dag: &Dag, policy: &Policy) -> Vec<RunAction> {
    let f = Frontier::new(dag, state);
    RunAction::ALL
        .into_iter()
        .filter(|&a| check_with(state, dag, policy, &f, a).is_ok())
        .collect()
}

pub(crate) fn check_with(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    f: &Frontier,
    action: RunAction,
) -> Result<(), Refusal> {
    let status = status_with(state, dag, policy, f);
    if status.is_finished() {
        return Err(Refusal::Finished { status });
    }
    if state.anomaly.is_some() || f.anomalous() {
        return Err(Refusal::Anomalous);
    }
    match (action, &state.paused) {
        (RunAction::Pause, Some(pause)) => Err(Refusal::AlreadyPaused {
            by: pause.by.clone(),
        }),
        (RunAction::Resume, None) => Err(Refusal::NotPaused),
        (RunAction::Rollback, _) if rolling_back(state, dag, policy, f) => {
            Err(Refusal::AlreadyRollingBack)
        }
        (RunAction::Pause, None) | (RunAction::Resume, Some(_)) | (RunAction::Rollback, _) => {
            Ok(())
        }
    }
}
