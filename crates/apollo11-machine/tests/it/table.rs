//! The transition table, pair by pair: every (state, event kind) combination is applied and
//! its outcome checked against the table in docs/ARCHITECTURE.md, and every row must be reached.

use apollo11_core::{AttemptFailure, EventKind, FailureClass, OverrideTarget, Usage};
use apollo11_machine::{transition, Rule, StepStatus};
use std::collections::BTreeSet;

fn kinds() -> Vec<EventKind> {
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
        EventKind::AttemptFailed(AttemptFailure::new(FailureClass::Exit(1), "e", true)),
        EventKind::Compensating,
        EventKind::Compensated,
        EventKind::ManualOverride {
            to: OverrideTarget::Skipped,
            by: "op".into(),
            reason: "r".into(),
        },
        EventKind::CompensationFailed {
            error: "e".into(),
            retryable: true,
        },
        // Run-level kinds that name a step: anomalies of that step.
        EventKind::RunPaused {
            by: "op".into(),
            reason: "r".into(),
        },
        EventKind::RunResumed {
            by: "op".into(),
            reason: "r".into(),
        },
        EventKind::RollbackRequested {
            by: "op".into(),
            reason: "r".into(),
        },
        EventKind::Placed {
            host: "h".into(),
            handle: "pgid 7".into(),
        },
        EventKind::Interrupted,
        EventKind::Skipped { reason: "r".into() },
        EventKind::Expanded { items: 3 },
        EventKind::Signalled {
            by: "op".into(),
            reason: "r".into(),
        },
        used(),
    ]
}

fn used() -> EventKind {
    EventKind::AttemptUsage(Usage {
        isolation: "cgroup".into(),
        wall_ms: 10,
        ..Usage::default()
    })
}

/// The expected (rule, next state) for a step at attempt 2, with the event's attempt being
/// the right one for the pair (3 for `Started`, 2 otherwise).
fn expected(status: StepStatus, kind: &EventKind) -> (Rule, StepStatus) {
    use StepStatus as S;
    match (status, kind) {
        (_, EventKind::ManualOverride { .. }) => (Rule::Override, S::Skipped),
        (S::Anomalous, _) => (Rule::StayAnomalous, S::Anomalous),
        (S::Pending, EventKind::Started) => (Rule::Start, S::Running),
        (S::Running, EventKind::Succeeded) => (Rule::Succeed, S::Succeeded),
        (S::Running, EventKind::AttemptFailed(_) | EventKind::Failed { .. }) => {
            (Rule::Fail, S::Failed)
        }
        (S::Failed, EventKind::Started) => (Rule::Retry, S::Running),
        (S::Failed, EventKind::Compensating) => (Rule::CompensateFailure, S::Compensating),
        (S::Succeeded, EventKind::Compensating) => (Rule::CompensateSuccess, S::Compensating),
        (S::Compensating, EventKind::Compensated) => (Rule::FinishCompensation, S::Compensated),
        (S::Compensating, EventKind::CompensationFailed { .. }) => {
            (Rule::FailCompensation, S::CompensationFailed)
        }
        (S::CompensationFailed, EventKind::Compensating) => {
            (Rule::RetryCompensation, S::Compensating)
        }
        (S::Compensated, EventKind::Started) => (Rule::Rerun, S::Running),
        (S::Running, EventKind::Placed { .. }) => (Rule::Place, S::Running),
        (S::Compensating, EventKind::Placed { .. }) => (Rule::PlaceCompensation, S::Compensating),
        (S::Running, EventKind::AttemptUsage(_)) => (Rule::Measure, S::Running),
        (S::Compensating, EventKind::AttemptUsage(_)) => {
            (Rule::MeasureCompensation, S::Compensating)
        }
        (S::Running, EventKind::Interrupted) => (Rule::Interrupt, S::Failed),
        (S::Compensating, EventKind::Interrupted) => {
            (Rule::InterruptCompensation, S::CompensationFailed)
        }
        (S::Pending, EventKind::Skipped { .. }) => (Rule::Skip, S::Skipped),
        (S::Failed | S::Compensated, EventKind::Skipped { .. }) => (Rule::SkipRetry, S::Skipped),
        (S::Running, EventKind::Expanded { .. }) => (Rule::Expand, S::Succeeded),
        (S::Running, EventKind::Signalled { .. }) => (Rule::Signal, S::Succeeded),
        _ => (Rule::Anomaly, S::Anomalous),
    }
}

#[test]
fn every_pair_of_the_table_gives_the_designed_outcome() {
    let mut reached = BTreeSet::new();
    for status in StepStatus::ALL {
        for kind in kinds() {
            let right_attempt = if kind == EventKind::Started { 3 } else { 2 };
            let t = transition(status, 2, &kind, right_attempt);
            assert_eq!(
                (t.rule, t.next),
                expected(status, &kind),
                "{status} + {}",
                kind.name()
            );
            let attempt = if matches!(t.rule, Rule::Start | Rule::Retry | Rule::Rerun) {
                3
            } else {
                2
            };
            assert_eq!(t.attempt, attempt, "{status} + {}: attempt", kind.name());
            reached.insert(t.rule);
        }
    }
    let missing: Vec<Rule> = Rule::ALL
        .into_iter()
        .filter(|r| !reached.contains(r))
        .collect();
    assert!(
        missing.is_empty(),
        "rows of the table never exercised: {missing:?}"
    );
}

#[test]
fn a_wrong_attempt_number_is_an_anomaly_even_on_an_allowed_transition() {
    for (status, kind, wrong) in [
        (StepStatus::Pending, EventKind::Started, 2),
        (StepStatus::Running, EventKind::Succeeded, 3),
        (
            StepStatus::Running,
            EventKind::Failed {
                error: "e".into(),
                retryable: true,
            },
            1,
        ),
        (
            StepStatus::Running,
            EventKind::AttemptFailed(AttemptFailure::new(FailureClass::Spawn, "e", true)),
            1,
        ),
        (StepStatus::Failed, EventKind::Started, 2),
        (StepStatus::Failed, EventKind::Compensating, 3),
        (StepStatus::Succeeded, EventKind::Compensating, 1),
        (StepStatus::Compensating, EventKind::Compensated, 3),
        (
            StepStatus::Compensating,
            EventKind::CompensationFailed {
                error: "e".into(),
                retryable: true,
            },
            1,
        ),
        (StepStatus::CompensationFailed, EventKind::Compensating, 3),
        (StepStatus::Compensated, EventKind::Started, 5),
        (
            StepStatus::Running,
            EventKind::Placed {
                host: "h".into(),
                handle: "pgid 7".into(),
            },
            1,
        ),
        (
            StepStatus::Compensating,
            EventKind::Placed {
                host: "h".into(),
                handle: "pgid 7".into(),
            },
            3,
        ),
        (
            StepStatus::Pending,
            EventKind::Skipped { reason: "r".into() },
            1,
        ),
        (
            StepStatus::Failed,
            EventKind::Skipped { reason: "r".into() },
            3,
        ),
        (
            StepStatus::Compensated,
            EventKind::Skipped { reason: "r".into() },
            1,
        ),
        (StepStatus::Running, EventKind::Expanded { items: 1 }, 3),
        (StepStatus::Running, used(), 1),
        (StepStatus::Compensating, used(), 3),
    ] {
        let attempt_now = if status == StepStatus::Pending { 0 } else { 2 };
        let t = transition(status, attempt_now, &kind, wrong);
        assert_eq!(
            (t.rule, t.next),
            (Rule::Anomaly, StepStatus::Anomalous),
            "{status} + {kind:?}"
        );
        assert_eq!(
            t.attempt, attempt_now,
            "an anomaly keeps the attempt counter"
        );
    }
}

#[test]
fn attempt_counter_at_its_maximum_does_not_overflow() {
    let t = transition(StepStatus::Failed, u32::MAX, &EventKind::Started, 0);
    assert_eq!(t.rule, Rule::Anomaly);
}
