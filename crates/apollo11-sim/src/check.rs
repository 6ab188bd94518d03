//! The invariants checked after a scenario's last generation: I1, I2, I4, I6 of
//! docs/reliability.md (I5 is checked at each open, I2 also by `verify`), I3 by the crash
//! test's own ledger check, and what a simulation can see besides: every execution had its
//! `Started` (or `Compensating`) durable first, no attempt ran twice, a `compensate` step
//! reran only after its compensation, a rollback compensated in reverse topological order,
//! the operator actions' promises (docs/operator-actions.md: nothing after a run's end,
//! nothing started after an accepted rollback but a failure's handlers, nothing under an
//! operator's pause, an accepted rollback ends `rolled_back`), the inspector's state at
//! sampled events equals a fold of the events up to them; and of what authors write: a step
//! starts, first or again, only as its trigger rule lets it, a skipped step never starts
//! after its skip (never at all if skipped from pending), a template
//! expanded once in a run whatever crashed, its items checked as any step of their class.

#[path = "../../apollo11-runtime/examples/crash_child/ledger.rs"]
mod ledger;

use crate::scenario::{Scenario, StepPlan, WaitPlan};
use crate::steps::Execution;
use crate::store::{Ack, Recorded};
use apollo11_core::{Event, EventKind, Idempotency, RunId, TriggerRule, WorkflowSpec};
use apollo11_machine::{NodeId, RunMachine, RunState, RunStatus, StepStatus};
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
        let skipped = (status.steps.iter())
            .filter(|s| s.state == StepStatus::Skipped)
            .map(|s| s.name.as_str())
            .collect();
        expanded_once(played, run, events, status.state, &skipped)?;
        if !matches!(status.state, RunStatus::Succeeded | RunStatus::RolledBack) {
            return Err(format!(
                "I4: {} ended {}",
                run.as_str(),
                status.state.name()
            ));
        }
        let grown = (inspector.grown_definition(run, None).await).map_err(|e| e.to_string())?;
        Fold::new(played.scenario, &grown)
            .walk(run, events, inspector)
            .await?;
        no_rerun_after_success(played, run, events)?;
        skipped_never_ran(played, run, events)?;
        timers_never_early(played, run, events)?;
    }
    Ok(())
}

/// A waiting step's timer ends its attempt no sooner than its time after the attempt's
/// `Started`, whatever crashed in between (a restarted engine keeps the instant).
fn timers_never_early(played: &Played<'_>, run: &RunId, events: &[&Event]) -> Result<(), String> {
    for plan in &played.scenario.steps {
        let Some(WaitPlan::Timer { ms }) = plan.wait else {
            continue;
        };
        let of = |e: &&&Event| e.step.as_ref().is_some_and(|s| s.as_str() == plan.name);
        for fired in (events.iter().filter(of)).filter(|e| matches!(e.kind, EventKind::Succeeded)) {
            let started = (events.iter().filter(of))
                .find(|e| e.attempt == fired.attempt && matches!(e.kind, EventKind::Started));
            if started.is_some_and(|s| fired.at_ms < s.at_ms + ms) {
                return Err(format!(
                    "{}/{} attempt {}: its {ms} ms timer fired early",
                    run.as_str(),
                    plan.name,
                    fired.attempt
                ));
            }
        }
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

/// I3 by the crash test's own check, on each step but a waiting one whose final state a
/// `Succeeded` event set.
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
    let waits =
        |step: &str| (played.scenario.steps.iter()).any(|p| p.name == step && p.wait.is_some());
    // A waiting step's success is its signal or its timer: nothing of it executes.
    for (step, e) in last.into_iter().filter(|(step, _)| !waits(step)) {
        if matches!(e.kind, EventKind::Succeeded) {
            let key = (run.as_str().to_owned(), step.to_owned());
            let attempts = ran.get(&key).map_or(&[][..], Vec::as_slice);
            ledger::check_step(run.as_str(), step, e.attempt, attempts)?;
        }
    }
    Ok(())
}

/// A step skipped (its condition false, its trigger rule impossible), never overridden and
/// never in an operator's rerun after the skip, runs no attempt after the skip: none at all
/// when it was skipped from pending (no `Started` of it in the log, no execution of it in
/// the ledger), none beyond the attempt it was skipped at when its rule stopped holding
/// after a failed attempt.
fn skipped_never_ran(played: &Played<'_>, run: &RunId, events: &[&Event]) -> Result<(), String> {
    let of = |step: &str, f: &dyn Fn(&Event) -> bool| {
        (events.iter()).any(|e| e.step.as_ref().is_some_and(|s| s.as_str() == step) && f(e))
    };
    let rerun_after = |step: &str, skip: &Event| {
        (events.iter()).any(|e| match &e.kind {
            EventKind::RerunRequested { steps, .. } => {
                e.seq > skip.seq && steps.iter().any(|s| s == step)
            }
            _ => false,
        })
    };
    let skipped = (events.iter()).filter(|e| matches!(e.kind, EventKind::Skipped { .. }));
    for skip in skipped {
        let Some(step) = skip.step.as_ref().map(|s| s.as_str()) else {
            continue;
        };
        let at = skip.attempt;
        let overridden = of(step, &|e| {
            matches!(e.kind, EventKind::ManualOverride { .. })
        });
        if overridden || rerun_after(step, skip) {
            continue;
        }
        // Skipped from pending, nothing of it ran, not even a compensation.
        let ran = (played.executions.iter())
            .any(|x| x.run == run.as_str() && x.step == step && (x.attempt > at || at == 0));
        let started = of(step, &|e| {
            matches!(e.kind, EventKind::Started) && e.attempt > at
        });
        if ran || started {
            return Err(format!(
                "{}/{step}: skipped at attempt {at}, and started after (in the log: {started}, in the ledger: {ran})",
                run.as_str(),
            ));
        }
    }
    Ok(())
}

/// A template expands at most once in a run, across every crash and resume, and exactly
/// once in a run that succeeded without skipping it; its own code never runs (its items
/// run it).
fn expanded_once(
    played: &Played<'_>,
    run: &RunId,
    events: &[&Event],
    status: RunStatus,
    skipped: &BTreeSet<&str>,
) -> Result<(), String> {
    let templates = played
        .scenario
        .steps
        .iter()
        .filter(|p| p.template.is_some());
    for name in templates.map(|p| p.name.as_str()) {
        let expanded = (events.iter())
            .filter(|e| e.step.as_ref().is_some_and(|s| s.as_str() == name))
            .filter(|e| matches!(e.kind, EventKind::Expanded { .. }))
            .count();
        let overridden = (events.iter()).any(|e| {
            e.step.as_ref().is_some_and(|s| s.as_str() == name)
                && matches!(e.kind, EventKind::ManualOverride { .. })
        });
        let unfinished = skipped.contains(name) || overridden || status != RunStatus::Succeeded;
        if expanded > 1 || (expanded == 0 && !unfinished) {
            return Err(format!(
                "{}/{name}: a template expanded {expanded} times (the run {status})",
                run.as_str()
            ));
        }
        if (played.executions.iter()).any(|x| x.run == run.as_str() && x.step == name) {
            return Err(format!(
                "{}/{name}: the template's own code ran",
                run.as_str()
            ));
        }
    }
    Ok(())
}

/// A run's events folded one by one, with what must hold before each. Steps are named as
/// the run's grown definition names them: a template's items run its plan.
struct Fold<'s> {
    scenario: &'s Scenario,
    /// Each step's plan (by index), items included.
    plans: BTreeMap<String, usize>,
    /// Steps downstream of each step (transitively).
    downstream: BTreeMap<String, BTreeSet<String>>,
}

impl<'s> Fold<'s> {
    /// The fold of a run whose definition, grown by every expansion, is `grown`.
    fn new(scenario: &'s Scenario, grown: &WorkflowSpec) -> Fold<'s> {
        let plans = (grown.steps.iter())
            .filter_map(|s| {
                let declaration = s.origin.as_ref().map_or(&s.name, |o| &o.declaration);
                let i = scenario.steps.iter().position(|p| p.name == *declaration)?;
                Some((s.name.clone(), i))
            })
            .collect();
        let mut downstream: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for s in grown.steps.iter().rev() {
            let below = downstream.get(&s.name).cloned().unwrap_or_default();
            for d in &s.depends_on {
                let entry = downstream.entry(d.clone()).or_default();
                entry.insert(s.name.clone());
                entry.extend(below.iter().cloned());
            }
        }
        Fold {
            scenario,
            plans,
            downstream,
        }
    }

    fn plan(&self, step: &str) -> Option<&StepPlan> {
        self.plans.get(step).map(|&i| &self.scenario.steps[i])
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
            self.before(&machine, e)?;
            promised(&machine, e)?;
            machine.apply(e);
            if let EventKind::Expanded { .. } = e.kind {
                let grown = inspector.grown_definition(run, Some(e.event_id)).await;
                let grown = grown.map_err(|x| x.to_string())?;
                (machine.regraph(&grown, |_, f| f))
                    .map_err(|x| format!("{}: {x}", run.as_str()))?;
            }
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

    fn before(&self, machine: &RunMachine, e: &Event) -> Result<(), String> {
        let state = machine.state();
        let Some(step) = &e.step else { return Ok(()) };
        let Some(plan) = self.plan(step.as_str()) else {
            return Err(format!(
                "{}: event #{} names unknown step {step}",
                state.run_id.as_str(),
                e.event_id.0
            ));
        };
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
            // Every start, a rerun after a failure or a compensation too, is the rule's.
            EventKind::Started => {
                trigger_holds(machine, step.as_str()).map_err(|why| format!("{}: {why}", at()))?
            }
            EventKind::Compensating if state.rollback.is_some() => {
                let below = self.downstream.get(step.as_str()).into_iter().flatten();
                if let Some(d) = below.into_iter().find(|d| self.needs_undo(state, d)) {
                    return Err(format!("{}: compensated while {d}, downstream, is {:?} (not reverse topological order)", at(), state.step(d).status));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether step `d` is at work or still to be undone by a rollback. A template that
    /// expanded has nothing of its own to undo: its items are undone, each checked here.
    fn needs_undo(&self, state: &RunState, d: &str) -> bool {
        let Some(plan) = self.plan(d) else {
            return false;
        };
        let expanded = state.expansions.iter().any(|e| e.step.as_str() == d);
        match state.step(d).status {
            StepStatus::Running | StepStatus::Compensating | StepStatus::CompensationFailed => true,
            StepStatus::Succeeded | StepStatus::Failed if expanded => false,
            StepStatus::Succeeded => plan.compensation_failures.is_some(),
            StepStatus::Failed => plan.class == Idempotency::Compensate,
            _ => false,
        }
    }
}

/// A step starts, first or again, only as its trigger rule lets it: `all_succeeded` after
/// every dependency succeeded or was skipped (never after one failed), `one_failed` while
/// one has failed.
fn trigger_holds(machine: &RunMachine, step: &str) -> Result<(), String> {
    let Some(node) = machine.dag().node(step) else {
        return Err("starts, and the run's graph has no such step".to_owned());
    };
    let deps = machine.dag().dependencies(node);
    let status = |d: &NodeId| machine.state().step(machine.dag().name(*d)).status;
    match machine.policy().step(node).trigger {
        TriggerRule::AllSucceeded => {
            match deps.iter().find(|d| !status(d).satisfies_dependents()) {
                Some(d) => Err(format!(
                    "all_succeeded, started while its dependency {} is {:?}",
                    machine.dag().name(*d),
                    status(d)
                )),
                None => Ok(()),
            }
        }
        TriggerRule::OneFailed if !deps.iter().any(|d| status(d) == StepStatus::Failed) => {
            Err("one_failed, started while no dependency has failed".to_owned())
        }
        TriggerRule::OneFailed | TriggerRule::AllDone => Ok(()),
    }
}

/// What docs/operator-actions.md promises of the run before event `e`: a finished run takes
/// no more events but an operator's rerun, nothing starts once a rollback is accepted, and
/// neither a step nor a compensation starts under an operator's pause.
fn promised(machine: &RunMachine, e: &Event) -> Result<(), String> {
    let state = machine.state();
    let status = machine.status();
    let rerun = matches!(e.kind, EventKind::RerunRequested { .. });
    let broken = if status.is_finished() && !rerun {
        format!("follows the end of the run ({status})")
    } else {
        match e.kind {
            EventKind::Started if state.rollback.is_some() && !handling(machine, e) => {
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

/// Whether `e` starts a handler (`all_done`, `one_failed`) while a step of the run has
/// failed: handlers run at a failure, before a rollback's compensations.
fn handling(machine: &RunMachine, e: &Event) -> bool {
    let node = e.step.as_ref().and_then(|s| machine.dag().node(s.as_str()));
    let handler =
        node.is_some_and(|n| machine.policy().step(n).trigger != TriggerRule::AllSucceeded);
    let failed = (machine.state().steps.values()).any(|s| s.status == StepStatus::Failed);
    handler && failed
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

#[cfg(test)]
mod tests {
    use super::*;
    use apollo11_core::Payload;
    use apollo11_machine::History;

    /// Seed 3's scenario with step `s1` a template over `s0`'s list.
    fn scenario() -> Scenario {
        let mut scenario = Scenario::generate(3).truncated(crate::Size {
            steps: 2,
            actions: 0,
            crashes: 0,
            faults: 0,
        });
        scenario.steps[1].depends_on = vec![0];
        scenario.steps[1].template = Some(0);
        scenario
    }

    fn played<'a>(scenario: &'a Scenario, events: &'a [Event]) -> Played<'a> {
        Played {
            scenario,
            events,
            acks: Vec::new(),
            executions: Vec::new(),
        }
    }

    fn expansions(h: History) -> Result<(), String> {
        let scenario = scenario();
        let events = h.into_events();
        let refs: Vec<&Event> = events.iter().collect();
        let run = RunId::from("run-0");
        let none = BTreeSet::new();
        let played = played(&scenario, &events);
        expanded_once(&played, &run, &refs, RunStatus::Succeeded, &none)
    }

    fn started() -> History {
        History::new("run-0")
            .created("sim", Payload::Empty)
            .started("s0")
            .succeeded("s0", r#"["i0"]"#)
            .started("s1")
    }

    #[test]
    fn a_template_expanded_twice_or_never_in_a_run_that_succeeded_is_caught() {
        assert_eq!(expansions(started().expanded("s1", &["i0"])), Ok(()));
        let twice = started().expanded("s1", &["i0"]).expanded("s1", &["i0"]);
        let err = expansions(twice).unwrap_err();
        assert!(err.contains("expanded 2 times"), "{err}");
        let never = History::new("run-0").created("sim", Payload::Empty);
        assert!(expansions(never).unwrap_err().contains("expanded 0 times"));
    }

    #[test]
    fn a_skipped_step_that_started_is_caught_unless_an_operator_overrode_it() {
        let scenario = scenario();
        let run = RunId::from("run-0");
        let h = History::new("run-0")
            .created("sim", Payload::Empty)
            .skipped("s0", "condition false")
            .started("s0");
        let events = h.clone().into_events();
        let refs: Vec<&Event> = events.iter().collect();
        let err = skipped_never_ran(&played(&scenario, &events), &run, &refs).unwrap_err();
        assert!(err.contains("skipped at attempt 0, and started"), "{err}");
        let to = apollo11_core::OverrideTarget::Pending;
        let events = h.overridden("s0", to, "op", "run it").into_events();
        let refs: Vec<&Event> = events.iter().collect();
        assert_eq!(
            skipped_never_ran(&played(&scenario, &events), &run, &refs),
            Ok(())
        );
    }

    #[test]
    fn a_step_skipped_after_a_failed_attempt_that_starts_again_is_caught() {
        let scenario = scenario();
        let run = RunId::from("run-0");
        let h = History::new("run-0")
            .created("sim", Payload::Empty)
            .started("s0")
            .failed("s0", "boom", true)
            .skipped("s0", "trigger rule `one_failed`: no dependency failed");
        let check = |h: History| {
            let events = h.into_events();
            let refs: Vec<&Event> = events.iter().collect();
            skipped_never_ran(&played(&scenario, &events), &run, &refs)
        };
        assert_eq!(
            check(h.clone()),
            Ok(()),
            "its attempt before the skip is no fault"
        );
        let err = check(h.clone().started("s0")).unwrap_err();
        assert!(
            err.contains("skipped at attempt 1, and started after"),
            "{err}"
        );
        let rerun = EventKind::RerunRequested {
            steps: vec!["s0".to_owned()],
            compensate: Vec::new(),
            by: "operator".to_owned(),
            reason: "again".to_owned(),
        };
        let rerun = h.raw(None, rerun, 0, Payload::Empty).started("s0");
        assert_eq!(
            check(rerun),
            Ok(()),
            "a rerun lets a skipped step run again"
        );
    }
}
