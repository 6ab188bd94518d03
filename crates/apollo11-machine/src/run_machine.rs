//! `RunMachine`: one run's state, kept together with everything derived from it. Callers
//! fold events and ask for decisions through it; none can update the state without the
//! index `decide` reads (the frontier), so the two cannot drift.

use crate::actions::check_with;
use crate::decide::decide_with;
use crate::overrides::{choices_with, overrides_with};
use crate::rerun::{rerun_with, RerunPlan};
use crate::rollback::{pause_cause_with, status_with};
use crate::{note_for, stop_reason};
use crate::{
    Command, Frontier, Now, OverrideEffect, PauseCause, Policy, PolicyError, Refusal, Rule,
    RunAction, RunState, RunStatus,
};
use apollo11_core::{
    AttemptFailure, Event, EventId, EventKind, EventRef, OverrideTarget, WorkflowSpec,
};
use apollo11_dag::Dag;

/// A run's state with its graph, its policy and the index of its steps that decisions
/// read, updated together event by event: a decision costs what the run is doing, not how
/// many steps its workflow has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunMachine {
    dag: Dag,
    policy: Policy,
    state: RunState,
    frontier: Frontier,
}

impl RunMachine {
    /// A machine for `state`, a run of the workflow `dag` and `policy` were compiled from.
    pub fn new(dag: Dag, policy: Policy, state: RunState) -> RunMachine {
        let frontier = Frontier::new(&dag, &state);
        RunMachine {
            dag,
            policy,
            state,
            frontier,
        }
    }

    /// Compiles `spec` (see [`Policy::compile`]) and makes a machine for `state`.
    ///
    /// # Errors
    ///
    /// The [`PolicyError`] of an invalid spec.
    pub fn compile(
        spec: &WorkflowSpec,
        state: RunState,
        auto_timeout_ms: impl Fn(&str, u64) -> u64,
    ) -> Result<RunMachine, PolicyError> {
        let (dag, policy) = Policy::compile(spec, auto_timeout_ms)?;
        Ok(RunMachine::new(dag, policy, state))
    }

    /// Takes the graph and policy of `spec`, a definition grown from this run's (a template
    /// step's items added at run time), keeping the state: steps keep their events, new
    /// steps start pending, and a rollback compensates the new steps with the rest, in
    /// reverse topological order. `auto_timeout_ms` as for [`RunMachine::compile`].
    ///
    /// # Errors
    ///
    /// The [`PolicyError`] of an invalid spec; the machine is then left as it was.
    pub fn regraph(
        &mut self,
        spec: &WorkflowSpec,
        auto_timeout_ms: impl Fn(&str, u64) -> u64,
    ) -> Result<(), PolicyError> {
        let (dag, policy) = Policy::compile(spec, auto_timeout_ms)?;
        self.frontier = Frontier::new(&dag, &self.state);
        self.dag = dag;
        self.policy = policy;
        Ok(())
    }

    /// The note a `Failed` event recording `failed` at `at_ms` for `step` carries: why no
    /// attempt will follow (see [`note_for`]), or empty; empty for a step not in the graph.
    pub fn failure_note(&self, step: &str, failed: &AttemptFailure, at_ms: u64) -> String {
        self.dag.node(step).map_or_else(String::new, |n| {
            note_for(
                self.state.step(step),
                failed,
                at_ms,
                &self.policy.step(n).retry,
            )
        })
    }

    /// The note a `CompensationTryFailed` event recording `failed` for `step` carries: the
    /// delay the next try gets when the failed one asked for it (see
    /// [`crate::compensation_note_for`]), or empty; empty for a step not in the graph.
    pub fn compensation_failure_note(&self, step: &str, failed: &AttemptFailure) -> String {
        self.dag.node(step).map_or_else(String::new, |n| {
            crate::compensation_note_for(self.state.step(step), failed, &self.policy.step(n).retry)
        })
    }

    /// The memory limit the next attempt of `step` runs with in place of its own, after an
    /// `oom` grew it (see [`crate::memory_limit`]); `None` for the step's own.
    pub fn memory_limit(&self, step: &str) -> Option<u64> {
        let n = self.dag.node(step)?;
        crate::memory_limit(self.state.step(step), &self.policy.step(n).retry)
    }

    /// Why `step` will not be tried again after its last failure (see [`stop_reason`]);
    /// `None` while it may be, or when it has not failed.
    pub fn stop_reason(&self, step: &str) -> Option<String> {
        let n = self.dag.node(step)?;
        let s = self.state.step(step);
        let failure = s.last_error.as_deref()?;
        stop_reason(s, failure, &self.policy.step(n).retry)
    }

    /// Folds one event (see [`RunState::apply`]).
    pub fn apply(&mut self, event: &Event) -> Option<Rule> {
        self.apply_ref(&event.view())
    }

    /// Folds one event borrowed from where it was decoded.
    pub fn apply_ref(&mut self, event: &EventRef<'_>) -> Option<Rule> {
        let rule = self.state.apply_ref(event);
        if event.run_id != self.state.run_id.as_str() {
            return rule;
        }
        match (event.step, &event.kind) {
            (Some(step), _) => self.frontier.update(&self.dag, &self.state, step),
            (None, EventKind::RerunRequested { steps, .. }) => {
                for step in steps
                    .iter()
                    .filter(|s| self.state.steps.contains_key(s.as_str()))
                {
                    self.frontier.update(&self.dag, &self.state, step);
                }
            }
            (None, _) => {}
        }
        rule
    }

    /// Replaces the state with one folded elsewhere (after another writer appended, say).
    pub fn reset(&mut self, state: RunState) {
        self.frontier = Frontier::new(&self.dag, &state);
        self.state = state;
    }

    /// Records the id the store gave the last event folded, when events are folded before
    /// their ids are known (an append's ids come back with its acknowledgement).
    pub fn acknowledge(&mut self, last_event_id: EventId) {
        self.state.last_event_id = self.state.last_event_id.max(last_event_id);
    }

    /// What to do next (see [`crate::decide`]).
    pub fn decide(&self, now: Now<'_>) -> Vec<Command> {
        decide_with(&self.state, &self.dag, &self.policy, now, &self.frontier)
    }

    /// The run's status (see [`crate::run_status`]).
    pub fn status(&self) -> RunStatus {
        status_with(&self.state, &self.dag, &self.policy, &self.frontier)
    }

    /// Why the run is paused, if it is (see [`crate::pause_cause`]).
    pub fn pause_cause(&self) -> Option<PauseCause> {
        pause_cause_with(&self.state, &self.dag, &self.policy, &self.frontier)
    }

    /// Whether the run allows `action` now (see [`crate::check_action`]).
    ///
    /// # Errors
    ///
    /// The [`Refusal`] saying why not.
    pub fn check_action(&self, action: RunAction) -> Result<(), Refusal> {
        check_with(&self.state, &self.dag, &self.policy, &self.frontier, action)
    }

    /// The actions the run allows now.
    pub fn allowed_actions(&self) -> Vec<RunAction> {
        RunAction::ALL
            .into_iter()
            .filter(|&a| self.check_action(a).is_ok())
            .collect()
    }

    /// Whether the run takes step overrides now (see [`crate::check_override`]).
    ///
    /// # Errors
    ///
    /// The [`Refusal`] saying why not (the run is finished).
    pub fn check_overrides(&self) -> Result<(), Refusal> {
        overrides_with(&self.state, &self.dag, &self.policy, &self.frontier)
    }

    /// What each override target of `step` does now, in [`OverrideTarget::ALL`] order
    /// (see [`crate::check_override`]).
    ///
    /// # Errors
    ///
    /// The [`Refusal`] that refuses every target alike.
    pub fn override_choices(
        &self,
        step: &str,
    ) -> Result<Vec<(OverrideTarget, OverrideEffect)>, Refusal> {
        choices_with(&self.state, &self.dag, &self.policy, &self.frontier, step)
    }

    /// What a rerun of `step` (and, with `downstream`, of every step after it) would do now,
    /// or why the run refuses it: see [`check_rerun`](crate::check_rerun).
    ///
    /// # Errors
    ///
    /// The [`Refusal`] saying why not.
    pub fn check_rerun(&self, step: &str, downstream: bool) -> Result<RerunPlan, Refusal> {
        rerun_with(
            &self.state,
            &self.dag,
            &self.policy,
            &self.frontier,
            step,
            downstream,
        )
    }

    /// The run's state.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// The workflow's graph.
    pub fn dag(&self) -> &Dag {
        &self.dag
    }

    /// The workflow's policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The state, leaving the machine.
    pub fn into_state(self) -> RunState {
        self.state
    }
}
