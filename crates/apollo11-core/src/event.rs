//! The event record: one state transition of a run or of one of its steps.

use crate::{EventId, Payload, RunId, Seq, StepName};
use serde::{Deserialize, Serialize};

/// One immutable fact in the log. Only state transitions are events: no progress, no
/// heartbeats.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the store, assigned by the store on append.
    pub event_id: EventId,
    /// The run this event belongs to.
    pub run_id: RunId,
    /// Per-run sequence number, stated by the writer (optimistic concurrency).
    pub seq: Seq,
    /// The step, or `None` for run-level events.
    pub step: Option<StepName>,
    /// What happened.
    pub kind: EventKind,
    /// 1 for a step's first try, +1 for each new `Started`.
    pub attempt: u32,
    /// Wall-clock milliseconds since the Unix epoch, for display and timeouts only: ordering
    /// never uses it.
    pub at_ms: u64,
    /// The scheduler instance that wrote the event.
    pub instance: String,
    /// Data carried by the event (a step's output, a pinned definition, …).
    pub payload: Payload,
}

/// The kinds of event. `RunCreated` is run-level; every other kind names a step.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A run was created; its payload pins the workflow definition it will always use.
    RunCreated {
        /// Name of the workflow.
        workflow: String,
    },
    /// A step attempt started.
    Started,
    /// A step attempt succeeded; the payload is its output.
    Succeeded,
    /// A step attempt failed.
    Failed {
        /// What went wrong (`"timeout"` and `"interrupted"` are written by the engine).
        error: String,
        /// False when the error must not be retried.
        retryable: bool,
    },
    /// A step's compensation was started.
    Compensating,
    /// A step's compensation finished.
    Compensated,
    /// An operator set a step's state by hand.
    ManualOverride {
        /// The state the step is put in.
        to: OverrideTarget,
        /// Who did it.
        by: String,
        /// Why.
        reason: String,
    },
}

/// States an operator may put a step in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrideTarget {
    /// Treat the step as done, with no output.
    Succeeded,
    /// Treat the step as not needed; dependents may run.
    Skipped,
    /// Run the step again (its attempt counter is kept).
    Pending,
    /// Treat the step as terminally failed.
    Failed,
}

impl EventKind {
    /// Lower-case name of the kind, as shown to users.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::RunCreated { .. } => "run_created",
            EventKind::Started => "started",
            EventKind::Succeeded => "succeeded",
            EventKind::Failed { .. } => "failed",
            EventKind::Compensating => "compensating",
            EventKind::Compensated => "compensated",
            EventKind::ManualOverride { .. } => "manual_override",
        }
    }
}

impl OverrideTarget {
    /// Lower-case name of the target state.
    pub fn name(self) -> &'static str {
        match self {
            OverrideTarget::Succeeded => "succeeded",
            OverrideTarget::Skipped => "skipped",
            OverrideTarget::Pending => "pending",
            OverrideTarget::Failed => "failed",
        }
    }

    /// Parses a lower-case target name.
    pub fn parse(s: &str) -> Option<OverrideTarget> {
        [Self::Succeeded, Self::Skipped, Self::Pending, Self::Failed]
            .into_iter()
            .find(|t| t.name() == s)
    }
}
