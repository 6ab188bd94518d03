//! The step transition table, as one exhaustive `match` with no wildcard: adding a state or
//! an event kind does not compile until every pair is decided here. `docs/ARCHITECTURE.md`
//! mirrors this table. `Placed` records where the current try runs and changes no state,
//! and so does `AttemptUsage`, what it used, recorded just before its end;
//! `Interrupted` ends a try an engine left unfinished, like a failure that spends nothing.
//! `Skipped` says a step that has not started never will, or that a failed or compensated
//! one will not run again (its trigger rule no longer holds); `Expanded` ends the attempt
//! of a template step like a success (its output is the list of items); `Signalled` ends
//! the attempt of a waiting step like a success (its output is the signal's payload).
//! Run-level kinds (`RunCreated`, `RunPaused`, `RunResumed`,
//! `RollbackRequested`, `RerunRequested`) never name a step: one that does is an anomaly of that step.

use crate::StepStatus;
use apollo11_core::{EventKind, OverrideTarget};
use serde::{Deserialize, Serialize};

/// The row of the table that an event matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Rule {
    /// pending(n) + Started(n+1) → running(n+1)
    Start,
    /// running(a) + Succeeded(a) → succeeded
    Succeed,
    /// running(a) + Failed(a) (classified or logged before classes) → failed(a)
    Fail,
    /// failed(a) + Started(a+1) → running(a+1)
    Retry,
    /// failed(a) + Compensating(a) → compensating
    CompensateFailure,
    /// succeeded(a) + Compensating(a) → compensating
    CompensateSuccess,
    /// compensating(a) + Compensated(a) → compensated
    FinishCompensation,
    /// compensating(a) + CompensationTryFailed(a) or CompensationFailed(a) →
    /// compensation_failed
    FailCompensation,
    /// compensation_failed(a) + Compensating(a) → compensating (the next try)
    RetryCompensation,
    /// compensated(a) + Started(a+1) → running(a+1)
    Rerun,
    /// running(a) + Placed(a) → running(a), where the attempt runs recorded
    Place,
    /// compensating(a) + Placed(a) → compensating, where the try runs recorded
    PlaceCompensation,
    /// running(a) + AttemptUsage(a) → running(a), what the attempt used recorded
    Measure,
    /// compensating(a) + AttemptUsage(a) → compensating, what the try used recorded
    MeasureCompensation,
    /// running(a) + Interrupted(a) → failed(a), the attempt not spent
    Interrupt,
    /// compensating(a) + Interrupted(a) → compensation_failed, the try not spent
    InterruptCompensation,
    /// pending(n) + Skipped(n) → skipped: the step will not run
    Skip,
    /// failed(a) or compensated(a) + Skipped(a) → skipped: the step will not run again
    SkipRetry,
    /// running(a) + Expanded(a) → succeeded: a template step became its items
    Expand,
    /// running(a) + Signalled(a) → succeeded: a waiting step got its signal
    Signal,
    /// any + ManualOverride{to} → to, attempt kept
    Override,
    /// anything else → anomalous
    Anomaly,
    /// anomalous + anything but an override → anomalous (the first offence stays recorded)
    StayAnomalous,
}

impl Rule {
    /// Every row of the table.
    pub const ALL: [Rule; 23] = [
        Rule::Start,
        Rule::Succeed,
        Rule::Fail,
        Rule::Retry,
        Rule::CompensateFailure,
        Rule::CompensateSuccess,
        Rule::FinishCompensation,
        Rule::FailCompensation,
        Rule::RetryCompensation,
        Rule::Rerun,
        Rule::Place,
        Rule::PlaceCompensation,
        Rule::Measure,
        Rule::MeasureCompensation,
        Rule::Interrupt,
        Rule::InterruptCompensation,
        Rule::Skip,
        Rule::SkipRetry,
        Rule::Expand,
        Rule::Signal,
        Rule::Override,
        Rule::Anomaly,
        Rule::StayAnomalous,
    ];
}

/// Result of applying one event to one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transition {
    /// The row that matched.
    pub rule: Rule,
    /// The step's next state.
    pub next: StepStatus,
    /// The step's attempt counter after the event.
    pub attempt: u32,
}

/// Applies an event of `kind` carrying `event_attempt` to a step in `status` whose attempt
/// counter is `attempt`. Total: every input gives a transition, never a panic.
pub fn transition(
    status: StepStatus,
    attempt: u32,
    kind: &EventKind,
    event_attempt: u32,
) -> Transition {
    use EventKind as K;
    use StepStatus as S;
    let next_try = attempt.checked_add(1) == Some(event_attempt);
    let same_try = attempt == event_attempt;
    let (rule, next) = match (status, kind) {
        (S::Pending, K::Started) if next_try => (Rule::Start, S::Running),
        (S::Running, K::Succeeded) if same_try => (Rule::Succeed, S::Succeeded),
        (S::Running, K::AttemptFailed(_) | K::Failed { .. }) if same_try => (Rule::Fail, S::Failed),
        (S::Failed, K::Started) if next_try => (Rule::Retry, S::Running),
        (S::Failed, K::Compensating) if same_try => (Rule::CompensateFailure, S::Compensating),
        (S::Succeeded, K::Compensating) if same_try => (Rule::CompensateSuccess, S::Compensating),
        (S::Compensating, K::Compensated) if same_try => (Rule::FinishCompensation, S::Compensated),
        (S::Compensating, K::CompensationTryFailed(_) | K::CompensationFailed { .. })
            if same_try =>
        {
            (Rule::FailCompensation, S::CompensationFailed)
        }
        (S::CompensationFailed, K::Compensating) if same_try => {
            (Rule::RetryCompensation, S::Compensating)
        }
        (S::Compensated, K::Started) if next_try => (Rule::Rerun, S::Running),
        (S::Running, K::Placed { .. }) if same_try => (Rule::Place, S::Running),
        (S::Compensating, K::Placed { .. }) if same_try => {
            (Rule::PlaceCompensation, S::Compensating)
        }
        (S::Running, K::AttemptUsage(_)) if same_try => (Rule::Measure, S::Running),
        (S::Compensating, K::AttemptUsage(_)) if same_try => {
            (Rule::MeasureCompensation, S::Compensating)
        }
        (S::Running, K::Interrupted) if same_try => (Rule::Interrupt, S::Failed),
        (S::Compensating, K::Interrupted) if same_try => {
            (Rule::InterruptCompensation, S::CompensationFailed)
        }
        (S::Pending, K::Skipped { .. }) if same_try => (Rule::Skip, S::Skipped),
        (S::Failed | S::Compensated, K::Skipped { .. }) if same_try => {
            (Rule::SkipRetry, S::Skipped)
        }
        (S::Running, K::Expanded { .. }) if same_try => (Rule::Expand, S::Succeeded),
        (S::Running, K::Signalled { .. }) if same_try => (Rule::Signal, S::Succeeded),
        (
            S::Pending
            | S::Running
            | S::Succeeded
            | S::Failed
            | S::Compensating
            | S::CompensationFailed
            | S::Compensated
            | S::Skipped
            | S::Anomalous,
            K::ManualOverride { to, .. },
        ) => (Rule::Override, override_target(*to)),
        (
            S::Anomalous,
            K::RunCreated { .. }
            | K::Started
            | K::Succeeded
            | K::AttemptFailed(_)
            | K::Failed { .. }
            | K::Compensating
            | K::Compensated
            | K::CompensationFailed { .. }
            | K::CompensationTryFailed(_)
            | K::RunPaused { .. }
            | K::RunResumed { .. }
            | K::RollbackRequested { .. }
            | K::RerunRequested { .. }
            | K::Placed { .. }
            | K::Interrupted
            | K::Skipped { .. }
            | K::Expanded { .. }
            | K::Signalled { .. }
            | K::AttemptUsage(_),
        ) => (Rule::StayAnomalous, S::Anomalous),
        (
            S::Pending
            | S::Running
            | S::Succeeded
            | S::Failed
            | S::Compensating
            | S::CompensationFailed
            | S::Compensated
            | S::Skipped,
            K::RunCreated { .. }
            | K::Started
            | K::Succeeded
            | K::AttemptFailed(_)
            | K::Failed { .. }
            | K::Compensating
            | K::Compensated
            | K::CompensationFailed { .. }
            | K::CompensationTryFailed(_)
            | K::RunPaused { .. }
            | K::RunResumed { .. }
            | K::RollbackRequested { .. }
            | K::RerunRequested { .. }
            | K::Placed { .. }
            | K::Interrupted
            | K::Skipped { .. }
            | K::Expanded { .. }
            | K::Signalled { .. }
            | K::AttemptUsage(_),
        ) => (Rule::Anomaly, S::Anomalous),
    };
    let attempt = match rule {
        Rule::Start | Rule::Retry | Rule::Rerun => event_attempt,
        Rule::Succeed
        | Rule::Fail
        | Rule::CompensateFailure
        | Rule::CompensateSuccess
        | Rule::FinishCompensation
        | Rule::FailCompensation
        | Rule::RetryCompensation
        | Rule::Place
        | Rule::PlaceCompensation
        | Rule::Measure
        | Rule::MeasureCompensation
        | Rule::Interrupt
        | Rule::InterruptCompensation
        | Rule::Skip
        | Rule::SkipRetry
        | Rule::Expand
        | Rule::Signal
        | Rule::Override
        | Rule::Anomaly
        | Rule::StayAnomalous => attempt,
    };
    Transition {
        rule,
        next,
        attempt,
    }
}

fn override_target(to: OverrideTarget) -> StepStatus {
    match to {
        OverrideTarget::Succeeded => StepStatus::Succeeded,
        OverrideTarget::Skipped => StepStatus::Skipped,
        OverrideTarget::Pending => StepStatus::Pending,
        OverrideTarget::Failed => StepStatus::Failed,
    }
}
