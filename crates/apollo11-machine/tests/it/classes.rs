//! Retry by failure class: each class's policy, classes never retried, the same failure
//! repeated, and the note a `Failed` event carries; the delay a step (or a compensation's
//! try) asks for.

use crate::decide::decide_at;
use crate::{pinned, spec};
use apollo11_core::{
    fingerprint, AttemptFailure, Backoff, ClassRetry, FailureClass, Idempotency as I, OnFailure,
    RetryPolicy, StepName, WorkflowSpec,
};
use apollo11_machine::{
    compensation_note_for, fold, note_for, pause_cause, Command, History, PauseCause, Policy,
    RunStatus,
};

/// One step `a`, pausing on failure, retried up to `max_attempts` after 1 s, fixed.
fn one_step(max_attempts: u32) -> WorkflowSpec {
    let mut w = spec(OnFailure::Pause, &[("a", &[], I::Natural, false)]);
    w.steps[0].retry = RetryPolicy {
        max_attempts,
        backoff: Backoff::Fixed,
        initial_ms: 1_000,
        max_ms: 1_000,
        ..RetryPolicy::default()
    };
    w
}

fn failure(class: FailureClass, stderr: &str) -> AttemptFailure {
    AttemptFailure {
        fingerprint: fingerprint(&class, stderr),
        ..AttemptFailure::new(class, stderr, true)
    }
}

/// The run after `a` started and failed with each of `failures`, 10 ms apart.
fn failed(w: &WorkflowSpec, failures: &[AttemptFailure]) -> History {
    let mut h = History::new("r").created("test", pinned(w)).at(0);
    for (i, f) in failures.iter().enumerate() {
        let ms = 10_000 * i as u64;
        h = h
            .at(ms)
            .started("a")
            .at(ms + 10)
            .failed_with("a", f.clone());
    }
    h
}

fn paused() -> Vec<Command> {
    vec![Command::Finish {
        status: RunStatus::Paused,
    }]
}

fn start(attempt: u32) -> Vec<Command> {
    vec![Command::Start {
        step: StepName::from("a"),
        attempt,
    }]
}

#[test]
fn the_same_failure_twice_in_a_row_stops_the_retries_however_many_attempts_are_left() {
    let w = one_step(10);
    let same = |pid: u32| failure(FailureClass::Exit(1), &format!("pid {pid}: disk full"));
    let h = failed(&w, &[same(1)]);
    assert_eq!(
        decide_at(&w, &h, 99_999, &[]),
        start(2),
        "once is not a pattern"
    );
    let h = failed(&w, &[same(1), same(2)]);
    assert_eq!(decide_at(&w, &h, 99_999, &[]), paused());
    let state = fold(h.run_id(), h.events());
    let (dag, policy) = Policy::compile(&w, |_, f| f).unwrap();
    assert_eq!(
        pause_cause(&state, &dag, &policy),
        Some(PauseCause::StepFailed { step: "a".into() })
    );
}

#[test]
fn failures_that_differ_or_have_no_fingerprint_are_retried_up_to_max_attempts() {
    let w = one_step(3);
    let varied = [
        failure(FailureClass::Exit(1), "connection refused"),
        failure(FailureClass::Exit(1), "503 service unavailable"),
    ];
    assert_eq!(decide_at(&w, &failed(&w, &varied), 99_999, &[]), start(3));
    let timeouts = vec![AttemptFailure::new(FailureClass::Timeout, "timeout", true); 2];
    assert_eq!(decide_at(&w, &failed(&w, &timeouts), 99_999, &[]), start(3));
    let three = vec![AttemptFailure::new(FailureClass::Timeout, "timeout", true); 3];
    assert_eq!(decide_at(&w, &failed(&w, &three), 99_999, &[]), paused());
}

#[test]
fn the_repetition_rule_takes_its_count_from_the_policy_and_zero_turns_it_off() {
    let same = vec![failure(FailureClass::Exit(1), "disk full"); 3];
    let mut w = one_step(5);
    w.steps[0].retry.same_failure_max = 3;
    assert_eq!(
        decide_at(&w, &failed(&w, &same[..2]), 99_999, &[]),
        start(3)
    );
    assert_eq!(decide_at(&w, &failed(&w, &same), 99_999, &[]), paused());
    w.steps[0].retry.same_failure_max = 0;
    assert_eq!(decide_at(&w, &failed(&w, &same), 99_999, &[]), start(4));
}

#[test]
fn spawn_is_never_retried_by_default_and_a_class_may_say_never() {
    let w = one_step(5);
    let spawn = [AttemptFailure::new(
        FailureClass::Spawn,
        "sh: nope: not found",
        true,
    )];
    assert_eq!(decide_at(&w, &failed(&w, &spawn), 99_999, &[]), paused());
    let mut w = one_step(5);
    w.steps[0]
        .retry
        .by_class
        .insert("fatal".into(), ClassRetry::never());
    let fatal = [AttemptFailure::new(
        FailureClass::Author("fatal".into()),
        "denied",
        true,
    )];
    assert_eq!(decide_at(&w, &failed(&w, &fatal), 99_999, &[]), paused());
    w.steps[0]
        .retry
        .by_class
        .insert("spawn".into(), ClassRetry::default());
    assert_eq!(decide_at(&w, &failed(&w, &spawn), 99_999, &[]), start(2));
}

#[test]
fn a_class_has_its_own_attempts_and_backoff_by_name_then_by_family() {
    let mut w = one_step(2);
    let transient = ClassRetry {
        max_attempts: Some(6),
        initial_ms: Some(50),
        max_ms: Some(50),
        ..ClassRetry::default()
    };
    w.steps[0]
        .retry
        .by_class
        .insert("transient".into(), transient);
    w.steps[0].retry.by_class.insert(
        "exit".into(),
        ClassRetry {
            initial_ms: Some(7_000),
            max_ms: Some(7_000),
            ..ClassRetry::default()
        },
    );
    let refused = |n: usize| {
        (0..n)
            .map(|i| {
                failure(
                    FailureClass::Author("transient".into()),
                    &format!("refused try {i}{}", "!".repeat(i)),
                )
            })
            .collect::<Vec<_>>()
    };
    let h = failed(&w, &refused(5));
    // The fifth failure at 40 010 ms: the next attempt 50 ms later, not 1 s.
    assert_eq!(
        decide_at(&w, &h, 40_020, &[]),
        [Command::WakeAt { ms: 40_060 }]
    );
    assert_eq!(decide_at(&w, &h, 40_060, &[]), start(6));
    assert_eq!(
        decide_at(&w, &failed(&w, &refused(6)), 99_999, &[]),
        paused()
    );
    let exit = [failure(FailureClass::Exit(3), "x")];
    assert_eq!(
        decide_at(&w, &failed(&w, &exit), 20, &[]),
        [Command::WakeAt { ms: 7_010 }],
        "`exit` covers exit:3"
    );
}

#[test]
fn the_note_says_why_no_attempt_follows_and_is_empty_when_one_does() {
    let w = one_step(10);
    let same = failure(FailureClass::Exit(1), "disk full");
    let h = failed(&w, std::slice::from_ref(&same));
    let state = fold(h.run_id(), h.events());
    let retry = &w.steps[0].retry;
    let note = note_for(state.step("a"), &same, 20_000, retry);
    assert!(note.starts_with("the same failure repeated"), "{note}");
    let other = failure(FailureClass::Exit(1), "disk ok, network down");
    assert_eq!(note_for(state.step("a"), &other, 20_000, retry), "");
    let spawn = AttemptFailure::new(FailureClass::Spawn, "not found", true);
    let note = note_for(state.step("a"), &spawn, 20_000, retry);
    assert_eq!(note, "class spawn is never retried by default");
}

#[test]
fn an_old_failed_event_reads_as_the_class_its_text_gives() {
    let w = one_step(3);
    let h = History::new("r")
        .created("test", pinned(&w))
        .started("a")
        .failed_legacy("a", "exited with code 4 (log: x)", true);
    let state = fold(h.run_id(), h.events());
    let last = state.step("a").last_error.as_deref().unwrap();
    assert_eq!(
        (last.class.clone(), last.fingerprint),
        (FailureClass::Exit(4), 0)
    );
    assert_eq!(decide_at(&w, &h, 99_999, &[]), start(2));
}

#[test]
fn a_step_may_ask_for_its_next_attempts_delay_within_the_policys_max() {
    let w = one_step(3);
    let asking = |ms| AttemptFailure {
        retry_after_ms: Some(ms),
        ..AttemptFailure::new(FailureClass::Exit(1), "busy", true)
    };
    let h = failed(&w, &[asking(300)]);
    assert_eq!(decide_at(&w, &h, 20, &[]), [Command::WakeAt { ms: 310 }]);
    let h = failed(&w, &[asking(99_000)]);
    assert_eq!(
        decide_at(&w, &h, 20, &[]),
        [Command::WakeAt { ms: 1_010 }],
        "at most the policy's max, 1 s"
    );
    let state = fold(h.run_id(), h.events());
    let retry = &w.steps[0].retry;
    let note = note_for(state.step("a"), &asking(300), 20_000, retry);
    assert_eq!(note, "retry after 300 ms, as the step asked");
    let note = note_for(state.step("a"), &asking(99_000), 20_000, retry);
    assert_eq!(
        note,
        "retry after 1000 ms, as the step asked, the most its policy allows"
    );
}

#[test]
fn a_compensations_try_may_ask_for_the_next_ones_delay_within_the_policys_max() {
    let mut w = spec(
        OnFailure::Rollback,
        &[("a", &[], I::Keyed, true), ("b", &["a"], I::Natural, false)],
    );
    w.steps[0].retry = RetryPolicy {
        max_attempts: 2,
        backoff: Backoff::Fixed,
        initial_ms: 1_000,
        max_ms: 5_000,
        ..RetryPolicy::default()
    };
    let asking = |ms| AttemptFailure {
        retry_after_ms: Some(ms),
        ..AttemptFailure::new(FailureClass::Exit(1), "busy", true)
    };
    let compensating = History::new("r")
        .created("test", pinned(&w))
        .started("a")
        .succeeded("a", "x")
        .started("b")
        .failed("b", "no", false)
        .compensating("a")
        .at(5_000);
    let again = [Command::Compensate {
        step: StepName::from("a"),
        attempt: 1,
    }];
    let h = compensating
        .clone()
        .compensation_failed_with("a", asking(2_000));
    assert_eq!(
        decide_at(&w, &h, 5_500, &[]),
        [Command::WakeAt { ms: 7_000 }]
    );
    assert_eq!(decide_at(&w, &h, 7_000, &[]), again);
    let h = compensating
        .clone()
        .compensation_failed_with("a", asking(99_000));
    assert_eq!(
        decide_at(&w, &h, 5_500, &[]),
        [Command::WakeAt { ms: 10_000 }],
        "at most the policy's max, 5 s"
    );
    let h = compensating.clone().compensation_failed("a", "busy", true);
    assert_eq!(
        decide_at(&w, &h, 5_500, &[]),
        [Command::WakeAt { ms: 6_000 }],
        "an older event asks nothing: the backoff, 1 s"
    );
    let before = fold(h.run_id(), compensating.events());
    let (a, retry) = (before.step("a"), &w.steps[0].retry);
    assert_eq!(
        compensation_note_for(a, &asking(2_000), retry),
        "retry after 2000 ms, as the step asked"
    );
    assert_eq!(
        compensation_note_for(a, &asking(99_000), retry),
        "retry after 5000 ms, as the step asked, the most its policy allows"
    );
    let last = compensating
        .compensation_failed("a", "busy", true)
        .compensating("a");
    let last = fold(last.run_id(), last.events());
    assert_eq!(
        compensation_note_for(last.step("a"), &asking(2_000), retry),
        "",
        "no try follows the last one"
    );
}
