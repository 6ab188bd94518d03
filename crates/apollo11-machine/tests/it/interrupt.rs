//! Tries an engine left unfinished: `Interrupted` spends no attempt and no compensation
//! try, and a step interrupted `INTERRUPTIONS_MAX` times in a row pauses its run.

use crate::decide::decide_at;
use crate::sim::{Outcome, Sim};
use crate::{pinned, spec};
use apollo11_core::{
    EventKind, Idempotency as I, OnFailure, OverrideTarget, StepName, WorkflowSpec,
};
use apollo11_machine::{
    fold, pause_cause, Command, FailReason, History, PauseCause, Policy, RunAction, RunStatus,
    INTERRUPTIONS_MAX,
};

/// Run `r` of `w`: `a` succeeded, `b` started.
fn b_started(w: &WorkflowSpec) -> History {
    History::new("r")
        .created("test", pinned(w))
        .started("a")
        .succeeded("a", "A")
        .started("b")
}

/// `steps` under `on_failure = "rollback"`, each allowed one attempt.
fn one_attempt(steps: &[(&str, &[&str], I, bool)]) -> WorkflowSpec {
    let mut w = spec(OnFailure::Rollback, steps);
    for s in &mut w.steps {
        s.retry.max_attempts = 1;
    }
    w
}

fn chain() -> WorkflowSpec {
    one_attempt(&[
        ("a", &[], I::Keyed, true),
        ("b", &["a"], I::Keyed, true),
        ("c", &["b"], I::Keyed, false),
    ])
}

fn interrupted(step: &str, attempt: u32) -> Command {
    Command::Fail {
        step: StepName::from(step),
        attempt,
        reason: FailReason::Interrupted,
    }
}

/// Runs `sim` until `step` starts `attempt`, then kills the scheduler and records the
/// interruption `decide` asks for.
fn kill_during(sim: &mut Sim, step: &str, attempt: u32) {
    sim.run_until_started(step, attempt);
    sim.crash();
    let commands = sim.decide();
    assert_eq!(commands, [interrupted(step, attempt)]);
    assert_eq!(
        commands[0].event().map(|(_, kind, _)| kind),
        Some(EventKind::Interrupted)
    );
    assert!(sim.round().is_none());
}

#[test]
fn an_interrupted_attempt_of_a_one_attempt_step_is_run_again_not_rolled_back() {
    let mut sim = Sim::new(&chain(), |_, _| Outcome::Ok(10));
    kill_during(&mut sim, "b", 1);
    let b = sim.state().step("b");
    assert_eq!((b.attempt, b.interrupted, b.attempts_spent()), (1, 1, 0));
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(sim.summary(), "a=succeeded#1 b=succeeded#2 c=succeeded#1");
    assert_eq!(sim.compensations, 0, "nothing was undone");
}

#[test]
fn a_log_that_recorded_an_interruption_as_a_failure_still_spends_the_attempt() {
    // Written before `Interrupted` existed: the failure counts, the run rolls back as then.
    let w = chain();
    let h = b_started(&w).failed("b", "interrupted", true);
    assert_eq!(
        decide_at(&w, &h, 60_000, &[]),
        [Command::Compensate {
            step: StepName::from("a"),
            attempt: 1
        }]
    );
}

#[test]
fn a_compensate_step_interrupted_is_compensated_then_run_again_within_one_attempt() {
    let w = one_attempt(&[
        ("charge", &[], I::Compensate, true),
        ("ship", &["charge"], I::Keyed, false),
    ]);
    let mut sim = Sim::new(&w, |_, _| Outcome::Ok(10));
    kill_during(&mut sim, "charge", 1);
    assert_eq!(
        sim.decide(),
        [Command::Compensate {
            step: StepName::from("charge"),
            attempt: 1
        }],
        "compensated first, as its class says"
    );
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(sim.summary(), "charge=succeeded#2 ship=succeeded#1");
    assert_eq!(sim.steps_with("compensated"), ["charge"]);
}

#[test]
fn an_interrupted_compensation_try_spends_no_try() {
    let w = chain();
    let h = b_started(&w)
        .failed("b", "no", false)
        .compensating("a")
        .interrupted("a");
    let state = fold(h.run_id(), h.events());
    assert_eq!(state.step("a").compensation_tries, 0);
    let (dag, policy) = Policy::compile(&w, |_, f| f).unwrap();
    assert_eq!(pause_cause(&state, &dag, &policy), None, "not out of tries");
    let due = h.events().last().unwrap().at_ms + 1_000;
    assert_eq!(
        decide_at(&w, &h, due, &[]),
        [Command::Compensate {
            step: StepName::from("a"),
            attempt: 1
        }]
    );
    let h = h.compensating("a").compensated("a");
    assert_eq!(fold(h.run_id(), h.events()).step("a").compensation_tries, 0);
    assert_eq!(
        decide_at(&w, &h, due, &[]),
        [Command::Finish {
            status: RunStatus::RolledBack
        }]
    );
}

#[test]
fn a_step_interrupted_three_times_in_a_row_pauses_the_run_until_a_person_resumes_it() {
    let mut sim = Sim::new(&chain(), |_, _| Outcome::Ok(10));
    for attempt in 1..=INTERRUPTIONS_MAX {
        kill_during(&mut sim, "b", attempt);
    }
    let Some(Command::Pause { step, reason }) = sim.decide().first().cloned() else {
        panic!("{:?}", sim.decide());
    };
    assert_eq!(step.as_str(), "b");
    assert!(
        reason.contains("step `b`") && reason.contains("3 times in a row"),
        "{reason}"
    );
    assert_eq!(sim.run(), RunStatus::Paused);
    let cause = pause_cause(sim.state(), sim.dag(), sim.policy());
    assert_eq!(
        cause,
        Some(PauseCause::Operator {
            by: "engine".into(),
            reason
        })
    );
    assert_eq!(sim.compensations, 0, "nothing was undone");
    sim.operator(RunAction::Resume, "the disk is fixed");
    assert_eq!(sim.state().step("b").interrupted_in_a_row, 0);
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(sim.summary(), "a=succeeded#1 b=succeeded#4 c=succeeded#1");
}

#[test]
fn interruptions_in_a_row_start_again_after_a_try_that_ends_otherwise() {
    let w = chain();
    let twice = |h: History| {
        h.started("b")
            .interrupted("b")
            .started("b")
            .interrupted("b")
    };
    let h = b_started(&w).interrupted("b").started("b").interrupted("b");
    let in_a_row = |h: &History| fold(h.run_id(), h.events()).step("b").interrupted_in_a_row;
    assert_eq!(in_a_row(&h), 2);
    let failed = twice(h.clone().started("b").failed("b", "flaky", true));
    assert_eq!(in_a_row(&failed), 2, "the failure ended the row");
    let overridden = h
        .clone()
        .overridden("b", OverrideTarget::Pending, "op", "retry");
    assert_eq!(in_a_row(&overridden), 0);
    let asked = h.clone().rollback_requested("op", "undo");
    assert_eq!(in_a_row(&asked), 0);
    let third = h.started("b").interrupted("b");
    assert_eq!(in_a_row(&third), 3);
    let state = fold(third.run_id(), third.events());
    assert_eq!(
        (state.step("b").attempt, state.step("b").attempts_spent()),
        (3, 0)
    );
}

#[test]
fn an_operator_pause_in_force_is_kept_rather_than_paused_again() {
    let w = chain();
    let h = b_started(&w)
        .interrupted("b")
        .started("b")
        .interrupted("b")
        .started("b")
        .paused("alice", "maintenance")
        .interrupted("b");
    assert_eq!(
        decide_at(&w, &h, 60_000, &[]),
        [Command::Finish {
            status: RunStatus::Paused
        }]
    );
}
