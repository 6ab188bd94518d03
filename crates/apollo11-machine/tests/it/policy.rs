//! `Policy::compile`: what it refuses, naming the step, and what it keeps.

use crate::spec;
use apollo11_core::{Idempotency as I, OnFailure, Timeout};
use apollo11_machine::{Policy, PolicyError};

#[test]
fn a_zero_timeout_fixed_or_as_the_auto_fallback_is_refused_naming_the_step() {
    for timeout in [Timeout::Fixed(0), Timeout::Auto { fallback_ms: 0 }] {
        let mut w = spec(
            OnFailure::Pause,
            &[
                ("a", &[], I::Natural, false),
                ("b", &["a"], I::Natural, false),
            ],
        );
        w.steps[1].timeout = timeout;
        let err = Policy::compile(&w, |_, f| f).unwrap_err();
        assert_eq!(
            err,
            PolicyError::ZeroTimeout { step: "b".into() },
            "{timeout:?}"
        );
        assert_eq!(
            err.to_string(),
            "step `b` has a timeout of 0 ms; a timeout must be at least 1 ms (or none)"
        );
    }
    let mut w = spec(OnFailure::Pause, &[("a", &[], I::Natural, false)]);
    w.steps[0].timeout = Timeout::Fixed(1);
    let (dag, policy) = Policy::compile(&w, |_, f| f).unwrap();
    assert_eq!(policy.step(dag.node("a").unwrap()).timeout_ms, Some(1));
}

#[test]
fn a_policy_is_only_what_compile_checked() {
    let mut w = spec(OnFailure::Rollback, &[("a", &[], I::Natural, false)]);
    w.max_concurrency = 0;
    assert_eq!(
        Policy::compile(&w, |_, f| f).unwrap_err(),
        PolicyError::ZeroConcurrency
    );
    w.max_concurrency = 3;
    let (_, policy) = Policy::compile(&w, |_, f| f).unwrap();
    assert_eq!(
        (policy.on_failure(), policy.max_concurrency()),
        (OnFailure::Rollback, 3)
    );
    w.steps[0].retry.max_attempts = 0;
    assert_eq!(
        Policy::compile(&w, |_, f| f).unwrap_err(),
        PolicyError::ZeroAttempts { step: "a".into() }
    );
}
