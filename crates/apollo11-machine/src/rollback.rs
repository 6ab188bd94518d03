//! The run-level view: whether a run has failed for good, what a rollback still has to undo,
//! and the run's status. Derived from step states on every call: the log holds only step
//! transitions, so the run status can never disagree with them.

use crate::retry::stop_reason;
use crate::trigger::handlers_due;
use crate::{Frontier, Policy, RunState, StepPolicy, StepState, StepStatus};
use apollo11_core::{Idempotency, OnFailure, OverrideTarget, StepName};
use apollo11_dag::{Dag, NodeId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Status of a run as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// Work remains or is under way.
    Running,
    /// Every step succeeded or was skipped.
    Succeeded,
    /// The log of the run is anomalous: an operator must override the offending step.
    Failed,
    /// A step failed for good and every compensation has run.
    RolledBack,
    /// A step failed for good and the run waits for an operator.
    Paused,
}

impl RunStatus {
    /// Every state, in declaration order.
    pub const ALL: [RunStatus; 5] = [
        RunStatus::Running,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::RolledBack,
        RunStatus::Paused,
    ];

    /// Lower-case name, as shown to users.
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::RolledBack => "rolled_back",
            RunStatus::Paused => "paused",
        }
    }

    /// True unless the run is still running.
    pub fn is_terminal(self) -> bool {
        self != RunStatus::Running
    }

    /// True when nothing can change the run any more (succeeded or rolled back): no
    /// operator action is allowed on it.
    pub fn is_finished(self) -> bool {
        matches!(self, RunStatus::Succeeded | RunStatus::RolledBack)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a run waits for a person. Exhaustive on purpose: a front end must tell an operator
/// what to do about every cause, so a new one should not compile until it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PauseCause {
    /// An operator paused it (`RunPaused`); `RunResumed` lifts it.
    Operator {
        /// Who.
        by: String,
        /// Why.
        reason: String,
    },
    /// A step failed with no retry left (or with an error no retry fixes) and the workflow
    /// says `on_failure = "pause"`.
    StepFailed {
        /// The first such step in topological order.
        step: StepName,
    },
    /// A step's compensation failed with no try left (or with an error no retry fixes):
    /// the run waits whatever `on_failure` says, since the engine cannot undo the step.
    CompensationFailed {
        /// The first such step in topological order.
        step: StepName,
        /// The override that makes the run try the compensation again (with a new budget of
        /// tries), when there is one: during a rollback, putting the step back in the state
        /// its compensation started from.
        retry_with: Option<OverrideTarget>,
    },
}

/// Why a run is paused; `None` unless [`run_status`] says `paused`.
pub fn pause_cause(state: &RunState, dag: &Dag, policy: &Policy) -> Option<PauseCause> {
    pause_cause_with(state, dag, policy, &Frontier::new(dag, state))
}

/// [`pause_cause`] with the run's frontier at hand.
pub(crate) fn pause_cause_with(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    f: &Frontier,
) -> Option<PauseCause> {
    if status_with(state, dag, policy, f) != RunStatus::Paused {
        return None;
    }
    let troubled = || f.troubled.iter().map(|&(_, n)| n);
    if let Some(n) = troubled().find(|&n| stuck(state.step(dag.name(n)), policy.step(n))) {
        let step = state.step(dag.name(n));
        let retry_with = rolling_back(state, dag, policy, f).then(|| {
            if step.last_error.is_some() {
                OverrideTarget::Failed
            } else {
                OverrideTarget::Succeeded
            }
        });
        return Some(PauseCause::CompensationFailed {
            step: StepName(dag.name(n).to_owned()),
            retry_with,
        });
    }
    if let Some(pause) = &state.paused {
        return Some(PauseCause::Operator {
            by: pause.by.clone(),
            reason: pause.reason.clone(),
        });
    }
    troubled()
        .find(|&n| exhausted(state.step(dag.name(n)), policy.step(n)))
        .map(|n| PauseCause::StepFailed {
            step: StepName(dag.name(n).to_owned()),
        })
}

/// True when the run undoes its steps rather than going forward: an operator asked for it,
/// or a step failed for good under `on_failure = "rollback"`.
pub(crate) fn rolling_back(state: &RunState, dag: &Dag, policy: &Policy, f: &Frontier) -> bool {
    state.rollback.is_some()
        || (policy.on_failure() == OnFailure::Rollback && failed_for_good(state, dag, policy, f))
}

/// The status of a run, from its state alone.
pub fn run_status(state: &RunState, dag: &Dag, policy: &Policy) -> RunStatus {
    status_with(state, dag, policy, &Frontier::new(dag, state))
}

/// [`run_status`] with the run's frontier at hand.
pub(crate) fn status_with(state: &RunState, dag: &Dag, policy: &Policy, f: &Frontier) -> RunStatus {
    let busy = !f.busy.is_empty();
    if state.anomaly.is_some() || f.anomalous() {
        return if busy {
            RunStatus::Running
        } else {
            RunStatus::Failed
        };
    }
    // A rollback asked for while the last steps ran undoes them: the run never succeeds;
    // nor while a rerun has steps to compensate first.
    if f.done == dag.len() && state.rollback.is_none() && state.undo_first.is_empty() {
        return RunStatus::Succeeded;
    }
    if busy {
        return RunStatus::Running;
    }
    if compensation_stuck(state, dag, policy, f) {
        return RunStatus::Paused;
    }
    let rolling_back = rolling_back(state, dag, policy, f);
    let failing = failed_for_good(state, dag, policy, f);
    // Handlers of a failure still run (see `trigger.rs`) before the run pauses or rolls back.
    if failing
        && state.paused.is_none()
        && handlers_due(state, dag, policy, f, rolling_back)
            .next()
            .is_some()
    {
        return RunStatus::Running;
    }
    // A rollback with nothing left to undo is finished, even under an operator's pause.
    if rolling_back && to_undo(state, dag, policy).is_empty() {
        return RunStatus::RolledBack;
    }
    if state.paused.is_some() {
        return RunStatus::Paused;
    }
    if rolling_back || !failing {
        return RunStatus::Running;
    }
    RunStatus::Paused
}

/// True when a step has failed with no retry left, which stops the run's progress.
pub(crate) fn failed_for_good(state: &RunState, dag: &Dag, policy: &Policy, f: &Frontier) -> bool {
    f.troubled
        .iter()
        .any(|&(_, n)| exhausted(state.step(dag.name(n)), policy.step(n)))
}

/// True when a step's compensation failed with no try left (or with an error no retry can
/// fix): the run then waits for a person, whatever `on_failure` says, because nothing the
/// engine can do undoes that step.
pub(crate) fn compensation_stuck(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    f: &Frontier,
) -> bool {
    f.troubled
        .iter()
        .any(|&(_, n)| stuck(state.step(dag.name(n)), policy.step(n)))
}

fn stuck(step: &StepState, policy: &StepPolicy) -> bool {
    step.status == StepStatus::CompensationFailed
        && step
            .compensation_error
            .as_ref()
            .is_some_and(|e| !e.retryable || step.compensation_tries >= policy.retry.max_attempts)
}

pub(crate) fn exhausted(step: &StepState, policy: &StepPolicy) -> bool {
    let after_failure = matches!(
        step.status,
        StepStatus::Failed
            | StepStatus::Compensating
            | StepStatus::CompensationFailed
            | StepStatus::Compensated
    );
    after_failure
        && step
            .last_error
            .as_ref()
            .is_some_and(|e| stop_reason(step, e, &policy.retry).is_some())
}

/// Steps a rollback must still compensate or is compensating: every succeeded step with a
/// compensation, every failed step of class `compensate` (its failure may have left
/// effects, which is why the class exists), and every step whose compensation is under way
/// or waits for its next try; none that [`undoes_nothing`].
pub(crate) fn to_undo(state: &RunState, dag: &Dag, policy: &Policy) -> Vec<NodeId> {
    dag.nodes()
        .filter(|&n| {
            let p = policy.step(n);
            p.has_compensation
                && !undoes_nothing(state, dag, n)
                && match state.status(dag.name(n)) {
                    StepStatus::Succeeded
                    | StepStatus::Compensating
                    | StepStatus::CompensationFailed => true,
                    StepStatus::Failed => p.idempotency == Idempotency::Compensate,
                    StepStatus::Pending
                    | StepStatus::Running
                    | StepStatus::Compensated
                    | StepStatus::Skipped
                    | StepStatus::Anomalous => false,
                }
        })
        .collect()
}

/// True for a template step that expanded: its work is its items, each undone by a rollback
/// in its turn, before the steps the template depends on. Compensating the template itself
/// would undo nothing, and would leave it to be started again should the rollback be called
/// off (an override clearing the failure under `on_failure = "rollback"`), when a template
/// cannot expand twice.
pub(crate) fn undoes_nothing(state: &RunState, dag: &Dag, node: NodeId) -> bool {
    let name = dag.name(node);
    state.expansions.iter().any(|e| e.step.as_str() == name)
}
