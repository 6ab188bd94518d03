//! What an operator's rerun of a step does, or why the run refuses it: one pure function for
//! the engine (which records the answer as one `RerunRequested` event), the server (409 with
//! the reason), the command line and the plan alike.

use crate::actions::Refusal;
use crate::rollback::{rolling_back, status_with, undoes_nothing};
use crate::{Frontier, Policy, RunState, RunStatus, StepPolicy, StepStatus};
use apollo11_core::{EventKind, Idempotency, StepName};
use apollo11_dag::{Dag, NodeId};
use serde::Serialize;

/// What a rerun does: the steps compensated first (in the order of their compensations,
/// waves one after another), then the set that runs again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RerunPlan {
    /// The set that runs again: the step asked for, then the steps after it when they were
    /// asked for too, in topological order.
    pub steps: Vec<StepName>,
    /// The steps of the set that have a compensation and succeeded (or failed, of class
    /// `compensate`), in reverse topological order: each is compensated before the set runs
    /// again.
    pub compensate: Vec<StepName>,
}

impl RerunPlan {
    /// The run-level event that records the rerun.
    pub fn event(&self, by: &str, reason: &str) -> EventKind {
        let names = |steps: &[StepName]| steps.iter().map(|s| s.as_str().to_owned()).collect();
        EventKind::RerunRequested {
            steps: names(&self.steps),
            compensate: names(&self.compensate),
            by: by.to_owned(),
            reason: reason.to_owned(),
        }
    }
}

/// What a rerun of `step` (and, with `downstream`, of every step that depends on it,
/// transitively) does now. Allowed on a finished run (succeeded or rolled back), a paused
/// one and a running one, as long as no step of the set is at work.
///
/// # Errors
///
/// [`Refusal::UnknownStep`]; [`Refusal::Anomalous`]; [`Refusal::AlreadyRollingBack`] while a
/// rollback is under way; [`Refusal::NotRerunnable`] for a step that has not run (pending);
/// [`Refusal::StepAtWork`] when a step of the set runs, is compensated or waits for its
/// compensation's next try; [`Refusal::Expanded`] for a template that expanded.
pub fn check_rerun(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    step: &str,
    downstream: bool,
) -> Result<RerunPlan, Refusal> {
    let f = Frontier::new(dag, state);
    rerun_with(state, dag, policy, &f, step, downstream)
}

pub(crate) fn rerun_with(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    f: &Frontier,
    step: &str,
    downstream: bool,
) -> Result<RerunPlan, Refusal> {
    let Some(node) = dag.node(step) else {
        return Err(Refusal::UnknownStep {
            step: step.to_owned(),
        });
    };
    if state.anomaly.is_some() || f.anomalous() {
        return Err(Refusal::Anomalous);
    }
    let status = status_with(state, dag, policy, f);
    if status != RunStatus::RolledBack && rolling_back(state, dag, policy, f) {
        return Err(Refusal::AlreadyRollingBack);
    }
    let mut set = vec![node];
    if downstream {
        set.extend(dag.downstream(node));
    }
    for &n in &set {
        rerunnable(state, dag, n, n == node)?;
    }
    let compensate: Vec<NodeId> = (set.iter().copied())
        .filter(|&n| undone_first(state.status(dag.name(n)), policy.step(n)))
        .collect();
    let name = |n: NodeId| StepName(dag.name(n).to_owned());
    Ok(RerunPlan {
        steps: set.into_iter().map(name).collect(),
        compensate: dag
            .compensation_plan(&compensate)
            .into_iter()
            .flatten()
            .map(name)
            .collect(),
    })
}

/// Whether a step of a rerun's set is compensated before it runs again: one with a
/// compensation that succeeded, or that failed and is of class `compensate` (its failure
/// may have left effects, as a rollback assumes too).
fn undone_first(status: StepStatus, policy: &StepPolicy) -> bool {
    policy.has_compensation
        && match status {
            StepStatus::Succeeded => true,
            StepStatus::Failed => policy.idempotency == Idempotency::Compensate,
            StepStatus::Pending
            | StepStatus::Running
            | StepStatus::Compensating
            | StepStatus::CompensationFailed
            | StepStatus::Compensated
            | StepStatus::Skipped
            | StepStatus::Anomalous => false,
        }
}

/// Whether step `n` of a rerun's set may run again: the step asked for must have run.
fn rerunnable(state: &RunState, dag: &Dag, n: NodeId, asked: bool) -> Result<(), Refusal> {
    let name = dag.name(n);
    let status = state.status(name);
    match status {
        StepStatus::Running | StepStatus::Compensating | StepStatus::CompensationFailed => {
            Err(Refusal::StepAtWork {
                step: name.to_owned(),
                status,
            })
        }
        StepStatus::Pending if asked => Err(Refusal::NotRerunnable {
            step: name.to_owned(),
        }),
        StepStatus::Anomalous => Err(Refusal::Anomalous),
        _ if undoes_nothing(state, dag, n) => Err(Refusal::Expanded {
            step: name.to_owned(),
        }),
        StepStatus::Pending
        | StepStatus::Succeeded
        | StepStatus::Failed
        | StepStatus::Compensated
        | StepStatus::Skipped => Ok(()),
    }
}
