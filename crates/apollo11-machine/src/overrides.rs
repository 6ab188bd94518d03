//! What a step override does: refused on a finished run, otherwise what happens next to the
//! step, judged on the run as the override leaves it. One pure function answers for the
//! engine (which refuses), the server (409, and the effect of each choice, which the web
//! UI's labels show) and the command line.

use crate::actions::Refusal;
use crate::rollback::{exhausted, rolling_back, status_with, undoes_nothing};
use crate::{Frontier, Policy, RunState};
use apollo11_core::{Idempotency, OnFailure, OverrideTarget};
use apollo11_dag::{Dag, NodeId};
use serde::Serialize;
use std::fmt;

/// What happens next to an overridden step (once an operator's pause, if any, is lifted).
/// Exhaustive: a front end must say each one in words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrideEffect {
    /// The step runs again, as its next attempt, once the steps it depends on are done.
    Rerun,
    /// The step counts as done: the steps that depend on it may start.
    Done,
    /// The step has failed for good: the run pauses for a person (`on_failure = "pause"`).
    Pause,
    /// The step has failed for good: the run rolls back (`on_failure = "rollback"`).
    RollBack,
    /// The run rolls back and undoes the step: its compensation runs (again, with a new
    /// budget of tries).
    Compensate,
    /// The run rolls back and leaves the step as it is: nothing undoes it.
    LeftAsIs,
    /// The step no longer fails for good, which ends the rollback that failure started: the
    /// run goes forward again, and the steps it compensated run again.
    EndsRollback,
}

impl OverrideEffect {
    /// Snake-case name, as in the API.
    pub fn name(self) -> &'static str {
        match self {
            OverrideEffect::Rerun => "rerun",
            OverrideEffect::Done => "done",
            OverrideEffect::Pause => "pause",
            OverrideEffect::RollBack => "roll_back",
            OverrideEffect::Compensate => "compensate",
            OverrideEffect::LeftAsIs => "left_as_is",
            OverrideEffect::EndsRollback => "ends_rollback",
        }
    }

    /// What happens, in words an operator reads beside the choice.
    pub fn describe(self) -> &'static str {
        match self {
            OverrideEffect::Rerun => "runs again",
            OverrideEffect::Done => "counts as done, the steps after it may start",
            OverrideEffect::Pause => "fails for good, the run pauses",
            OverrideEffect::RollBack => "fails for good, the run rolls back",
            OverrideEffect::Compensate => "its compensation runs again",
            OverrideEffect::LeftAsIs => "the rollback leaves it as it is",
            OverrideEffect::EndsRollback => "the rollback stops, the run goes forward again",
        }
    }
}

impl fmt::Display for OverrideEffect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What overriding `step` to `to` does now.
///
/// # Errors
///
/// [`Refusal::Finished`] when the run succeeded or was rolled back (nothing would act on the
/// override), [`Refusal::UnknownStep`] when the workflow has no such step.
pub fn check_override(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    step: &str,
    to: OverrideTarget,
) -> Result<OverrideEffect, Refusal> {
    effect_with(state, dag, policy, &Frontier::new(dag, state), step, to)
}

/// [`check_override`] with the run's frontier at hand.
pub(crate) fn effect_with(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    f: &Frontier,
    step: &str,
    to: OverrideTarget,
) -> Result<OverrideEffect, Refusal> {
    overrides_with(state, dag, policy, f)?;
    let node = dag.node(step).ok_or_else(|| Refusal::UnknownStep {
        step: step.to_owned(),
    })?;
    let before = rolling_back(state, dag, policy, f);
    let after = rolls_back_after(state, dag, policy, f, node, to);
    Ok(match (before, after) {
        (true, true) if undone_after(state, dag, policy, node, to) => OverrideEffect::Compensate,
        (true, true) => OverrideEffect::LeftAsIs,
        (false, true) => OverrideEffect::RollBack,
        (true, false) => OverrideEffect::EndsRollback,
        (false, false) => match to {
            OverrideTarget::Pending => OverrideEffect::Rerun,
            OverrideTarget::Succeeded | OverrideTarget::Skipped => OverrideEffect::Done,
            OverrideTarget::Failed => OverrideEffect::Pause,
        },
    })
}

/// Whether the run takes overrides at all: not once it succeeded or was rolled back, when
/// nothing would act on one. An anomalous (`failed`) or paused run takes them: they are
/// how an operator gets it going again.
pub(crate) fn overrides_with(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    f: &Frontier,
) -> Result<(), Refusal> {
    let status = status_with(state, dag, policy, f);
    if status.is_finished() {
        return Err(Refusal::Finished { status });
    }
    Ok(())
}

/// Whether the run rolls back once `node` is overridden to `to`: an operator asked for it,
/// or, under `on_failure = "rollback"`, a step has failed for good (an override to `failed`
/// fails it for good; any other target clears its failure).
fn rolls_back_after(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    f: &Frontier,
    node: NodeId,
    to: OverrideTarget,
) -> bool {
    let others_failed = || {
        f.troubled
            .iter()
            .any(|&(_, n)| n != node && exhausted(state.step(dag.name(n)), policy.step(n)))
    };
    state.rollback.is_some()
        || (policy.on_failure() == OnFailure::Rollback
            && (to == OverrideTarget::Failed || others_failed()))
}

/// Whether a rollback undoes the step once it is `to`: a succeeded step with a
/// compensation, or a failed one whose class is `compensate`; not a template that expanded.
fn undone_after(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    node: NodeId,
    to: OverrideTarget,
) -> bool {
    let p = policy.step(node);
    p.has_compensation
        && !undoes_nothing(state, dag, node)
        && match to {
            OverrideTarget::Succeeded => true,
            OverrideTarget::Failed => p.idempotency == Idempotency::Compensate,
            OverrideTarget::Pending | OverrideTarget::Skipped => false,
        }
}

/// Every override target of `step` with what it does now, in [`OverrideTarget::ALL`]
/// order: what a front end offers an operator.
///
/// # Errors
///
/// As [`check_override`], which refuses every target alike.
pub(crate) fn choices_with(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    f: &Frontier,
    step: &str,
) -> Result<Vec<(OverrideTarget, OverrideEffect)>, Refusal> {
    OverrideTarget::ALL
        .into_iter()
        .map(|to| Ok((to, effect_with(state, dag, policy, f, step, to)?)))
        .collect()
}
