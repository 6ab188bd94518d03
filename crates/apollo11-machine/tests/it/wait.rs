//! Waiting steps: no slot held, never interrupted, a timer fired once at the instant the
//! log gives, a deadline failed with class `timeout`, a signal taken only while waiting.

use crate::decide::decide_at;
use crate::{pinned, spec};
use apollo11_core::{EventKind, Idempotency as I, OnFailure, Payload, StepName, Timeout, Wait};
use apollo11_machine::{check_signal, fold, Command, FailReason, History, Policy, StepStatus};

/// `gate` waits for `wait`; `after` depends on it; `other` is independent; one slot.
fn gated(wait: Wait) -> apollo11_core::WorkflowSpec {
    let mut w = spec(
        OnFailure::Pause,
        &[
            ("gate", &[], I::Natural, false),
            ("other", &[], I::Natural, false),
            ("after", &["gate"], I::Natural, false),
        ],
    );
    w.max_concurrency = 1;
    w.steps[0].wait = Some(wait);
    w
}

fn start(step: &str) -> Command {
    Command::Start {
        step: StepName::from(step),
        attempt: 1,
    }
}

/// The history with `gate` started at 1,000 ms.
fn waiting(w: &apollo11_core::WorkflowSpec) -> History {
    History::new("r")
        .at(990)
        .created("test", pinned(w))
        .started("gate")
}

#[test]
fn a_waiting_step_holds_no_slot_and_is_not_interrupted() {
    let w = gated(Wait::Signal);
    let h = waiting(&w);
    // Nothing executes, as after a crash: the wait goes on and `other` takes the one slot.
    assert_eq!(decide_at(&w, &h, 5_000, &[]), vec![start("other")]);
    let h = h.started("other");
    assert_eq!(decide_at(&w, &h, 5_000, &["other"]), Vec::new());
}

#[test]
fn a_timer_fires_once_at_the_start_plus_its_duration() {
    let w = gated(Wait::After { ms: 3_000 });
    let h = waiting(&w).started("other");
    let wake = Command::WakeAt { ms: 4_000 };
    assert_eq!(decide_at(&w, &h, 3_999, &["other"]), vec![wake]);
    let fire = Command::Fire {
        step: StepName::from("gate"),
        attempt: 1,
    };
    assert_eq!(decide_at(&w, &h, 4_000, &["other"]), vec![fire.clone()]);
    let (step, kind, attempt) = fire.event().unwrap();
    let h = h.raw(Some(step.as_str()), kind, attempt, Payload::Empty);
    assert_eq!(
        fold(h.run_id(), h.events()).status("gate"),
        StepStatus::Succeeded
    );
    assert_eq!(
        decide_at(&w, &h, 9_000, &["other"]),
        Vec::new(),
        "fired once"
    );
}

#[test]
fn a_timer_until_an_instant_fires_then_whenever_it_started() {
    let w = gated(Wait::Until { ms: 2_500 });
    let h = waiting(&w).started("other");
    let due = decide_at(&w, &h, 2_500, &["other"]);
    assert!(matches!(&due[..], [Command::Fire { .. }]), "{due:?}");
}

#[test]
fn a_deadline_fails_the_wait_with_class_timeout() {
    let mut w = gated(Wait::Signal);
    w.steps[0].timeout = Timeout::Fixed(500);
    let h = waiting(&w).started("other");
    let failed = decide_at(&w, &h, 1_500, &["other"]);
    let timed_out = Command::Fail {
        step: StepName::from("gate"),
        attempt: 1,
        reason: FailReason::Timeout,
    };
    assert_eq!(failed, vec![timed_out.clone()]);
    let (_, kind, _) = timed_out.event().unwrap();
    assert_eq!(kind.failure().unwrap().class.name(), "timeout");
}

#[test]
fn a_signal_ends_only_a_wait_for_a_signal_under_way() {
    let w = gated(Wait::Signal);
    let (dag, policy) = Policy::compile(&w, |_, f| f).unwrap();
    let h = History::new("r").created("test", pinned(&w));
    let code = |h: &History, step: &str| {
        let state = fold(h.run_id(), h.events());
        check_signal(&state, &dag, &policy, step).map_err(|r| r.code())
    };
    assert_eq!(code(&h, "gate"), Err("not_waiting"), "pending");
    assert_eq!(code(&h, "other"), Err("not_waiting"), "runs code");
    assert_eq!(code(&h, "nope"), Err("unknown_step"));
    let h = h.started("gate");
    assert_eq!(code(&h, "gate"), Ok(1));
    let signalled = EventKind::Signalled {
        by: "ada".into(),
        reason: "wave 1 is fine".into(),
    };
    let h = h.raw(Some("gate"), signalled, 1, Payload::inline(r#"{"go":1}"#));
    let state = fold(h.run_id(), h.events());
    assert_eq!(state.status("gate"), StepStatus::Succeeded);
    assert!(
        state.step("gate").payload_seq.is_some(),
        "its data is its output"
    );
    assert_eq!(code(&h, "gate"), Err("not_waiting"), "done");

    let timer = gated(Wait::After { ms: 10 });
    let (dag, policy) = Policy::compile(&timer, |_, f| f).unwrap();
    let h = waiting(&timer);
    let state = fold(h.run_id(), h.events());
    let refused = check_signal(&state, &dag, &policy, "gate").unwrap_err();
    assert!(
        refused.to_string().contains("waits for a timer"),
        "{refused}"
    );
}
