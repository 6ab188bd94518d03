//! Events as a front end shows them: every field, the kind's own fields flat beside them,
//! the payload as JSON when it is JSON.

use apollo11_core::{
    Event, EventId, EventKind, OverrideTarget, Payload, RunId, Seq, StepName, Usage,
};
use serde::Serialize;

/// One event (an element of `apollo11 events --json` and of the server's event routes).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct EventView {
    /// Its id.
    pub event_id: EventId,
    /// Its run.
    pub run_id: RunId,
    /// Its place in the run.
    pub seq: Seq,
    /// Its step, or none for a run-level event.
    pub step: Option<StepName>,
    /// [`EventKind::name`].
    pub kind: &'static str,
    /// The attempt it belongs to.
    pub attempt: u32,
    /// When it was written (ms since the epoch).
    pub at_ms: u64,
    /// Which writer wrote it.
    pub instance: String,
    /// What it carries.
    pub payload: PayloadView,
    /// The fields of its kind.
    #[serde(flatten)]
    pub detail: EventDetail,
}

/// The fields an event's kind carries, serialized flat beside the event's own. It grows
/// with [`EventKind`], exhaustive as it is: a front end shows every kind's fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum EventDetail {
    /// `run_created`.
    Created {
        /// The workflow.
        workflow: String,
    },
    /// `failed`, `compensation_failed`.
    Failure {
        /// What went wrong.
        error: String,
        /// False when trying again cannot help.
        retryable: bool,
        /// The failure's class (`exit:1`, `timeout`, an author's `transient`); none for a
        /// compensation's failure logged before they had one.
        #[serde(skip_serializing_if = "Option::is_none")]
        class: Option<String>,
        /// Why no attempt follows, when the retry policy stopped there (`the same failure
        /// repeated`), or the delay the next one gets as the step asked; omitted when empty.
        #[serde(skip_serializing_if = "String::is_empty")]
        note: String,
    },
    /// `manual_override`.
    Override {
        /// The state the step was put in.
        to: OverrideTarget,
        /// Who.
        by: String,
        /// Why.
        reason: String,
    },
    /// `run_paused`, `run_resumed`, `rollback_requested`, `signalled` (its data is the
    /// payload).
    Operator {
        /// Who.
        by: String,
        /// Why.
        reason: String,
    },
    /// `rerun_requested`: steps an operator asked to run again.
    Rerun {
        /// The set that runs again, in topological order.
        steps: Vec<String>,
        /// The steps of the set compensated first, in the order of their compensations.
        compensate: Vec<String>,
        /// Who.
        by: String,
        /// Why.
        reason: String,
    },
    /// `placed`: where a try runs.
    Placed {
        /// The host the try runs on.
        host: String,
        /// The step's own handle on it (for a shell step, its process group).
        handle: String,
    },
    /// `skipped`: why the step will not run.
    Skipped {
        /// Why.
        reason: String,
    },
    /// `expanded`: how many steps a template step became (the items are its payload).
    Expanded {
        /// How many items.
        items: u32,
    },
    /// `attempt_usage`: what a try used.
    Usage(Usage),
    /// Kinds with no fields of their own.
    None {},
}

/// A payload as shown: JSON when its bytes are JSON, text otherwise, a blob by reference.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum PayloadView {
    /// No payload (`null`).
    Empty,
    /// Inline bytes that are JSON.
    Json(serde_json::Value),
    /// Inline bytes that are not JSON, as text (invalid UTF-8 replaced).
    Text(String),
    /// A blob reference: `{"blob": sha256, "bytes": n}`.
    Blob {
        /// Its SHA-256, hex.
        blob: String,
        /// Its length.
        bytes: u64,
    },
}

/// A page of a run's events.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct EventPage {
    /// The events, in order.
    pub events: Vec<EventView>,
    /// The `after` of the next page; `None` when this one holds the last event.
    pub next_after: Option<EventId>,
}

impl EventPage {
    /// The events of `events` with id > `after`, at most `limit`.
    pub(crate) fn new(events: &[Event], after: EventId, limit: usize) -> EventPage {
        let mut rest = events.iter().filter(|e| e.event_id > after).peekable();
        let page: Vec<EventView> = rest.by_ref().take(limit).map(EventView::from).collect();
        let next_after = rest.peek().and(page.last()).map(|e| e.event_id);
        EventPage {
            events: page,
            next_after,
        }
    }
}

impl From<&Event> for EventView {
    fn from(e: &Event) -> EventView {
        EventView {
            event_id: e.event_id,
            run_id: e.run_id.clone(),
            seq: e.seq,
            step: e.step.clone(),
            kind: e.kind.name(),
            attempt: e.attempt,
            at_ms: e.at_ms,
            instance: e.instance.clone(),
            payload: PayloadView::from(&e.payload),
            detail: EventDetail::from(&e.kind),
        }
    }
}

impl From<&EventKind> for EventDetail {
    fn from(kind: &EventKind) -> EventDetail {
        let operator = |by: &String, reason: &String| EventDetail::Operator {
            by: by.clone(),
            reason: reason.clone(),
        };
        match kind {
            EventKind::RunCreated { workflow } => EventDetail::Created {
                workflow: workflow.clone(),
            },
            EventKind::AttemptFailed(_) | EventKind::Failed { .. } => {
                kind.failure()
                    .map_or(EventDetail::None {}, |f| EventDetail::Failure {
                        error: f.error.clone(),
                        retryable: f.retryable,
                        class: Some(f.class.name()),
                        note: f.note.clone(),
                    })
            }
            EventKind::CompensationFailed { error, retryable } => EventDetail::Failure {
                error: error.clone(),
                retryable: *retryable,
                class: None,
                note: String::new(),
            },
            EventKind::CompensationTryFailed(f) => EventDetail::Failure {
                error: f.error.clone(),
                retryable: f.retryable,
                class: Some(f.class.name()),
                note: f.note.clone(),
            },
            EventKind::ManualOverride { to, by, reason } => EventDetail::Override {
                to: *to,
                by: by.clone(),
                reason: reason.clone(),
            },
            EventKind::RunPaused { by, reason }
            | EventKind::RunResumed { by, reason }
            | EventKind::RollbackRequested { by, reason }
            | EventKind::Signalled { by, reason } => operator(by, reason),
            EventKind::Placed { host, handle } => EventDetail::Placed {
                host: host.clone(),
                handle: handle.clone(),
            },
            EventKind::Skipped { reason } => EventDetail::Skipped {
                reason: reason.clone(),
            },
            EventKind::Expanded { items } => EventDetail::Expanded { items: *items },
            EventKind::AttemptUsage(usage) => EventDetail::Usage(usage.clone()),
            EventKind::RerunRequested {
                steps,
                compensate,
                by,
                reason,
            } => EventDetail::Rerun {
                steps: steps.clone(),
                compensate: compensate.clone(),
                by: by.clone(),
                reason: reason.clone(),
            },
            EventKind::Started
            | EventKind::Succeeded
            | EventKind::Compensating
            | EventKind::Compensated
            | EventKind::Interrupted => EventDetail::None {},
        }
    }
}

impl From<&Payload> for PayloadView {
    fn from(p: &Payload) -> PayloadView {
        match p {
            Payload::Empty => PayloadView::Empty,
            Payload::Inline(bytes) => serde_json::from_slice(bytes).map_or_else(
                |_| PayloadView::Text(String::from_utf8_lossy(bytes).into_owned()),
                PayloadView::Json,
            ),
            Payload::Blob(b) => PayloadView::Blob {
                blob: b.sha256.clone(),
                bytes: b.bytes,
            },
        }
    }
}
