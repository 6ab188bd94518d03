//! Trigger rules: handlers (`all_done`, `one_failed`) of a failure run before the run
//! pauses or rolls back, a rule that can never hold skips its step, and a skipped step
//! counts as a success for its dependents.

use crate::sim::{failing, Outcome, Sim};
use crate::spec;
use apollo11_core::{
    EventKind, Idempotency as I, OnFailure, OverrideTarget, StepName, TriggerRule, WorkflowSpec,
};
use apollo11_machine::{PauseCause, RunAction, RunStatus, StepStatus};

/// `spec` with the trigger rule of each named step set.
fn with_triggers(mut w: WorkflowSpec, triggers: &[(&str, TriggerRule)]) -> WorkflowSpec {
    for (name, trigger) in triggers {
        let step = w.steps.iter_mut().find(|s| s.name == *name).unwrap();
        step.trigger = *trigger;
    }
    w
}

/// a → {b, c} → d, and `notify` (one_failed) after b and c.
fn diamond_with_notify(on_failure: OnFailure) -> WorkflowSpec {
    let w = spec(
        on_failure,
        &[
            ("a", &[], I::Natural, true),
            ("b", &["a"], I::Natural, true),
            ("c", &["a"], I::Natural, true),
            ("d", &["b", "c"], I::Natural, true),
            ("notify", &["b", "c"], I::Natural, true),
        ],
    );
    with_triggers(w, &[("notify", TriggerRule::OneFailed)])
}

/// The reason of the `Skipped` event of `step`, if it has one.
fn skip_reason(sim: &Sim, step: &str) -> Option<String> {
    sim.events.iter().find_map(|e| match &e.kind {
        EventKind::Skipped { reason } if e.step == Some(StepName::from(step)) => {
            Some(reason.clone())
        }
        _ => None,
    })
}

/// Seqs of the events of `kind` naming `step`.
fn seqs(sim: &Sim, step: &str, kind: &str) -> Vec<u32> {
    sim.events
        .iter()
        .filter(|e| e.kind.name() == kind && e.step == Some(StepName::from(step)))
        .map(|e| e.seq.0)
        .collect()
}

#[test]
fn a_one_failed_step_runs_when_a_branch_fails_for_good_then_the_run_pauses() {
    let w = diamond_with_notify(OnFailure::Pause);
    // c takes longer than b's failure: it finishes (running work does), then notify runs.
    let mut sim = Sim::new(&w, |step, _| match step {
        "b" => Outcome::Err {
            after_ms: 5,
            retryable: false,
        },
        "c" => Outcome::Ok(50),
        _ => Outcome::Ok(10),
    });
    assert_eq!(sim.run(), RunStatus::Paused);
    assert_eq!(sim.steps_with("started"), ["a", "b", "c", "notify"]);
    assert_eq!(sim.state().status("notify"), StepStatus::Succeeded);
    assert_eq!(
        sim.state().status("d"),
        StepStatus::Pending,
        "held, not skipped"
    );
    assert_eq!(
        sim.machine.pause_cause(),
        Some(PauseCause::StepFailed {
            step: StepName::from("b")
        })
    );
}

#[test]
fn an_override_of_the_failure_lets_the_held_steps_run_and_the_run_succeed() {
    let w = diamond_with_notify(OnFailure::Pause);
    let mut sim = Sim::new(&w, failing("b", 1, false, 10));
    assert_eq!(sim.run(), RunStatus::Paused);
    sim.override_step("b", OverrideTarget::Succeeded, "done by hand");
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(sim.state().status("d"), StepStatus::Succeeded);
    assert_eq!(sim.state().status("notify"), StepStatus::Succeeded);
}

#[test]
fn a_one_failed_step_runs_before_the_rollback_and_is_compensated_first() {
    let w = diamond_with_notify(OnFailure::Rollback);
    let mut sim = Sim::new(&w, failing("b", 1, false, 10));
    assert_eq!(sim.run(), RunStatus::RolledBack);
    let notified = seqs(&sim, "notify", "succeeded")[0];
    let compensations = sim.steps_with("compensating");
    assert_eq!(compensations, ["notify", "c", "a"], "dependents first");
    assert!(
        sim.events
            .iter()
            .filter(|e| e.kind.name() == "compensating")
            .all(|e| e.seq.0 > notified),
        "the handler ran before the rollback started"
    );
}

#[test]
fn a_one_failed_step_none_of_whose_dependencies_failed_is_skipped_and_counts_as_done() {
    let w = diamond_with_notify(OnFailure::Pause);
    let mut sim = Sim::new(&w, |_, _| Outcome::Ok(10));
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(sim.state().status("notify"), StepStatus::Skipped);
    assert_eq!(
        skip_reason(&sim, "notify").as_deref(),
        Some("trigger rule `one_failed`: no dependency failed")
    );
    assert!(!sim.steps_with("started").contains(&"notify".to_owned()));
}

#[test]
fn an_all_done_cleanup_runs_after_a_failure_and_after_a_success() {
    let w = spec(
        OnFailure::Pause,
        &[
            ("work", &[], I::Natural, false),
            ("more", &["work"], I::Natural, false),
            ("cleanup", &["more"], I::Natural, false),
        ],
    );
    let w = with_triggers(w, &[("cleanup", TriggerRule::AllDone)]);
    // `more` never runs after `work` failed: held, it counts as done for the cleanup.
    let mut sim = Sim::new(&w, failing("work", 1, false, 10));
    assert_eq!(sim.run(), RunStatus::Paused);
    assert_eq!(sim.steps_with("started"), ["work", "cleanup"]);
    assert_eq!(sim.state().status("more"), StepStatus::Pending);

    let mut sim = Sim::new(&w, |_, _| Outcome::Ok(10));
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(sim.steps_with("started"), ["work", "more", "cleanup"]);
}

#[test]
fn a_failure_that_a_retry_fixes_runs_no_handler() {
    let w = diamond_with_notify(OnFailure::Pause);
    let mut sim = Sim::new(&w, failing("b", 1, true, 10));
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(seqs(&sim, "b", "started").len(), 2);
    assert_eq!(sim.state().status("notify"), StepStatus::Skipped);
}

#[test]
fn a_skip_propagates_by_each_dependents_own_rule() {
    // notify is skipped; `after` (all_succeeded) takes the skip as a success, `alarm`
    // (one_failed on notify) is skipped in turn, `report` (all_done) runs.
    let w = spec(
        OnFailure::Pause,
        &[
            ("a", &[], I::Natural, false),
            ("notify", &["a"], I::Natural, false),
            ("after", &["notify"], I::Natural, false),
            ("alarm", &["notify"], I::Natural, false),
            ("report", &["alarm"], I::Natural, false),
        ],
    );
    let w = with_triggers(
        w,
        &[
            ("notify", TriggerRule::OneFailed),
            ("alarm", TriggerRule::OneFailed),
            ("report", TriggerRule::AllDone),
        ],
    );
    let mut sim = Sim::new(&w, |_, _| Outcome::Ok(10));
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(sim.steps_with("skipped"), ["notify", "alarm"]);
    assert_eq!(sim.steps_with("started"), ["a", "after", "report"]);
}

#[test]
fn a_one_failed_step_waits_while_a_dependency_is_held() {
    // `side` is held by the failure of `x`: it may yet run (and fail) once a person lets
    // the run go on, so `watch` neither runs nor is skipped.
    let w = spec(
        OnFailure::Pause,
        &[
            ("x", &[], I::Natural, false),
            ("side", &["x"], I::Natural, false),
            ("watch", &["side"], I::Natural, false),
        ],
    );
    let w = with_triggers(w, &[("watch", TriggerRule::OneFailed)]);
    let mut sim = Sim::new(&w, failing("x", 1, false, 10));
    assert_eq!(sim.run(), RunStatus::Paused);
    assert_eq!(sim.state().status("watch"), StepStatus::Pending);
    assert!(sim.steps_with("skipped").is_empty());
    sim.override_step("x", OverrideTarget::Skipped, "not needed");
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(sim.steps_with("skipped"), ["watch"]);
}

#[test]
fn a_failed_handler_is_retried_per_its_policy_before_the_run_pauses() {
    let mut w = diamond_with_notify(OnFailure::Pause);
    w.steps[4].retry.max_attempts = 2;
    let mut sim = Sim::new(&w, |step, attempt| match (step, attempt) {
        ("b", _) | ("notify", 1) => Outcome::Err {
            after_ms: 5,
            retryable: true,
        },
        _ => Outcome::Ok(10),
    });
    assert_eq!(sim.run(), RunStatus::Paused);
    assert_eq!(seqs(&sim, "notify", "started").len(), 2);
    assert_eq!(sim.state().status("notify"), StepStatus::Succeeded);
}

/// `b`, and `notify` (one_failed, of `class`, with a compensation) after it; `b` fails for
/// good and `notify`'s first attempt fails retryably. Returns the sim once `notify` has
/// failed and an operator overrode `b` to `succeeded`: the failure `notify` handled is gone.
fn handler_whose_failure_is_overridden(class: I) -> Sim {
    let mut w = spec(
        OnFailure::Pause,
        &[
            ("b", &[], I::Natural, false),
            ("notify", &["b"], class, true),
        ],
    );
    w.steps[1].retry.max_attempts = 2;
    w = with_triggers(w, &[("notify", TriggerRule::OneFailed)]);
    let mut sim = Sim::new(&w, |step, attempt| match (step, attempt) {
        ("b", _) => Outcome::Err {
            after_ms: 5,
            retryable: false,
        },
        ("notify", 1) => Outcome::Err {
            after_ms: 5,
            retryable: true,
        },
        _ => Outcome::Ok(10),
    });
    while sim.state().status("notify") != StepStatus::Failed {
        assert!(sim.round().is_none(), "{}", sim.summary());
    }
    sim.override_step("b", OverrideTarget::Succeeded, "fixed by hand");
    sim
}

#[test]
fn a_handler_whose_failure_an_override_took_away_is_skipped_not_tried_again() {
    let mut sim = handler_whose_failure_is_overridden(I::Natural);
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(seqs(&sim, "notify", "started").len(), 1, "no rerun");
    assert_eq!(sim.state().status("notify"), StepStatus::Skipped);
    assert_eq!(
        skip_reason(&sim, "notify").as_deref(),
        Some("trigger rule `one_failed`: no dependency failed")
    );
    assert_eq!(sim.state().step("notify").attempt, 1, "its attempt is kept");
}

#[test]
fn a_compensate_handler_whose_failure_an_override_took_away_is_undone_then_skipped() {
    let mut sim = handler_whose_failure_is_overridden(I::Compensate);
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(seqs(&sim, "notify", "started").len(), 1, "no rerun");
    let compensated = seqs(&sim, "notify", "compensated");
    let skipped = seqs(&sim, "notify", "skipped");
    assert_eq!(compensated.len(), 1, "its failed attempt is undone");
    assert!(compensated[0] < skipped[0], "before the skip");
}

#[test]
fn a_rollback_undoes_a_failed_compensate_handler_in_its_wave_after_its_dependents() {
    // `done` follows the handler `h` and was set `succeeded` by an operator: the rollback
    // undoes `done` before `h`, whose retryable failure comes while the run rolls back. A
    // compensation of `h` for a rerun would undo it first.
    let mut w = spec(
        OnFailure::Pause,
        &[
            ("b", &[], I::Natural, false),
            ("h", &["b"], I::Compensate, true),
            ("done", &["h"], I::Natural, true),
        ],
    );
    w.steps[1].retry.max_attempts = 3;
    w = with_triggers(w, &[("h", TriggerRule::OneFailed)]);
    let mut sim = Sim::new(&w, |step, _| match step {
        "b" => Outcome::Err {
            after_ms: 5,
            retryable: false,
        },
        "h" => Outcome::Err {
            after_ms: 50,
            retryable: true,
        },
        _ => Outcome::Ok(10),
    });
    sim.run_until_started("h", 1);
    sim.operator(RunAction::Rollback, "undo it all");
    sim.override_step("done", OverrideTarget::Succeeded, "ran it by hand");
    assert_eq!(sim.run(), RunStatus::RolledBack);
    assert_eq!(
        sim.steps_with("compensating"),
        ["done", "h"],
        "dependents first"
    );
    assert_eq!(
        seqs(&sim, "h", "started").len(),
        1,
        "a rollback reruns no undone handler"
    );
}

#[test]
fn a_failed_handler_whose_failure_an_override_made_pending_again_waits_with_the_run_at_rest() {
    // `x` and `y` fail for good; `h` handles `x`'s failure and fails retryably after an
    // operator set `x` to run again: `x` is held by `y`'s failure, so `h` waits for it,
    // and the run rests paused rather than waiting on a retry that cannot come.
    let mut w = spec(
        OnFailure::Pause,
        &[
            ("x", &[], I::Natural, false),
            ("y", &[], I::Natural, false),
            ("h", &["x"], I::Natural, false),
        ],
    );
    w.steps[2].retry.max_attempts = 4;
    w = with_triggers(w, &[("h", TriggerRule::OneFailed)]);
    let mut sim = Sim::new(&w, |step, attempt| match (step, attempt) {
        ("x", 1) | ("y", _) => Outcome::Err {
            after_ms: 5,
            retryable: false,
        },
        ("h", 1) => Outcome::Err {
            after_ms: 50,
            retryable: true,
        },
        _ => Outcome::Ok(10),
    });
    sim.run_until_started("h", 1);
    sim.override_step("x", OverrideTarget::Pending, "try it again");
    assert_eq!(sim.run(), RunStatus::Paused);
    assert_eq!(
        seqs(&sim, "h", "started").len(),
        1,
        "no retry while x is held"
    );
    sim.override_step("y", OverrideTarget::Succeeded, "done by hand");
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(seqs(&sim, "x", "started").len(), 2);
    assert_eq!(sim.state().status("h"), StepStatus::Skipped);
}

#[test]
fn a_handler_whose_rule_holds_only_once_the_rollback_undid_the_failures_never_starts() {
    // `b` fails while `x` fails for good; an operator asks a rollback, which compensates
    // `x`; `b`'s compensation runs out of tries and is overridden to `skipped`: `h`
    // (one_failed on `b`) can never hold, and `cleanup` (all_done after `h`) would hold, but
    // no failure is left to handle: the rollback starts nothing downstream of what it undid.
    let mut w = spec(
        OnFailure::Pause,
        &[
            ("x", &[], I::Compensate, true),
            ("b", &[], I::Compensate, true),
            ("h", &["b"], I::Natural, false),
            ("cleanup", &["h"], I::Natural, false),
        ],
    );
    w.steps[1].retry.max_attempts = 2;
    w = with_triggers(
        w,
        &[
            ("h", TriggerRule::OneFailed),
            ("cleanup", TriggerRule::AllDone),
        ],
    );
    let mut sim = Sim::new(&w, |step, _| match step {
        "x" => Outcome::Err {
            after_ms: 5,
            retryable: false,
        },
        "b" => Outcome::Err {
            after_ms: 20,
            retryable: true,
        },
        _ => Outcome::Ok(10),
    })
    .compensations(|step, _| match step {
        "b" => Outcome::Err {
            after_ms: 5,
            retryable: true,
        },
        _ => Outcome::Ok(5),
    });
    sim.run_until_started("b", 1);
    sim.operator(RunAction::Rollback, "undo it all");
    assert_eq!(sim.run(), RunStatus::Paused, "{}", sim.summary());
    assert_eq!(sim.state().status("b"), StepStatus::CompensationFailed);
    sim.override_step("b", OverrideTarget::Skipped, "undone by hand");
    assert_eq!(sim.run(), RunStatus::RolledBack, "{}", sim.summary());
    assert_eq!(sim.steps_with("skipped"), ["h"]);
    assert!(
        seqs(&sim, "cleanup", "started").is_empty(),
        "{}",
        sim.summary()
    );
}
