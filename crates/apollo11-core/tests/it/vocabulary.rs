//! Ids, events, kinds and payloads: every accessor and conversion gives back what went in.

use apollo11_core::{
    AttemptFailure, BlobRef, Event, EventId, EventKind, EventRef, FailureClass, KindTag,
    OverrideTarget, Payload, PayloadRef, RunId, Seq, StepName,
};
use std::collections::BTreeMap;

#[test]
fn ids_convert_show_and_look_up_as_their_text() {
    let run = RunId::from("run-7");
    let step = StepName::from("collect");
    assert_eq!((run.as_str(), step.as_str()), ("run-7", "collect"));
    assert_eq!(
        (run.to_string(), step.to_string()),
        ("run-7".into(), "collect".into())
    );
    assert_eq!(
        (EventId(9).to_string(), Seq(3).to_string()),
        ("9".into(), "3".into())
    );
    // Maps keyed by the newtypes answer a plain `&str`.
    let steps = BTreeMap::from([(step.clone(), 1), (StepName::from("clean"), 2)]);
    assert_eq!(steps.get("collect"), Some(&1));
    let runs = BTreeMap::from([(run, 'x')]);
    assert_eq!(runs.get("run-7"), Some(&'x'));
    assert_eq!(runs.get("run-8"), None);
}

#[test]
fn seq_next_is_the_following_number() {
    assert_eq!(Seq(1).next(), Seq(2));
    assert_eq!(Seq(41).next(), Seq(42));
}

fn every_kind() -> Vec<EventKind> {
    let (by, reason) = ("op".to_owned(), "why".to_owned());
    vec![
        EventKind::RunCreated {
            workflow: "w".into(),
        },
        EventKind::Started,
        EventKind::Succeeded,
        EventKind::Failed {
            error: "e".into(),
            retryable: true,
        },
        EventKind::Compensating,
        EventKind::Compensated,
        EventKind::ManualOverride {
            to: OverrideTarget::Skipped,
            by: by.clone(),
            reason: reason.clone(),
        },
        EventKind::CompensationFailed {
            error: "e".into(),
            retryable: false,
        },
        EventKind::RunPaused {
            by: by.clone(),
            reason: reason.clone(),
        },
        EventKind::RunResumed {
            by: by.clone(),
            reason: reason.clone(),
        },
        EventKind::RollbackRequested { by, reason },
        EventKind::Placed {
            host: "h".into(),
            handle: "pgid 7".into(),
        },
        EventKind::AttemptFailed(AttemptFailure::new(FailureClass::Exit(3), "e", true)),
    ]
}

#[test]
fn every_kind_has_its_own_tag_and_name_and_the_run_level_ones_say_so() {
    let names: Vec<&str> = every_kind().iter().map(EventKind::name).collect();
    assert_eq!(
        names,
        [
            "run_created",
            "started",
            "succeeded",
            "failed",
            "compensating",
            "compensated",
            "manual_override",
            "compensation_failed",
            "run_paused",
            "run_resumed",
            "rollback_requested",
            "placed",
            "failed"
        ]
    );
    for kind in every_kind() {
        let tag = kind.tag();
        assert_eq!(tag.name(), kind.name());
        assert_eq!(tag.to_string(), kind.name());
        // The tag serializes as the name, which is also how the kind's JSON is keyed.
        assert_eq!(
            serde_json::to_value(tag).unwrap(),
            serde_json::Value::from(kind.name())
        );
        assert_eq!(
            serde_json::from_value::<KindTag>(kind.name().into()).unwrap(),
            tag
        );
        let run_level = matches!(
            kind,
            EventKind::RunCreated { .. }
                | EventKind::RunPaused { .. }
                | EventKind::RunResumed { .. }
                | EventKind::RollbackRequested { .. }
        );
        assert_eq!(kind.is_run_level(), run_level, "{}", kind.name());
        assert_eq!(tag.is_run_level(), run_level, "{}", kind.name());
    }
}

#[test]
fn override_targets_parse_from_their_names_and_nothing_else() {
    for to in [
        OverrideTarget::Succeeded,
        OverrideTarget::Skipped,
        OverrideTarget::Pending,
        OverrideTarget::Failed,
    ] {
        assert_eq!(OverrideTarget::parse(to.name()), Some(to));
    }
    let names: Vec<&str> = [OverrideTarget::Succeeded, OverrideTarget::Pending]
        .iter()
        .map(|t| t.name())
        .collect();
    assert_eq!(names, ["succeeded", "pending"]);
    for bad in ["", "Succeeded", "running", "skip"] {
        assert_eq!(OverrideTarget::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn payload_accessors_tell_empty_inline_and_blob_apart() {
    assert_eq!(
        Payload::inline(""),
        Payload::Empty,
        "no bytes is no payload"
    );
    let inline = Payload::inline("rows=10");
    assert_eq!(inline, Payload::Inline(b"rows=10".to_vec()));
    let blob = Payload::Blob(BlobRef {
        sha256: "ab".into(),
        bytes: 9,
    });
    assert_eq!(
        [
            Payload::Empty.is_empty(),
            inline.is_empty(),
            blob.is_empty()
        ],
        [true, false, false]
    );
    assert_eq!(inline.inline_bytes(), Some(&b"rows=10"[..]));
    assert_eq!(
        (Payload::Empty.inline_bytes(), blob.inline_bytes()),
        (None, None)
    );
    for p in [Payload::Empty, inline, blob] {
        let view = p.view();
        assert_eq!(view.is_empty(), p.is_empty());
        assert_eq!(view.to_payload(), p);
    }
    assert_eq!(Payload::inline("x").view(), PayloadRef::Inline(b"x"));
}

#[test]
fn a_borrowed_payload_decodes_from_the_owned_encoding() {
    for (json, expected) in [
        (r#""empty""#, PayloadRef::Empty),
        (r#"{"text":"rows=10"}"#, PayloadRef::Inline(b"rows=10")),
        (
            r#"{"blob":{"sha256":"ab","bytes":9}}"#,
            PayloadRef::Blob(BlobRef {
                sha256: "ab".into(),
                bytes: 9,
            }),
        ),
    ] {
        assert_eq!(
            serde_json::from_str::<PayloadRef<'_>>(json).unwrap(),
            expected
        );
    }
}

#[test]
fn an_event_borrowed_and_owned_again_is_the_same_event() {
    let event = Event {
        event_id: EventId(12),
        run_id: RunId::from("r"),
        seq: Seq(4),
        step: Some(StepName::from("s")),
        kind: EventKind::AttemptFailed(AttemptFailure::new(FailureClass::Error, "boom", false)),
        attempt: 2,
        at_ms: 1_234,
        instance: "engine-1".into(),
        payload: Payload::inline("marker"),
    };
    let view: EventRef<'_> = event.view();
    assert_eq!(
        (view.run_id, view.step, view.instance, view.seq),
        ("r", Some("s"), "engine-1", Seq(4))
    );
    assert_eq!(view.to_event(), event);
    let json = serde_json::to_string(&event).unwrap();
    let borrowed: EventRef<'_> = serde_json::from_str(&json).unwrap();
    assert_eq!(borrowed, view);
}

#[test]
fn an_event_built_by_its_constructor_has_what_was_set_and_defaults_for_the_rest() {
    let plain = Event::new("r", Seq(2), Some("s"), EventKind::Started);
    assert_eq!(
        (
            plain.event_id,
            plain.run_id.as_str(),
            plain.seq,
            plain.step.as_ref().map(StepName::as_str)
        ),
        (EventId(0), "r", Seq(2), Some("s"))
    );
    assert_eq!(
        (plain.attempt, plain.at_ms, plain.instance.as_str()),
        (0, 0, "")
    );
    assert_eq!(plain.payload, Payload::Empty);
    let full = plain
        .with_event_id(EventId(7))
        .with_attempt(3)
        .with_at_ms(1_500)
        .with_instance("engine-2")
        .with_payload(Payload::inline("out"));
    assert_eq!(
        (
            full.event_id,
            full.attempt,
            full.at_ms,
            full.instance.as_str()
        ),
        (EventId(7), 3, 1_500, "engine-2")
    );
    assert_eq!(full.payload, Payload::inline("out"));
    let run_level = Event::new(
        "r",
        Seq(1),
        None,
        EventKind::RunCreated {
            workflow: "w".into(),
        },
    );
    assert_eq!(run_level.step, None);
}

#[test]
fn specs_built_by_their_constructors_have_what_was_set() {
    use apollo11_core::{Idempotency, OnFailure, RetryPolicy, StepSpec, Timeout, WorkflowSpec};
    let retry = RetryPolicy {
        max_attempts: 5,
        ..RetryPolicy::default()
    };
    let step = StepSpec::new("b", &["a"], Idempotency::Compensate)
        .with_compensation()
        .with_retry(retry.clone())
        .with_timeout(Timeout::Fixed(30_000));
    assert_eq!(
        (
            step.name.as_str(),
            step.depends_on.clone(),
            step.idempotency
        ),
        ("b", vec!["a".to_owned()], Idempotency::Compensate)
    );
    assert!(step.has_compensation);
    assert_eq!(
        (step.retry.clone(), step.timeout),
        (retry, Timeout::Fixed(30_000))
    );
    let plain = StepSpec::new("a", &[], Idempotency::Natural);
    assert!(!plain.has_compensation);
    assert_eq!(
        (plain.retry, plain.timeout),
        (RetryPolicy::default(), Timeout::None)
    );
    let spec = WorkflowSpec::new("w", OnFailure::Rollback, vec![step]);
    assert_eq!(
        (
            spec.name.as_str(),
            spec.on_failure,
            spec.max_concurrency,
            spec.steps.len()
        ),
        ("w", OnFailure::Rollback, 8, 1)
    );
    assert!(spec.attributes.is_empty());
    assert_eq!(spec.with_max_concurrency(2).max_concurrency, 2);
    assert_eq!(
        RetryPolicy::default().max_attempts,
        3,
        "the default retry policy tries three times"
    );
}

#[test]
fn both_failed_kinds_read_as_a_failure_and_keep_their_own_json_names() {
    let old = EventKind::Failed {
        error: "exited with code 75 (log: x)".into(),
        retryable: true,
    };
    let new = EventKind::AttemptFailed(AttemptFailure {
        fingerprint: 9,
        note: "the same failure repeated".into(),
        ..AttemptFailure::new(FailureClass::Signal("KILL".into()), "killed", true)
    });
    assert_eq!(old.failure().unwrap().class, FailureClass::Exit(75));
    assert_eq!(new.failure().unwrap().note, "the same failure repeated");
    assert_eq!(EventKind::Started.failure(), None);
    let old_json = serde_json::to_value(&old).unwrap();
    assert!(old_json.get("failed").is_some(), "{old_json}");
    let new_json = serde_json::to_value(&new).unwrap();
    assert_eq!(new_json["attempt_failed"]["class"], "signal:KILL");
    assert_eq!(serde_json::from_value::<EventKind>(new_json).unwrap(), new);
    // A kind as a PostgreSQL row written before classes holds it.
    let row = r#"{"failed":{"error":"exited with code 2 (log: x)","retryable":false}}"#;
    let read: EventKind = serde_json::from_str(row).unwrap();
    let failure = read.failure().unwrap();
    assert_eq!(
        (failure.class.name(), failure.retryable),
        ("exit:2".to_owned(), false)
    );
}
