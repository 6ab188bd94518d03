//! Trigger rules: whether a pending step may start, given how its dependencies ended.
//!
//! A dependency is *ok* (succeeded, skipped, or a template that expanded), *failed for good*
//! (no retry left), or *open* (it may still change on its own). Once a step of the run has
//! failed for good, nothing new starts but the steps whose rule is `all_done` or
//! `one_failed` (the handlers); every other step that has not finished is *held* until a
//! person acts, and a held dependency counts as done for a handler (a cleanup runs at the
//! failure, not after work that will not happen).
//!
//! - `all_succeeded` holds when every dependency is ok. It never produces a skip: a failed
//!   dependency stops the run, and an operator who lets the run go on does so by overriding
//!   that dependency, after which the rule may hold.
//! - `all_done` holds when every dependency is ok, failed for good or held.
//! - `one_failed` holds when every dependency is ok, failed for good or held, and one failed
//!   for good. When every dependency is ok or failed for good and none failed, it can never
//!   hold: the step is skipped. While one is held it waits (the person may yet let it run).
//!
//! The rule is asked before every attempt, not only the first: a handler that failed, or
//! was compensated, is tried again only while its rule holds, and skipped once it never
//! will (an override took the failure it handled away). A handler of class `compensate` is
//! compensated before that skip, as before a rerun: its failed attempt may have left effects.

use crate::frontier::Frontier;
use crate::rollback::exhausted;
use crate::{Policy, RunState, StepStatus};
use apollo11_core::{Idempotency, TriggerRule};
use apollo11_dag::{Dag, NodeId};

/// What a pending step's trigger rule says now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The step may start.
    Holds,
    /// Not yet: a dependency may still change.
    Waits,
    /// Never: the step is skipped, for this reason.
    Never(String),
}

/// How a dependency ended, as a trigger rule sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Ok,
    FailedForGood,
    Held,
    Open,
}

/// The verdict of `node`'s trigger rule. `failing`: a step of the run has failed for good,
/// so steps that are not handlers are held.
pub(crate) fn verdict(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    node: NodeId,
    failing: bool,
) -> Verdict {
    let ends: Vec<End> = dag
        .dependencies(node)
        .iter()
        .map(|&d| end(state, dag, policy, d, failing))
        .collect();
    let all = |f: fn(End) -> bool| ends.iter().all(|&e| f(e));
    let failed = ends.contains(&End::FailedForGood);
    let done = all(|e| e != End::Open);
    match policy.step(node).trigger {
        TriggerRule::AllSucceeded if all(|e| e == End::Ok) => Verdict::Holds,
        TriggerRule::AllDone if done => Verdict::Holds,
        TriggerRule::OneFailed if done && failed => Verdict::Holds,
        TriggerRule::OneFailed if all(|e| e == End::Ok) => {
            Verdict::Never("trigger rule `one_failed`: no dependency failed".to_owned())
        }
        TriggerRule::AllSucceeded | TriggerRule::AllDone | TriggerRule::OneFailed => Verdict::Waits,
    }
}

fn end(state: &RunState, dag: &Dag, policy: &Policy, node: NodeId, failing: bool) -> End {
    let step = state.step(dag.name(node));
    if step.status.satisfies_dependents() {
        End::Ok
    } else if exhausted(step, policy.step(node)) {
        End::FailedForGood
    } else if failing && !step.status.is_busy() && is_held(step.status, policy, node) {
        End::Held
    } else {
        End::Open
    }
}

/// True for a step that, in a run with a failure for good, will not change before a person
/// acts: not a handler (handlers still run), and not anomalous (an anomaly stops the run).
fn is_held(status: StepStatus, policy: &Policy, node: NodeId) -> bool {
    policy.step(node).trigger == TriggerRule::AllSucceeded && status != StepStatus::Anomalous
}

/// The handlers with something to do in a run where a step failed for good, in
/// topological order: pending ones whose rule holds or never will, failed ones with a retry
/// left (once their rule holds or never will, but for one to compensate first), and, unless
/// the run rolls back, ones to rerun after a compensation (once their rule holds or never
/// will) or whose compensation is to be tried again.
///
/// A rollback does not try a handler of class `compensate` again: the rerun would need its
/// compensation first, done out of the rollback's order (before the steps downstream of it
/// that the rollback undoes), and the rollback would undo the rerun's work in turn. The
/// rollback's waves compensate the failed handler, dependents first.
pub(crate) fn handlers_due<'a>(
    state: &'a RunState,
    dag: &'a Dag,
    policy: &'a Policy,
    f: &Frontier,
    rolling_back: bool,
) -> impl Iterator<Item = NodeId> + 'a {
    // Handlers start at a failure, before a rollback's compensations: once none of the
    // run's steps is left failed (each compensated, or overridden), a rollback under way
    // starts no handler whose rule comes to hold; it may still skip one that never will.
    let failed = |&(_, d): &(_, NodeId)| state.step(dag.name(d)).status == StepStatus::Failed;
    let late = rolling_back && !f.troubled.iter().any(failed);
    policy.handlers().iter().copied().filter(move |&n| {
        let step = state.step(dag.name(n));
        let retry_left = !exhausted(step, policy.step(n));
        let undone_first = policy.step(n).idempotency == Idempotency::Compensate;
        let decided = || verdict(state, dag, policy, n, true) != Verdict::Waits;
        match step.status {
            StepStatus::Pending if late => {
                matches!(verdict(state, dag, policy, n, true), Verdict::Never(_))
            }
            StepStatus::Pending => decided(),
            // A handler compensates before it is tried again, whatever its rule says; it is
            // tried again only once its rule holds or never will (it waits for a dependency
            // a person may let run: an override took the failure it handled away).
            StepStatus::Failed if undone_first => retry_left && !rolling_back,
            StepStatus::Failed => retry_left && decided(),
            StepStatus::Compensated => retry_left && !rolling_back && decided(),
            StepStatus::CompensationFailed => retry_left && !rolling_back,
            StepStatus::Running
            | StepStatus::Succeeded
            | StepStatus::Compensating
            | StepStatus::Skipped
            | StepStatus::Anomalous => false,
        }
    })
}
