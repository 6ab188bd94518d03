//! Operators' actions on a run: a step override, pause, unpause, rollback, rerun. Each is one
//! event, checked with the machine against the state its append's seq is stated for and
//! appended unfenced; a run that moves in between (a conflict) is read and checked again
//! after a short pause, [`OPERATOR_APPEND_TRIES`] times at most.

use super::{Engine, Store};
use crate::{EngineError, WorkflowError};
use apollo11_core::{
    EventId, EventKind, OverrideTarget, Payload, RunId, Seq, StepName, WorkflowSpec,
};
use apollo11_dag::Dag;
use apollo11_machine::{check_action, check_override, check_rerun, Policy, RunAction, RunState};
use apollo11_store::{NewEvent, StoreError};

/// How many times an operator's action reads the run, checks it and appends before giving
/// up with [`EngineError::Contended`]: each conflict means someone appended to the run
/// (its driver, another operator) between the read and the append.
pub const OPERATOR_APPEND_TRIES: u32 = 16;

/// The pause after the `conflicts`-th conflict in a row: 1 ms, doubling, at most 100 ms, so
/// the tries span about a second. A store may refuse an append for a seq its readers do
/// not see yet (the file log's batch between its write and its sync): trying again at once
/// would spend every try inside one sync.
fn conflict_pause_ms(conflicts: u32) -> u64 {
    (1u64 << conflicts.saturating_sub(1).min(16)).min(100)
}

/// What an operator's action is checked against: the run's state and its pinned definition,
/// grown by its expansions.
pub(super) struct Pinned<'a> {
    pub(super) state: &'a RunState,
    spec: &'a WorkflowSpec,
    pub(super) dag: &'a Dag,
    pub(super) policy: &'a Policy,
}

/// An operator's event, without what every event carries.
pub(super) struct Action {
    pub(super) step: Option<StepName>,
    pub(super) kind: EventKind,
    pub(super) attempt: u32,
    /// Its payload (a signal's data), offloaded already.
    pub(super) payload: Payload,
}

impl<S: Store> Engine<S> {
    /// Puts a step in a state by hand, recorded as a `ManualOverride` event with who and why
    /// (its id is returned); what follows is [`check_override`]'s answer.
    /// A driver working on the run picks it up at once.
    ///
    /// # Errors
    ///
    /// [`EngineError::OverrideNotAllowed`] when the run is finished (succeeded or rolled
    /// back); [`EngineError::UnknownRun`], [`EngineError::UnknownStep`], [`EngineError::BadDefinition`],
    /// [`EngineError::Contended`], [`EngineError::Store`], also when the store refuses `by`
    /// or `reason` (see [`apollo11_store::validate`]).
    pub async fn override_step(
        &self,
        run_id: &RunId,
        step: &str,
        to: OverrideTarget,
        by: &str,
        reason: &str,
    ) -> Result<EventId, EngineError> {
        self.operate(run_id, |run| {
            if !run.spec.steps.iter().any(|s| s.name == step) {
                return Err(EngineError::UnknownStep {
                    run_id: run_id.clone(),
                    step: step.to_owned(),
                });
            }
            check_override(run.state, run.dag, run.policy, step, to).map_err(|refusal| {
                EngineError::OverrideNotAllowed {
                    run_id: run_id.clone(),
                    step: step.to_owned(),
                    to: to.name(),
                    refusal,
                }
            })?;
            Ok(Action {
                step: Some(StepName::from(step)),
                kind: EventKind::ManualOverride {
                    to,
                    by: by.to_owned(),
                    reason: reason.to_owned(),
                },
                attempt: run.state.step(step).attempt,
                payload: Payload::Empty,
            })
        })
        .await
    }

    /// Pauses a run, recorded as `RunPaused` with who and why (its id is returned): it starts nothing new, its
    /// running attempts and compensations finish (and are recorded), and its status is
    /// `paused` once nothing is at work. A driver working on the run picks it up at once.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotAllowed`] when the run is finished, anomalous or already paused by
    /// an operator; [`EngineError::UnknownRun`], [`EngineError::Contended`] and store errors.
    pub async fn pause(
        &self,
        run_id: &RunId,
        by: &str,
        reason: &str,
    ) -> Result<EventId, EngineError> {
        self.act(run_id, RunAction::Pause, by, reason).await
    }

    /// Lifts an operator's pause, recorded as `RunResumed`. A driver working on the run
    /// goes on at once; a run no driver works on goes on at its next [`Engine::resume`].
    ///
    /// # Errors
    ///
    /// [`EngineError::NotAllowed`] when no operator's pause is in force (or the run is
    /// finished or anomalous); [`EngineError::UnknownRun`], [`EngineError::Contended`] and
    /// store errors.
    pub async fn unpause(
        &self,
        run_id: &RunId,
        by: &str,
        reason: &str,
    ) -> Result<EventId, EngineError> {
        self.act(run_id, RunAction::Resume, by, reason).await
    }

    /// Asks a run to roll back, recorded as `RollbackRequested`: as if a step had failed for
    /// good with `on_failure = "rollback"`, it waits for running attempts, then compensates
    /// in reverse topological order (steps that succeeded after it was asked for included),
    /// ending `rolled_back`. An operator's pause holds it: it starts at `unpause`.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotAllowed`] when the run is finished, anomalous or rolling back
    /// already; [`EngineError::UnknownRun`], [`EngineError::Contended`] and store errors.
    pub async fn request_rollback(
        &self,
        run_id: &RunId,
        by: &str,
        reason: &str,
    ) -> Result<EventId, EngineError> {
        self.act(run_id, RunAction::Rollback, by, reason).await
    }

    /// Runs `step` again (and, with `downstream`, every step that depends on it), recorded
    /// as one `RerunRequested` event with who, why and the set (its id is returned): the
    /// steps of the set that succeeded and have a compensation are compensated first, in
    /// reverse topological order, then the set runs again with fresh budgets of attempts.
    /// A run no driver works on goes on at its next [`Engine::resume`].
    ///
    /// # Errors
    ///
    /// [`EngineError::RerunNotAllowed`] when a step of the set is at work, the step has not
    /// run, the run is anomalous or rolling back (see [`check_rerun`]);
    /// [`EngineError::UnknownRun`], [`EngineError::UnknownStep`], [`EngineError::Contended`]
    /// and store errors.
    pub async fn rerun(
        &self,
        run_id: &RunId,
        step: &str,
        downstream: bool,
        by: &str,
        reason: &str,
    ) -> Result<EventId, EngineError> {
        self.operate(run_id, |run| {
            let plan = check_rerun(run.state, run.dag, run.policy, step, downstream)
                .map_err(|refusal| EngineError::rerun_refused(run_id, step, refusal))?;
            Ok(Action {
                step: None,
                kind: plan.event(by, reason),
                attempt: 0,
                payload: Payload::Empty,
            })
        })
        .await
    }

    /// A run-level action, allowed as [`check_action`] says.
    async fn act(
        &self,
        run_id: &RunId,
        action: RunAction,
        by: &str,
        reason: &str,
    ) -> Result<EventId, EngineError> {
        self.operate(run_id, |run| {
            check_action(run.state, run.dag, run.policy, action).map_err(|refusal| {
                EngineError::NotAllowed {
                    run_id: run_id.clone(),
                    action,
                    refusal,
                }
            })?;
            Ok(Action {
                step: None,
                kind: action.event(by, reason),
                attempt: 0,
                payload: Payload::Empty,
            })
        })
        .await
    }

    /// Reads the run, asks `check` for the action its state allows, and appends it at the
    /// run's next seq; on a conflict, again after [`conflict_pause_ms`], up to
    /// [`OPERATOR_APPEND_TRIES`] times. Wakes the
    /// run's driver, if this engine drives it, once the action is appended.
    pub(super) async fn operate(
        &self,
        run_id: &RunId,
        check: impl Fn(&Pinned<'_>) -> Result<Action, EngineError>,
    ) -> Result<EventId, EngineError> {
        for tried in 1..=OPERATOR_APPEND_TRIES {
            let state = self.shared.run_state(run_id).await?;
            let spec = self.pinned_spec(&state).await?;
            let store = self.shared.store.as_ref();
            let spec = crate::grown::grown_spec(store, run_id, spec, &state.expansions).await?;
            let (dag, policy) =
                Policy::compile(&spec, |_, fallback| fallback).map_err(WorkflowError::Invalid)?;
            let pinned = Pinned {
                state: &state,
                spec: &spec,
                dag: &dag,
                policy: &policy,
            };
            let action = check(&pinned)?;
            let event = NewEvent {
                step: action.step,
                kind: action.kind,
                attempt: action.attempt,
                at_ms: self.shared.clock.now_ms(),
                instance: self.shared.config.instance.clone(),
                payload: action.payload,
            };
            let next = Seq(state.last_seq.0 + 1);
            match self.shared.store.append(run_id, next, vec![event]).await {
                Err(StoreError::Conflict { .. }) => {
                    let clock = self.shared.clock;
                    if tried < OPERATOR_APPEND_TRIES {
                        clock
                            .sleep_until_ms(clock.now_ms() + conflict_pause_ms(tried))
                            .await;
                    }
                }
                appended => {
                    let ids = appended?;
                    self.shared.appended(1);
                    self.wake(run_id);
                    return Ok(ids[0]);
                }
            }
        }
        Err(EngineError::Contended {
            run_id: run_id.clone(),
            tries: OPERATOR_APPEND_TRIES,
        })
    }

    /// Tells the driver working on a run, if any, that someone else appended to it; under
    /// the lock a finishing driver takes (`Shared::finished`), so that it cannot miss it.
    fn wake(&self, run_id: &RunId) {
        let active = self.shared.active.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(notify) = active.get(run_id) {
            notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_pause_from_1_ms_doubling_to_100_ms_about_a_second_in_all() {
        let pauses: Vec<u64> = (1..OPERATOR_APPEND_TRIES).map(conflict_pause_ms).collect();
        assert_eq!(pauses[..8], [1, 2, 4, 8, 16, 32, 64, 100]);
        assert_eq!(pauses.iter().sum::<u64>(), 927);
        assert_eq!(conflict_pause_ms(u32::MAX), 100);
    }
}
