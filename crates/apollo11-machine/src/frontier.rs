//! An index of a run's steps by what `decide` looks for: the steps that could start (or be
//! retried), the steps at work, the steps carrying a failure, and counts. Built from a state
//! in O(steps); kept current by `RunMachine` in O(log steps + dependents) per event, so a
//! decision costs what the run is doing, not how long its workflow is. Private: only
//! `RunMachine` updates one, together with the state it indexes.

use crate::{RunState, StepStatus};
use apollo11_dag::{Dag, NodeId};
use std::collections::BTreeSet;

/// Steps indexed by rank (topological position), so iteration is in decision order.
type ByRank = BTreeSet<(u32, NodeId)>;

/// What `decide` needs to know about a run's steps without looking at all of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Frontier {
    status: Vec<StepStatus>,
    /// Per step: how many of its dependencies are succeeded or skipped.
    deps_done: Vec<u32>,
    /// Pending steps whose dependencies are all done, failed or compensated steps, and steps
    /// whose compensation waits for its next try.
    pub(crate) candidates: ByRank,
    /// Running or compensating steps.
    pub(crate) busy: ByRank,
    /// Steps that may stop the run: those that carry an error (a retry under way included),
    /// and every step whose compensation failed.
    pub(crate) troubled: ByRank,
    pub(crate) done: usize,
    pub(crate) running: usize,
    pub(crate) anomalous: usize,
    /// Steps with events that the workflow does not have: the log does not match the
    /// definition, which makes the run anomalous.
    pub(crate) unknown: BTreeSet<String>,
}

impl Frontier {
    /// Indexes every step of `state`.
    pub(crate) fn new(dag: &Dag, state: &RunState) -> Frontier {
        let mut f = Frontier {
            status: vec![StepStatus::Pending; dag.len()],
            deps_done: vec![0; dag.len()],
            candidates: BTreeSet::new(),
            busy: BTreeSet::new(),
            troubled: BTreeSet::new(),
            done: 0,
            running: 0,
            anomalous: 0,
            unknown: BTreeSet::new(),
        };
        for n in dag.nodes() {
            if dag.dependencies(n).is_empty() {
                f.candidates.insert((dag.rank(n), n));
            }
        }
        for name in state.steps.keys() {
            f.update(dag, state, name.as_str());
        }
        f
    }

    /// Re-indexes `step` after an event about it was applied to `state`.
    pub(crate) fn update(&mut self, dag: &Dag, state: &RunState, step: &str) {
        let Some(n) = dag.node(step) else {
            self.unknown.insert(step.to_owned());
            return;
        };
        let s = state.step(step);
        let (old, new) = (self.status[n.index()], s.status);
        let key = (dag.rank(n), n);
        self.running = self.running + usize::from(new == StepStatus::Running)
            - usize::from(old == StepStatus::Running);
        self.anomalous = self.anomalous + usize::from(new == StepStatus::Anomalous)
            - usize::from(old == StepStatus::Anomalous);
        self.status[n.index()] = new;
        set(&mut self.busy, key, new.is_busy());
        // Which of these stop the run depends on their state and policy; `rollback.rs`
        // decides that, here they are only found.
        set(
            &mut self.troubled,
            key,
            s.last_error.is_some() || new == StepStatus::CompensationFailed,
        );
        self.refresh_candidate(dag, n);
        let (was_done, is_done) = (old.satisfies_dependents(), new.satisfies_dependents());
        if was_done != is_done {
            self.done = self.done + usize::from(is_done) - usize::from(was_done);
            for &d in dag.dependents(n) {
                let count = &mut self.deps_done[d.index()];
                *count = if is_done { *count + 1 } else { *count - 1 };
                self.refresh_candidate(dag, d);
            }
        }
    }

    fn refresh_candidate(&mut self, dag: &Dag, n: NodeId) {
        let ready = match self.status[n.index()] {
            StepStatus::Pending => self.deps_done[n.index()] as usize == dag.dependencies(n).len(),
            StepStatus::Failed | StepStatus::Compensated | StepStatus::CompensationFailed => true,
            StepStatus::Running
            | StepStatus::Succeeded
            | StepStatus::Compensating
            | StepStatus::Skipped
            | StepStatus::Anomalous => false,
        };
        set(&mut self.candidates, (dag.rank(n), n), ready);
    }

    /// True when some step is anomalous or unknown to the workflow.
    pub(crate) fn anomalous(&self) -> bool {
        self.anomalous > 0 || !self.unknown.is_empty()
    }
}

fn set(index: &mut ByRank, key: (u32, NodeId), member: bool) {
    if member {
        index.insert(key);
    } else {
        index.remove(&key);
    }
}
