//! The invariants checked after a scenario's last generation: I1, I2, I4, I6 of
//! docs/reliability.md (I5 is checked at each open, I2 also by `verify`), I3 by the crash
//! test's own ledger check, and what a simulation can see besides: every execution had its
//! `Started` (or `Compensating`) durable first, no attempt ran twice, a `compensate` step
//! reran only after its compensation, a rollback compensated in reverse topological order,
//! the operator actions' promises (docs/operator-actions.md: nothing after a run's end,
//! nothing started after an accepted rollback or under an operator's pause, an accepted
//! rollback ends `rolled_back`), and the inspector's state at sampled events equals a fold
//! of the events up to them.

#[path = "../../apollo11-runtime/examples/crash_child/ledger.rs"]
mod ledger;

use crate::scenario::Scenario;
use crate::steps::Execution;
use crate::store::{Ack, Recorded};
use apollo11_core::{Event, EventKind, Idempotency, RunId};
use apollo11_machine::{RunMachine, RunState, RunStatus, StepStatus};
use apollo11_runtime::{Inspector, Store};
use std::collections::{BTreeMap, BTreeSet};

/// What a scenario left: its final log, the appends acknowledged and the steps' executions.
pub struct Played<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
    /// The final log, in id order.
    pub events: &'a [Event],
    /// Every acknowledged append.
    pub acks: Vec<Ack>,
    /// Every execution of a step or compensation.
    pub executions: Vec<Execution>,
}

/// Checks every invariant, the first violation named.
///
/// # Errors
///
/// The violation, naming the invariant, run, step and attempt.
pub async fn check<S>(played: &Played<'_>, inspector: &Inspector<Recorded<S>>) -> Result<(), String>
where
    Recorded<S>: Store,
{
    ids_increase(played.events)?;
    let runs = by_run(played.events);
    seqs_dense(&runs)?;
    acknowledged_survive(&runs, &played.acks)?;
    executions_recorded(&runs, &played.executions)?;
    no_attempt_twice(&played.executions)?;
    for (run, events) in &runs {
        let status = inspector
            .status(run, None)
            .await
            .map_err(|e| e.to_string())?;
        if !matches!(status.state, RunStatus::Succeeded | RunStatus::RolledBack) {
            return Err(format!(
                "I4: {} ended {}",
                run.as_str(),
                status.state.name()
            ));
        }
        Fold::new(played.scenario)
            .walk(run, events, inspector)
            .await?;
        no_rerun_after_success(played, run, events)?;
    }
    Ok(())
}

fn by_run(events: &[Event]) -> BTreeMap<RunId, Vec<&Event>> {
    let mut runs: BTreeMap<RunId, Vec<&Event>> = BTreeMap::new();
    for e in events {
        runs.entry(e.run_id.clone()).or_default().push(e);
    }
    runs
}

fn ids_increase(events: &[Event]) -> Result<(), String> {
    match events.windows(2).find(|w| w[0].event_id >= w[1].event_id) {
        Some(w) => Err(format!(
            "I6: event #{} follows #{}",
            w[1].event_id.0, w[0].event_id.0
        )),
        None => Ok(()),
    }
}

fn seqs_dense(runs: &BTreeMap<RunId, Vec<&Event>>) -> Result<(), String> {
    for (run, events) in runs {
        if let Some((i, e)) = (events.iter().enumerate()).find(|(i, e)| e.seq.0 != *i as u32 + 1) {
            return Err(format!(
                "I2: {} holds seq {} at position {}",
                run.as_str(),
                e.seq.0,
                i + 1
            ));
        }
    }
    Ok(())
}

fn acknowledged_survive(runs: &BTreeMap<RunId, Vec<&Event>>, acks: &[Ack]) -> Result<(), String> {
    for ack in acks {
        let events = runs.get(&ack.run).map_or(&[][..], Vec::as_slice);
        for (i, kind) in ack.kinds.iter().enumerate() {
            let seq = ack.seq.0 + i as u32;
            let found = events.get(seq as usize - 1).map(|e| e.kind.name());
            if found != Some(*kind) {
                return Err(format!(
                    "I1: acknowledged {} seq {seq} ({kind}) is {found:?} in the log",
                    ack.run.as_str()
                ));
            }
        }
    }
    Ok(())
}

/// A step runs only once its `Started` is durable, a compensation once its `Compensating`
/// is: every execution's event is in the final log.
fn executions_recorded(
    runs: &BTreeMap<RunId, Vec<&Event>>,
    executions: &[Execution],
) -> Result<(), String> {
    for x in executions {
        let events = runs
            .get(&RunId::from(x.run.as_str()))
            .map_or(&[][..], Vec::as_slice);
        let recorded = events.iter().any(|e| {
            e.step.as_ref().is_some_and(|s| s.as_str() == x.step)
                && e.attempt == x.attempt
                && if x.compensation {
                    matches!(e.kind, EventKind::Compensating)
                } else {
                    matches!(e.kind, EventKind::Started)
                }
        });
        if !recorded {
            return Err(format!(
                "{}/{} attempt {} ran ({}) without its event in the log",
                x.run,
                x.step,
                x.attempt,
                if x.compensation {
                    "compensation"
                } else {
                    "step"
                }
            ));
        }
    }
    Ok(())
}

/// Each attempt number names one execution: a rerun is a new attempt.
fn no_attempt_twice(executions: &[Execution]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for x in executions.iter().filter(|x| !x.compensation) {
        if !seen.insert((&x.run, &x.step, x.attempt)) {
            return Err(format!(
                "I3: {}/{} attempt {} ran twice",
                x.run, x.step, x.attempt
            ));
        }
    }
    Ok(())
}

/// I3 by the crash test's own check, on each step whose final state a `Succeeded` event set.
fn no_rerun_after_success(
    played: &Played<'_>,
    run: &RunId,
    events: &[&Event],
) -> Result<(), String> {
    let text: String = (played.executions.iter())
        .filter(|x| !x.compensation && x.run == run.as_str())
        .map(|x| format!("{} {} {} 0\n", x.run, x.step, x.attempt))
        .collect();
    let ran = ledger::executions(&text)?;
    let mut last: BTreeMap<&str, &Event> = BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| !matches!(e.kind, EventKind::Placed { .. }))
    {
        if let Some(step) = &e.step {
            last.insert(step.as_str(), e);
        }
    }
    for (step, e) in last {
        if matches!(e.kind, EventKind::Succeeded) {
            let key = (run.as_str().to_owned(), step.to_owned());
            let attempts = ran.get(&key).map_or(&[][..], Vec::as_slice);
            ledger::check_step(run.as_str(), step, e.attempt, attempts)?;
        }
    }
    Ok(())
}

/// A run's events folded one by one, with what must hold before each.
struct Fold<'s> {
    scenario: &'s Scenario,
    /// Steps downstream of each step (transitively).
    downstream: Vec<BTreeSet<usize>>,
}

impl<'s> Fold<'s> {
    fn new(scenario: &'s Scenario) -> Fold<'s> {
        let mut downstream = vec![BTreeSet::new(); scenario.steps.len()];
        for j in (0..scenario.steps.len()).rev() {
            for &d in &scenario.steps[j].depends_on {
                let below = downstream[j].clone();
                downstream[d].insert(j);
                downstream[d].extend(below);
            }
        }
        Fold {
            scenario,
            downstream,
        }
    }

    async fn walk<S>(
        &self,
        run: &RunId,
        events: &[&Event],
        inspector: &Inspector<Recorded<S>>,
    ) -> Result<(), String>
    where
        Recorded<S>: Store,
    {
        let spec = (inspector.definition(run).await).map_err(|e| e.to_string())?;
        let mut machine = RunMachine::compile(&spec, RunState::new(run.clone()), |_, f| f)
            .map_err(|e| format!("{}: {e}", run.as_str()))?;
        for (i, e) in events.iter().enumerate() {
            self.before(machine.state(), e)?;
            promised(&machine, e)?;
            machine.apply(e);
            let sampled =
                (i as u64 + self.scenario.seed).is_multiple_of(8) || i + 1 == events.len();
            if sampled {
                same_state(machine.state(), e, inspector).await?;
            }
        }
        let status = machine.status();
        if machine.state().rollback.is_some() && status != RunStatus::RolledBack {
            return Err(format!(
                "{}: a rollback was accepted, and the run ended {status}",
                run.as_str()
            ));
        }
        Ok(())
    }

    fn before(&self, state: &RunState, e: &Event) -> Result<(), String> {
        let Some(step) = &e.step else { return Ok(()) };
        let Some(i) = self
            .scenario
            .steps
            .iter()
            .position(|s| s.name == step.as_str())
        else {
            return Err(format!(
                "{}: event #{} names unknown step {step}",
                state.run_id.as_str(),
                e.event_id.0
            ));
        };
        let plan = &self.scenario.steps[i];
        let status = state.step(step.as_str()).status;
        let at = || format!("{}/{step} (event #{})", state.run_id.as_str(), e.event_id.0);
        match e.kind {
            EventKind::Started
                if plan.class == Idempotency::Compensate
                    && e.attempt > 1
                    && !matches!(status, StepStatus::Compensated | StepStatus::Pending) =>
            {
                return Err(format!(
                    "{}: a `compensate` step rerun (attempt {}) from {status:?}, before its compensation",
                    at(),
                    e.attempt
                ));
            }
            EventKind::Compensating if state.rollback.is_some() => {
                if let Some(d) = self.downstream[i]
                    .iter()
                    .find(|&&d| self.needs_undo(state, d))
                {
                    let name = &self.scenario.steps[*d].name;
                    return Err(format!("{}: compensated while {name}, downstream, is {:?} (not reverse topological order)", at(), state.step(name).status));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether step `d` is at work or still to be undone by a rollback.
    fn needs_undo(&self, state: &RunState, d: usize) -> bool {
        let plan = &self.scenario.steps[d];
        match state.step(&plan.name).status {
            StepStatus::Running | StepStatus::Compensating | StepStatus::CompensationFailed => true,
            StepStatus::Succeeded => plan.compensation_failures.is_some(),
            StepStatus::Failed => plan.class == Idempotency::Compensate,
            _ => false,
        }
    }
}

/// What docs/operator-actions.md promises of the run before event `e`: a finished run takes
/// no more events, nothing starts once a rollback is accepted, and neither a step nor a
/// compensation starts under an operator's pause.
fn promised(machine: &RunMachine, e: &Event) -> Result<(), String> {
    let state = machine.state();
    let status = machine.status();
    let broken = if status.is_finished() {
        format!("follows the end of the run ({status})")
    } else {
        match e.kind {
            EventKind::Started if state.rollback.is_some() => {
                "starts a step after a rollback was accepted".to_owned()
            }
            EventKind::Started | EventKind::Compensating if state.paused.is_some() => {
                "starts work under an operator's pause".to_owned()
            }
            _ => return Ok(()),
        }
    };
    Err(format!(
        "{}: event #{} ({}) {broken}",
        state.run_id.as_str(),
        e.event_id.0,
        e.kind.name()
    ))
}

/// The inspector's view of the run at event `e` equals the fold up to it.
async fn same_state<S>(
    state: &RunState,
    e: &Event,
    inspector: &Inspector<Recorded<S>>,
) -> Result<(), String>
where
    Recorded<S>: Store,
{
    let view = (inspector.status(&e.run_id, Some(e.event_id)).await).map_err(|x| x.to_string())?;
    for step in &view.steps {
        let folded = state.step(&step.name);
        if (step.state, step.attempt) != (folded.status, folded.attempt) {
            return Err(format!(
                "{}/{} at event #{}: the inspector says {:?} attempt {}, the fold {:?} attempt {}",
                e.run_id.as_str(),
                step.name,
                e.event_id.0,
                step.state,
                step.attempt,
                folded.status,
                folded.attempt
            ));
        }
    }
    Ok(())
}
