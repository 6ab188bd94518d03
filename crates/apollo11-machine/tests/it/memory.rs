//! The memory limit of the next attempt, from the log alone: the limit the last measured
//! attempt ran with, grown after a failure whose class's retry has `memory_factor_pct`, up
//! to its `memory_max`; kept after other failures; forgotten by a rerun.

use crate::{pinned, spec};
use apollo11_core::{
    AttemptFailure, ClassRetry, FailureClass, Idempotency as I, OnFailure, OverrideTarget, Usage,
    WorkflowSpec,
};
use apollo11_machine::{fold, memory_limit, History};

const MIB: u64 = 1 << 20;

/// One step `a` whose `oom` failures double its memory, up to 600 MiB.
fn doubling() -> WorkflowSpec {
    let mut w = spec(OnFailure::Pause, &[("a", &[], I::Natural, false)]);
    let oom = ClassRetry {
        memory_factor_pct: Some(200),
        memory_max: Some(600 * MIB),
        ..ClassRetry::default()
    };
    w.steps[0].retry.by_class.insert("oom".into(), oom);
    w
}

fn ran_with(limit: u64) -> Usage {
    Usage {
        isolation: "cgroup".into(),
        wall_ms: 10,
        memory_limit_bytes: Some(limit),
        ..Usage::default()
    }
}

/// The run after `a` ran with each limit of `tries` and failed with its class.
fn tried(w: &WorkflowSpec, tries: &[(u64, FailureClass)]) -> History {
    let mut h = History::new("r").created("test", pinned(w));
    for (limit, class) in tries {
        h = h
            .started("a")
            .used("a", ran_with(*limit))
            .failed_with("a", AttemptFailure::new(class.clone(), "killed", true));
    }
    h
}

fn next_limit(w: &WorkflowSpec, h: &History) -> Option<u64> {
    let state = fold(h.run_id(), h.events());
    memory_limit(state.step("a"), &w.steps[0].retry)
}

#[test]
fn an_oom_doubles_the_limit_up_to_its_ceiling_and_another_failure_keeps_it() {
    let w = doubling();
    let none = History::new("r").created("test", pinned(&w)).started("a");
    assert_eq!(
        next_limit(&w, &none),
        None,
        "no attempt measured: the step's own"
    );
    let once = tried(&w, &[(256 * MIB, FailureClass::Oom)]);
    assert_eq!(next_limit(&w, &once), Some(512 * MIB));
    let twice = tried(
        &w,
        &[
            (256 * MIB, FailureClass::Oom),
            (512 * MIB, FailureClass::Oom),
        ],
    );
    assert_eq!(next_limit(&w, &twice), Some(600 * MIB), "the ceiling");
    let other = tried(
        &w,
        &[
            (256 * MIB, FailureClass::Oom),
            (512 * MIB, FailureClass::Exit(1)),
        ],
    );
    assert_eq!(next_limit(&w, &other), Some(512 * MIB), "kept, not grown");
    let rerun = other.overridden("a", OverrideTarget::Pending, "op", "again");
    assert_eq!(
        next_limit(&w, &rerun),
        Some(512 * MIB),
        "an override keeps it"
    );
}

#[test]
fn a_class_without_a_factor_or_a_ceiling_under_the_limit_never_shrinks_it() {
    let mut w = doubling();
    let mut low = w.steps[0].retry.by_class["oom"].clone();
    low.memory_max = Some(100 * MIB);
    w.steps[0].retry.by_class.insert("oom".into(), low);
    let h = tried(&w, &[(256 * MIB, FailureClass::Oom)]);
    assert_eq!(next_limit(&w, &h), Some(256 * MIB));
    w.steps[0].retry.by_class.clear();
    assert_eq!(next_limit(&w, &h), Some(256 * MIB));
}
