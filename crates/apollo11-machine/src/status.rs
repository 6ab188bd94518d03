//! The states a step can be in.

use serde::{Deserialize, Serialize};
use std::fmt;

/// State of one step. `Running`, `Failed` and `Compensated` carry their attempt number in
/// [`crate::StepState::attempt`].
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepStatus {
    /// Not started (or put back by an operator).
    #[default]
    Pending,
    /// An attempt is under way.
    Running,
    /// Done.
    Succeeded,
    /// The last attempt failed.
    Failed,
    /// Its compensation is under way.
    Compensating,
    /// A try of its compensation failed: it waits for the next try (after the step's backoff)
    /// or, with no try left, for an operator. Nothing is under way.
    CompensationFailed,
    /// Its compensation finished.
    Compensated,
    /// An operator decided it is not needed.
    Skipped,
    /// An event broke the transition table; only a manual override leaves this state.
    Anomalous,
}

impl StepStatus {
    /// Every state, in declaration order.
    pub const ALL: [StepStatus; 9] = [
        StepStatus::Pending,
        StepStatus::Running,
        StepStatus::Succeeded,
        StepStatus::Failed,
        StepStatus::Compensating,
        StepStatus::CompensationFailed,
        StepStatus::Compensated,
        StepStatus::Skipped,
        StepStatus::Anomalous,
    ];

    /// Lower-case name, as shown to users.
    pub fn name(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::Running => "running",
            StepStatus::Succeeded => "succeeded",
            StepStatus::Failed => "failed",
            StepStatus::Compensating => "compensating",
            StepStatus::CompensationFailed => "compensation_failed",
            StepStatus::Compensated => "compensated",
            StepStatus::Skipped => "skipped",
            StepStatus::Anomalous => "anomalous",
        }
    }

    /// The state of a name given by [`StepStatus::name`].
    pub fn parse(name: &str) -> Option<StepStatus> {
        StepStatus::ALL.into_iter().find(|s| s.name() == name)
    }

    /// True when dependents of a step in this state may run.
    pub fn satisfies_dependents(self) -> bool {
        matches!(self, StepStatus::Succeeded | StepStatus::Skipped)
    }

    /// True while work (the step or its compensation) is under way.
    pub fn is_busy(self) -> bool {
        matches!(self, StepStatus::Running | StepStatus::Compensating)
    }
}

impl fmt::Display for StepStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
