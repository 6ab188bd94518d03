//! The event record: one state transition of a run or of one of its steps.

use crate::{AttemptFailure, EventId, Payload, PayloadRef, RunId, Seq, StepName, Usage};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

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

/// An [`Event`] borrowed from the bytes it was decoded from: it decodes from the encoding of
/// an `Event` without copying its strings or inline payload, so reading a log back for a fold
/// allocates nothing per event (but for the rare kinds that carry text).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct EventRef<'a> {
    /// Position in the store.
    pub event_id: EventId,
    /// The run this event belongs to.
    pub run_id: &'a str,
    /// Per-run sequence number.
    pub seq: Seq,
    /// The step, or `None` for run-level events.
    #[serde(borrow)]
    pub step: Option<&'a str>,
    /// What happened.
    pub kind: EventKind,
    /// 1 for a step's first try, +1 for each new `Started`.
    pub attempt: u32,
    /// Wall-clock milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The scheduler instance that wrote the event.
    pub instance: &'a str,
    /// Data carried by the event.
    #[serde(borrow)]
    pub payload: PayloadRef<'a>,
}

impl Event {
    /// An event of run `run_id` at `seq`: for `step`, or for the run with `None` (run-level
    /// kinds). It starts with event id 0 (a store assigns ids on append), attempt 0, time 0,
    /// no instance and no payload; the `with_*` methods set them.
    pub fn new(run_id: &str, seq: Seq, step: Option<&str>, kind: EventKind) -> Event {
        Event {
            event_id: EventId(0),
            run_id: RunId::from(run_id),
            seq,
            step: step.map(StepName::from),
            kind,
            attempt: 0,
            at_ms: 0,
            instance: String::new(),
            payload: Payload::Empty,
        }
    }

    /// The event with this id.
    pub fn with_event_id(mut self, event_id: EventId) -> Event {
        self.event_id = event_id;
        self
    }

    /// The event with this attempt number.
    pub fn with_attempt(mut self, attempt: u32) -> Event {
        self.attempt = attempt;
        self
    }

    /// The event at this wall-clock time (milliseconds since the Unix epoch).
    pub fn with_at_ms(mut self, at_ms: u64) -> Event {
        self.at_ms = at_ms;
        self
    }

    /// The event written by this scheduler instance.
    pub fn with_instance(mut self, instance: &str) -> Event {
        self.instance = instance.to_owned();
        self
    }

    /// The event carrying this payload.
    pub fn with_payload(mut self, payload: Payload) -> Event {
        self.payload = payload;
        self
    }

    /// The event, borrowed.
    pub fn view(&self) -> EventRef<'_> {
        EventRef {
            event_id: self.event_id,
            run_id: self.run_id.as_str(),
            seq: self.seq,
            step: self.step.as_ref().map(StepName::as_str),
            kind: self.kind.clone(),
            attempt: self.attempt,
            at_ms: self.at_ms,
            instance: &self.instance,
            payload: self.payload.view(),
        }
    }
}

impl EventRef<'_> {
    /// The event, owned.
    pub fn to_event(&self) -> Event {
        Event {
            event_id: self.event_id,
            run_id: RunId(self.run_id.to_owned()),
            seq: self.seq,
            step: self.step.map(|s| StepName(s.to_owned())),
            kind: self.kind.clone(),
            attempt: self.attempt,
            at_ms: self.at_ms,
            instance: self.instance.to_owned(),
            payload: self.payload.to_payload(),
        }
    }
}

/// The kinds of event. `RunCreated`, `RunPaused`, `RunResumed`, `RollbackRequested` and
/// `RerunRequested` are run-level (no step); every other kind names a step.
///
/// The log encodes a kind by its position in this list: new kinds go at the end, so logs
/// written before them still decode to the same kinds.
///
/// Not `#[non_exhaustive]`, on purpose: the machine's transition table is one exhaustive
/// `match (state, kind)`, so that a new kind does not compile until every state has its row;
/// a wildcard arm, which `#[non_exhaustive]` would force on it, would decide new pairs
/// silently.
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
    /// A step attempt failed, as logs written before failure classes existed record it:
    /// engines now write [`EventKind::AttemptFailed`], and read this one as a failure of
    /// the class its text gives ([`AttemptFailure::legacy`]). Read both through
    /// [`EventKind::failure`].
    Failed {
        /// What went wrong (`"timeout"` was written by the engine; so was `"interrupted"`
        /// before [`EventKind::Interrupted`] existed, and such a failure still counts as an
        /// attempt).
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
    /// One try of a step's compensation failed; it is retried per the step's retry policy,
    /// and once no try is left (or the error is not retryable) the run waits for a person.
    /// Engines now write [`EventKind::CompensationTryFailed`], with the failure's class and
    /// the delay it asked for.
    CompensationFailed {
        /// What went wrong (`"interrupted"` in logs written before [`EventKind::Interrupted`]
        /// existed, when a dead scheduler left the try unfinished: such a try still counts).
        error: String,
        /// False when trying the compensation again cannot help.
        retryable: bool,
    },
    /// Run-level: an operator paused the run. It starts nothing new; what is running
    /// finishes.
    RunPaused {
        /// Who did it.
        by: String,
        /// Why.
        reason: String,
    },
    /// Run-level: an operator lifted their pause.
    RunResumed {
        /// Who did it.
        by: String,
        /// Why.
        reason: String,
    },
    /// Run-level: an operator asked the run to roll back, as if a step had failed for good
    /// with `on_failure = "rollback"`.
    RollbackRequested {
        /// Who did it.
        by: String,
        /// Why.
        reason: String,
    },
    /// Where the step's current attempt (or compensation try) runs, recorded once it has
    /// started and before it does its work, so that a later engine can find what a dead one
    /// left running, stop it, and salvage its last marker. Both fields are the step's own:
    /// the engine only records them and hands them back. The payload, if any, says what
    /// runs there in the step's own words (a shell step: its command as run and its folder).
    Placed {
        /// The machine (or cluster, or service) the work runs on.
        host: String,
        /// What finds the work there (for a shell step: its process group and boot).
        handle: String,
    },
    /// The step's current attempt (or compensation try) was left unfinished by an engine
    /// that stopped (a crash, a kill): the try ends, but it is not the step's failure, so it
    /// spends none of the step's attempts or compensation tries. The payload is the marker
    /// the step salvaged from the try, if any.
    Interrupted,
    /// The step will not run: its condition is false, or its trigger rule can no longer
    /// hold (a `one_failed` step none of whose dependencies failed).
    Skipped {
        /// Why, naming the condition or the rule.
        reason: String,
    },
    /// A template step (a `for_each` over a dependency's output) was expanded at run time
    /// into one step per item; the payload is the JSON array of the items. The step counts
    /// as succeeded for its dependents.
    Expanded {
        /// How many items the array holds.
        items: u32,
    },
    /// A step attempt failed: its class, its error, its fingerprint, and why the engine
    /// will not retry it when its policy stops there. The payload is the marker a
    /// `checkpoint` step left for its next attempt, if any. Named `attempt_failed` in JSON.
    AttemptFailed(AttemptFailure),
    /// Run-level: an operator asked steps that ran to run again. The steps of `compensate`
    /// (succeeded, with a compensation) are compensated first, in reverse topological
    /// order; then every step of `steps` runs again with a fresh budget of attempts. It
    /// calls off a rollback the run finished.
    RerunRequested {
        /// The set that runs again: the step asked for first, then its downstream steps when
        /// they were asked for too, in topological order.
        steps: Vec<String>,
        /// The steps of the set compensated before it runs again.
        compensate: Vec<String>,
        /// Who did it.
        by: String,
        /// Why.
        reason: String,
    },
    /// An operator's signal (or approval) to a waiting step: its attempt succeeds, and the
    /// payload, the signal's JSON, is its output.
    Signalled {
        /// Who sent it.
        by: String,
        /// Why.
        reason: String,
    },
    /// What the step's current attempt (or compensation try) used, recorded just before
    /// the event that ends it, in the same append; it changes no state, as `Placed`. The
    /// memory limit it carries is what a retry after an `oom` grows. Named
    /// `attempt_usage` in JSON.
    AttemptUsage(Usage),
    /// One try of a step's compensation failed, as engines now record it: its class, its
    /// error, its fingerprint, the delay before the next try it asked for and the engine's
    /// note on it. Read with [`EventKind::CompensationFailed`], written by older engines,
    /// through [`EventKind::compensation_failure`]; both are `compensation_failed` to
    /// users (named `compensation_try_failed` in this enum's own JSON).
    CompensationTryFailed(AttemptFailure),
}

/// States an operator may put a step in. Not `#[non_exhaustive]`: the transition table
/// maps every target to a state in an exhaustive match (see [`EventKind`]).
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

/// The kind of an event without its fields: what a state records about an event it
/// refused, and a name to show. Serializes as [`KindTag::name`]. It grows with
/// [`EventKind`], exhaustive as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KindTag {
    /// [`EventKind::RunCreated`].
    RunCreated,
    /// [`EventKind::Started`].
    Started,
    /// [`EventKind::Succeeded`].
    Succeeded,
    /// [`EventKind::AttemptFailed`] and [`EventKind::Failed`] alike.
    Failed,
    /// [`EventKind::Compensating`].
    Compensating,
    /// [`EventKind::Compensated`].
    Compensated,
    /// [`EventKind::ManualOverride`].
    ManualOverride,
    /// [`EventKind::CompensationTryFailed`] and [`EventKind::CompensationFailed`] alike.
    CompensationFailed,
    /// [`EventKind::RunPaused`].
    RunPaused,
    /// [`EventKind::RunResumed`].
    RunResumed,
    /// [`EventKind::RollbackRequested`].
    RollbackRequested,
    /// [`EventKind::Placed`].
    Placed,
    /// [`EventKind::Interrupted`].
    Interrupted,
    /// [`EventKind::Skipped`].
    Skipped,
    /// [`EventKind::Expanded`].
    Expanded,
    /// [`EventKind::RerunRequested`].
    RerunRequested,
    /// [`EventKind::Signalled`].
    Signalled,
    /// [`EventKind::AttemptUsage`].
    AttemptUsage,
}

impl KindTag {
    /// Lower-case name, as shown to users and written in JSON.
    pub fn name(self) -> &'static str {
        match self {
            KindTag::RunCreated => "run_created",
            KindTag::Started => "started",
            KindTag::Succeeded => "succeeded",
            KindTag::Failed => "failed",
            KindTag::Compensating => "compensating",
            KindTag::Compensated => "compensated",
            KindTag::ManualOverride => "manual_override",
            KindTag::CompensationFailed => "compensation_failed",
            KindTag::RunPaused => "run_paused",
            KindTag::RunResumed => "run_resumed",
            KindTag::RollbackRequested => "rollback_requested",
            KindTag::Placed => "placed",
            KindTag::Interrupted => "interrupted",
            KindTag::Skipped => "skipped",
            KindTag::Expanded => "expanded",
            KindTag::RerunRequested => "rerun_requested",
            KindTag::Signalled => "signalled",
            KindTag::AttemptUsage => "attempt_usage",
        }
    }

    /// True for the kinds that concern the run as a whole and name no step.
    pub fn is_run_level(self) -> bool {
        match self {
            KindTag::RunCreated
            | KindTag::RunPaused
            | KindTag::RunResumed
            | KindTag::RollbackRequested
            | KindTag::RerunRequested => true,
            KindTag::Started
            | KindTag::Succeeded
            | KindTag::Failed
            | KindTag::Compensating
            | KindTag::Compensated
            | KindTag::ManualOverride
            | KindTag::CompensationFailed
            | KindTag::Placed
            | KindTag::Interrupted
            | KindTag::Skipped
            | KindTag::Expanded
            | KindTag::Signalled
            | KindTag::AttemptUsage => false,
        }
    }
}

impl fmt::Display for KindTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl EventKind {
    /// The kind without its fields.
    pub fn tag(&self) -> KindTag {
        match self {
            EventKind::RunCreated { .. } => KindTag::RunCreated,
            EventKind::Started => KindTag::Started,
            EventKind::Succeeded => KindTag::Succeeded,
            EventKind::AttemptFailed(_) | EventKind::Failed { .. } => KindTag::Failed,
            EventKind::Compensating => KindTag::Compensating,
            EventKind::Compensated => KindTag::Compensated,
            EventKind::ManualOverride { .. } => KindTag::ManualOverride,
            EventKind::CompensationFailed { .. } | EventKind::CompensationTryFailed(_) => {
                KindTag::CompensationFailed
            }
            EventKind::RunPaused { .. } => KindTag::RunPaused,
            EventKind::RunResumed { .. } => KindTag::RunResumed,
            EventKind::RollbackRequested { .. } => KindTag::RollbackRequested,
            EventKind::Placed { .. } => KindTag::Placed,
            EventKind::Interrupted => KindTag::Interrupted,
            EventKind::Skipped { .. } => KindTag::Skipped,
            EventKind::Expanded { .. } => KindTag::Expanded,
            EventKind::RerunRequested { .. } => KindTag::RerunRequested,
            EventKind::Signalled { .. } => KindTag::Signalled,
            EventKind::AttemptUsage(_) => KindTag::AttemptUsage,
        }
    }

    /// The failure of a `Failed` event, old or new (an old one's class read from its text);
    /// `None` for every other kind.
    pub fn failure(&self) -> Option<Cow<'_, AttemptFailure>> {
        match self {
            EventKind::AttemptFailed(failure) => Some(Cow::Borrowed(failure)),
            EventKind::Failed { error, retryable } => {
                Some(Cow::Owned(AttemptFailure::legacy(error, *retryable)))
            }
            _ => None,
        }
    }

    /// The failure of a compensation's try, old or new (an old one's class read from its
    /// text); `None` for every other kind.
    pub fn compensation_failure(&self) -> Option<Cow<'_, AttemptFailure>> {
        match self {
            EventKind::CompensationTryFailed(failure) => Some(Cow::Borrowed(failure)),
            EventKind::CompensationFailed { error, retryable } => {
                Some(Cow::Owned(AttemptFailure::legacy(error, *retryable)))
            }
            _ => None,
        }
    }

    /// Lower-case name of the kind, as shown to users.
    pub fn name(&self) -> &'static str {
        self.tag().name()
    }

    /// True for the kinds that concern the run as a whole and name no step.
    pub fn is_run_level(&self) -> bool {
        self.tag().is_run_level()
    }
}

impl OverrideTarget {
    /// Every target, in declaration order.
    pub const ALL: [OverrideTarget; 4] = [
        OverrideTarget::Succeeded,
        OverrideTarget::Skipped,
        OverrideTarget::Pending,
        OverrideTarget::Failed,
    ];

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
        Self::ALL.into_iter().find(|t| t.name() == s)
    }
}
