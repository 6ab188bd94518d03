//! What a waiting step (`StepSpec::wait`) waits for, while it waits: for a front end to say
//! "waiting for a signal" or "timer until T", and to offer the signal.

use apollo11_core::{StepSpec, Timeout, Wait};
use apollo11_machine::{StepState, StepStatus};
use serde::Serialize;

/// A waiting step at its wait.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Waiting {
    /// `signal` (a signal or an approval ends it) or `timer`.
    pub r#for: &'static str,
    /// When its timer fires, ms since the epoch (a timer only).
    pub until: Option<u64>,
    /// When its deadline fails it with class `timeout`, ms since the epoch, if it has one.
    pub deadline: Option<u64>,
}

/// The wait of `step` (of definition `spec`), while it is at it.
pub(super) fn waiting(spec: &StepSpec, step: &StepState) -> Option<Waiting> {
    let wait = spec.wait?;
    let started = step
        .started_ms
        .filter(|_| step.status == StepStatus::Running)?;
    let deadline = match spec.timeout {
        Timeout::Fixed(ms) => Some(started.saturating_add(ms)),
        Timeout::None | Timeout::Auto { .. } => None,
    };
    Some(Waiting {
        r#for: match wait {
            Wait::Signal => "signal",
            Wait::After { .. } | Wait::Until { .. } => "timer",
        },
        until: wait.due_ms(started),
        deadline,
    })
}
