//! Waiting steps (`StepSpec::wait`): an attempt that runs no code. It holds no concurrency
//! slot, a dead engine does not interrupt it (nothing of it ran there), its timer fires at
//! an instant derived from the log alone (the `Started` event's time plus the duration, or
//! the instant the definition names), so it survives restarts, and a signal ends it only
//! while it waits.

use crate::{Command, Frontier, Policy, Refusal, RunState, StepState, StepStatus};
use apollo11_core::StepName;
use apollo11_dag::{Dag, NodeId};

/// Whether the step `node` waits instead of running code.
pub(crate) fn waits(policy: &Policy, node: NodeId) -> bool {
    policy.step(node).wait.is_some()
}

/// When the timer of a waiting step's current attempt fires; `None` for a step that waits
/// for a signal, runs code, or has not started.
pub(crate) fn timer_due_ms(step: &StepState, policy: &Policy, node: NodeId) -> Option<u64> {
    policy.step(node).wait?.due_ms(step.started_ms?)
}

/// `Fire` for a waiting step whose timer is due at `now_ms`.
pub(crate) fn fired(
    step: &StepState,
    name: &str,
    policy: &Policy,
    node: NodeId,
    now_ms: u64,
) -> Option<Command> {
    let due = timer_due_ms(step, policy, node)?;
    (step.status == StepStatus::Running && due <= now_ms).then(|| Command::Fire {
        step: StepName(name.to_owned()),
        attempt: step.attempt,
    })
}

/// Running steps that hold a concurrency slot: those at work, not those waiting.
pub(crate) fn holding_slots(state: &RunState, dag: &Dag, policy: &Policy, f: &Frontier) -> usize {
    let waiting = f
        .busy
        .iter()
        .filter(|&&(_, n)| waits(policy, n) && state.status(dag.name(n)) == StepStatus::Running)
        .count();
    f.running.saturating_sub(waiting)
}

/// Whether a signal may end `step`'s wait now, and the attempt it ends.
///
/// # Errors
///
/// [`Refusal::UnknownStep`], or [`Refusal::NotWaiting`] saying why: the step runs code,
/// waits for a timer, or is not at its wait (pending, or done).
pub fn check_signal(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    step: &str,
) -> Result<u32, Refusal> {
    let Some(node) = dag.node(step) else {
        return Err(Refusal::UnknownStep {
            step: step.to_owned(),
        });
    };
    let not_waiting = |why: String| Refusal::NotWaiting {
        step: step.to_owned(),
        why,
    };
    let Some(wait) = policy.step(node).wait else {
        return Err(not_waiting("it runs code".to_owned()));
    };
    if !wait.takes_signal() {
        return Err(not_waiting("it waits for a timer".to_owned()));
    }
    let s = state.step(step);
    match s.status {
        StepStatus::Running => Ok(s.attempt),
        status => Err(not_waiting(format!("it is {status}"))),
    }
}
