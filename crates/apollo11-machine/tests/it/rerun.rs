//! An operator's rerun: the set compensated first in reverse topological order, then run
//! again with fresh budgets; refused while a step of the set is at work.

use crate::sim::{Outcome, Sim};
use crate::spec;
use apollo11_core::{Backoff, EventKind, Idempotency as I, OnFailure, RetryPolicy, StepName};
use apollo11_machine::{fold, Refusal, RunAction, RunStatus, StepStatus};

/// `a` then `b` and `c`, then `d`; every step but `c` has a compensation.
fn diamond() -> apollo11_core::WorkflowSpec {
    spec(
        OnFailure::Pause,
        &[
            ("a", &[], I::Keyed, true),
            ("b", &["a"], I::Keyed, true),
            ("c", &["a"], I::Keyed, false),
            ("d", &["b", "c"], I::Keyed, true),
        ],
    )
}

fn names(steps: &[StepName]) -> Vec<&str> {
    steps.iter().map(StepName::as_str).collect()
}

#[test]
fn a_downstream_rerun_compensates_in_reverse_order_then_runs_the_set_again() {
    let mut s = Sim::new(&diamond(), |_, _| Outcome::Ok(10));
    assert_eq!(s.run(), RunStatus::Succeeded);
    let from = s.events.len();
    let plan = s.rerun("b", true);
    assert_eq!(names(&plan.steps), ["b", "d"]);
    assert_eq!(names(&plan.compensate), ["d", "b"]);
    assert_eq!(s.machine.status(), RunStatus::Running);
    let plan = s.machine.check_rerun("a", true).unwrap();
    assert_eq!(names(&plan.steps), ["a", "b", "c", "d"]);
    assert_eq!(s.run(), RunStatus::Succeeded);
    let after: Vec<String> = s.events[from..]
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Compensated | EventKind::Started))
        .map(|e| {
            format!(
                "{} {}#{}",
                e.kind.name(),
                e.step.as_ref().unwrap(),
                e.attempt
            )
        })
        .collect();
    assert_eq!(
        after,
        [
            "compensated d#1",
            "compensated b#1",
            "started b#2",
            "started d#2"
        ]
    );
    assert_eq!(s.state().status("a"), StepStatus::Succeeded);
    assert_eq!(s.state().step("a").attempt, 1, "a is not in the set");
}

#[test]
fn a_rerun_runs_with_a_fresh_budget_of_attempts() {
    let mut w = diamond();
    w.steps[2].retry = RetryPolicy {
        max_attempts: 2,
        backoff: Backoff::Fixed,
        initial_ms: 10,
        max_ms: 10,
        jitter_pct: 0,
        ..RetryPolicy::default()
    };
    // `c` fails each first try of a budget (attempts 1 and 3), succeeds on the second.
    let flaky = |step: &str, attempt: u32| match step {
        "c" if attempt % 2 == 1 => Outcome::Err {
            after_ms: 5,
            retryable: true,
        },
        _ => Outcome::Ok(10),
    };
    let mut s = Sim::new(&w, flaky);
    assert_eq!(s.run(), RunStatus::Succeeded);
    s.rerun("c", false);
    assert_eq!(s.state().step("c").attempts_spent(), 0);
    assert_eq!(s.run(), RunStatus::Succeeded);
    assert_eq!(s.state().step("c").attempt, 4);
}

#[test]
fn a_rerun_is_refused_while_a_step_of_its_set_is_at_work_or_has_not_run() {
    let mut s = Sim::new(&diamond(), |_, _| Outcome::Ok(10));
    s.run_until_started("b", 1);
    assert_eq!(
        s.machine.check_rerun("a", true),
        Err(Refusal::StepAtWork {
            step: "b".into(),
            status: StepStatus::Running
        })
    );
    let refused = s.machine.check_rerun("d", false).unwrap_err();
    assert_eq!(refused.code(), "not_rerunnable");
    assert_eq!(
        refused.to_string(),
        "step `d` has not run: there is nothing to run again"
    );
    assert_eq!(
        s.machine.check_rerun("zz", false).unwrap_err().code(),
        "unknown_step"
    );
    // `a` alone may run again: it waits for `b` and `c` to end, is compensated, runs.
    s.rerun("a", false);
    assert_eq!(s.run(), RunStatus::Succeeded);
    assert_eq!(s.steps_with("compensated"), ["a"]);
    assert_eq!(s.state().step("a").attempt, 2);
}

#[test]
fn a_rerun_of_a_rolled_back_run_goes_forward_and_a_pause_holds_it() {
    let mut s = Sim::new(&diamond(), |_, _| Outcome::Ok(10));
    s.run_until_started("d", 1);
    s.operator(RunAction::Rollback, "abandon");
    assert_eq!(s.run(), RunStatus::RolledBack);
    s.operator(RunAction::Pause, "hold");
    let plan = s.machine.check_rerun("a", true).unwrap();
    assert!(plan.compensate.is_empty(), "all compensated already");
    s.rerun("a", true);
    assert_eq!(s.machine.status(), RunStatus::Paused);
    assert!(s.state().rollback.is_none(), "the rollback is called off");
    s.operator(RunAction::Resume, "go");
    assert_eq!(s.run(), RunStatus::Succeeded);
    let replayed = fold(&s.state().run_id, &s.events);
    assert_eq!(&replayed, s.state(), "the fold of the log is the state");
}

#[test]
fn a_failed_step_of_class_compensate_is_compensated_before_it_reruns() {
    let w = spec(
        OnFailure::Pause,
        &[
            ("a", &[], I::Keyed, true),
            ("b", &["a"], I::Compensate, true),
        ],
    );
    let mut s = Sim::new(&w, |step, attempt| match (step, attempt) {
        ("b", 1) => Outcome::Err {
            after_ms: 5,
            retryable: false,
        },
        _ => Outcome::Ok(10),
    });
    assert_eq!(s.run(), RunStatus::Paused);
    let plan = s.rerun("b", false);
    assert_eq!(names(&plan.compensate), ["b"]);
    assert_eq!(s.run(), RunStatus::Succeeded);
    assert_eq!(s.steps_with("compensated"), ["b"]);
    assert_eq!(s.state().step("b").attempt, 2);
}
