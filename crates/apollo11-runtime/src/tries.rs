//! What a try is: one attempt of a step, or one go of its compensation.

use apollo11_core::StepName;
use apollo11_machine::StepStatus;

/// Whether a try runs a step or undoes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TryKind {
    /// An attempt of the step's `run`.
    Run,
    /// A try of the step's `compensate`.
    Compensation,
}

impl TryKind {
    /// True for a try of a compensation.
    pub fn is_compensation(self) -> bool {
        self == TryKind::Compensation
    }

    /// The status a step is in while a try of this kind is its current one.
    pub(crate) fn status(self) -> StepStatus {
        match self {
            TryKind::Run => StepStatus::Running,
            TryKind::Compensation => StepStatus::Compensating,
        }
    }
}

/// One try of a step: which step, which attempt (for a compensation, the attempt it undoes)
/// and of what kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Try {
    /// The step.
    pub step: StepName,
    /// The attempt.
    pub attempt: u32,
    /// A run or a compensation.
    pub kind: TryKind,
}

impl Try {
    /// The try of `kind` of `step`'s attempt `attempt`.
    pub(crate) fn of(step: &StepName, attempt: u32, kind: TryKind) -> Try {
        Try {
            step: step.clone(),
            attempt,
            kind,
        }
    }
}
