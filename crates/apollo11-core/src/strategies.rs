//! Proptest strategies for this crate's types (the `proptest` feature), for the property
//! tests of the crates above.

use crate::{AttemptFailure, EventKind, FailureClass, OverrideTarget, Usage};
use proptest::prelude::*;

/// Any event kind, including ones a correct scheduler would never write at a given point.
pub fn arb_event_kind() -> impl Strategy<Value = EventKind> {
    let target = prop_oneof![
        Just(OverrideTarget::Succeeded),
        Just(OverrideTarget::Skipped),
        Just(OverrideTarget::Pending),
        Just(OverrideTarget::Failed),
    ];
    prop_oneof![
        4 => Just(EventKind::Started),
        3 => Just(EventKind::Succeeded),
        1 => (any::<bool>(), "[a-z]{0,6}").prop_map(|(retryable, error)| EventKind::Failed { error, retryable }),
        3 => (any::<bool>(), "[a-z]{0,6}", 0u64..3, arb_class()).prop_map(|(retryable, error, fingerprint, class)| {
            let note = String::new();
            EventKind::AttemptFailed(AttemptFailure { class, error, retryable, fingerprint, note, retry_after_ms: None })
        }),
        2 => Just(EventKind::Compensating),
        2 => Just(EventKind::Compensated),
        1 => (any::<bool>(), "[a-z]{0,6}").prop_map(|(retryable, error)| EventKind::CompensationFailed { error, retryable }),
        1 => (any::<bool>(), "[a-z]{0,6}", proptest::option::of(0u64..3), arb_class()).prop_map(|(retryable, error, retry_after_ms, class)| {
            let note = String::new();
            EventKind::CompensationTryFailed(AttemptFailure { class, error, retryable, fingerprint: 0, note, retry_after_ms })
        }),
        1 => (target, "[a-z]{1,4}").prop_map(|(to, by)| EventKind::ManualOverride { to, by, reason: "why".into() }),
        1 => "[a-z]{1,4}".prop_map(|workflow| EventKind::RunCreated { workflow }),
        1 => "[a-z]{1,4}".prop_map(|by| EventKind::RunPaused { by, reason: "why".into() }),
        1 => "[a-z]{1,4}".prop_map(|by| EventKind::RunResumed { by, reason: "why".into() }),
        1 => "[a-z]{1,4}".prop_map(|by| EventKind::RollbackRequested { by, reason: "why".into() }),
        2 => "[a-z]{1,4}".prop_map(|host| EventKind::Placed { host, handle: "pgid 7".into() }),
        2 => Just(EventKind::Interrupted),
        2 => "[a-z]{0,6}".prop_map(|reason| EventKind::Skipped { reason }),
        2 => (0u32..4).prop_map(|items| EventKind::Expanded { items }),
        2 => (0u64..3, proptest::option::of(1u64..4)).prop_map(|(wall_ms, memory_limit_bytes)| {
            EventKind::AttemptUsage(Usage { isolation: "cgroup".into(), wall_ms, memory_limit_bytes, ..Usage::default() })
        }),
        1 => ("[a-z]{1,4}", any::<bool>()).prop_map(|(by, undo)| EventKind::RerunRequested {
            steps: vec!["a".into(), "b".into()],
            compensate: if undo { vec!["b".into()] } else { Vec::new() },
            by,
            reason: "why".into(),
        }),
        2 => "[a-z]{1,4}".prop_map(|by| EventKind::Signalled { by, reason: "why".into() }),
    ]
}

/// A few failure classes: built-in ones with and without a parameter, and an author's.
pub fn arb_class() -> impl Strategy<Value = FailureClass> {
    prop_oneof![
        (0i32..3).prop_map(FailureClass::Exit),
        Just(FailureClass::Timeout),
        Just(FailureClass::Spawn),
        Just(FailureClass::Author("transient".into())),
    ]
}
