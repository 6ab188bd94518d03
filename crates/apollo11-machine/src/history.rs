//! A builder of event histories: the events of one run, with consecutive seqs and event
//! ids and the attempt numbers a correct scheduler writes, for tests, examples, replays and
//! tools that need a history without a store.

use apollo11_core::{
    AttemptFailure, Event, EventId, EventKind, FailureClass, OverrideTarget, Payload, RunId, Seq,
    StepName, Usage, Value,
};
use std::collections::BTreeMap;

/// Builds the events of one run with consecutive seqs and event ids. Attempts are tracked
/// per step the way a correct scheduler would write them; `raw` writes anything.
#[derive(Clone, Debug)]
pub struct History {
    run_id: RunId,
    events: Vec<Event>,
    attempts: BTreeMap<String, u32>,
    at_ms: u64,
    first_event_id: u64,
}

impl History {
    /// A history for `run_id` whose first event gets id 1 and time 1,000 ms.
    pub fn new(run_id: &str) -> History {
        History {
            run_id: RunId::from(run_id),
            events: Vec::new(),
            attempts: BTreeMap::new(),
            at_ms: 1_000,
            first_event_id: 1,
        }
    }

    /// Event ids start at `id` (runs interleaved in one store do not start at 1).
    pub fn first_event_id(mut self, id: u64) -> History {
        self.first_event_id = id;
        self
    }

    /// Sets the clock for the next event.
    pub fn at(mut self, ms: u64) -> History {
        self.at_ms = ms;
        self
    }

    /// Moves the clock forward.
    pub fn wait(mut self, ms: u64) -> History {
        self.at_ms += ms;
        self
    }

    /// `RunCreated` of `workflow`, pinning `definition` (the `WorkflowSpec`'s JSON, as the
    /// runtime writes it, or anything a test needs).
    pub fn created(self, workflow: &str, definition: Payload) -> History {
        let kind = EventKind::RunCreated {
            workflow: workflow.to_owned(),
        };
        self.raw(None, kind, 0, definition)
    }

    /// `Started` of the step's next attempt.
    pub fn started(mut self, step: &str) -> History {
        let attempt = self.attempts.entry(step.to_owned()).or_default();
        *attempt += 1;
        let attempt = *attempt;
        self.raw(Some(step), EventKind::Started, attempt, Payload::Empty)
    }

    /// `Succeeded` of the step's current attempt, with `output` as its payload.
    pub fn succeeded(self, step: &str, output: &str) -> History {
        let attempt = self.attempt(step);
        self.raw(
            Some(step),
            EventKind::Succeeded,
            attempt,
            Payload::inline(output),
        )
    }

    /// `Failed` of the step's current attempt, of class `error` (see
    /// [`History::failed_with`]).
    pub fn failed(self, step: &str, error: &str, retryable: bool) -> History {
        let failure = AttemptFailure::new(FailureClass::Error, error, retryable);
        self.failed_with(step, failure)
    }

    /// `Failed` of the step's current attempt, recording `failure`.
    pub fn failed_with(self, step: &str, failure: AttemptFailure) -> History {
        let attempt = self.attempt(step);
        self.raw(
            Some(step),
            EventKind::AttemptFailed(failure),
            attempt,
            Payload::Empty,
        )
    }

    /// `Failed` as logs written before failure classes recorded it.
    pub fn failed_legacy(self, step: &str, error: &str, retryable: bool) -> History {
        let attempt = self.attempt(step);
        let kind = EventKind::Failed {
            error: error.to_owned(),
            retryable,
        };
        self.raw(Some(step), kind, attempt, Payload::Empty)
    }

    /// `Compensating`: a try of the step's compensation starts.
    pub fn compensating(self, step: &str) -> History {
        let attempt = self.attempt(step);
        self.raw(Some(step), EventKind::Compensating, attempt, Payload::Empty)
    }

    /// `Compensated`: the step's compensation finished.
    pub fn compensated(self, step: &str) -> History {
        let attempt = self.attempt(step);
        self.raw(Some(step), EventKind::Compensated, attempt, Payload::Empty)
    }

    /// `CompensationFailed`: a try of the step's compensation failed.
    pub fn compensation_failed(self, step: &str, error: &str, retryable: bool) -> History {
        let attempt = self.attempt(step);
        let kind = EventKind::CompensationFailed {
            error: error.to_owned(),
            retryable,
        };
        self.raw(Some(step), kind, attempt, Payload::Empty)
    }

    /// `CompensationTryFailed`: a try of the step's compensation failed, recording
    /// `failure`.
    pub fn compensation_failed_with(self, step: &str, failure: AttemptFailure) -> History {
        let attempt = self.attempt(step);
        let kind = EventKind::CompensationTryFailed(failure);
        self.raw(Some(step), kind, attempt, Payload::Empty)
    }

    /// `ManualOverride` of the step, by `by`, for `reason`.
    pub fn overridden(self, step: &str, to: OverrideTarget, by: &str, reason: &str) -> History {
        let attempt = self.attempt(step);
        let kind = EventKind::ManualOverride {
            to,
            by: by.to_owned(),
            reason: reason.to_owned(),
        };
        self.raw(Some(step), kind, attempt, Payload::Empty)
    }

    /// `Placed`: where the step's current attempt (or compensation try) runs.
    pub fn placed(self, step: &str, host: &str, handle: &str) -> History {
        let attempt = self.attempt(step);
        let kind = EventKind::Placed {
            host: host.to_owned(),
            handle: handle.to_owned(),
        };
        self.raw(Some(step), kind, attempt, Payload::Empty)
    }

    /// `AttemptUsage`: what the step's current attempt (or compensation try) used.
    pub fn used(self, step: &str, usage: Usage) -> History {
        let attempt = self.attempt(step);
        self.raw(
            Some(step),
            EventKind::AttemptUsage(usage),
            attempt,
            Payload::Empty,
        )
    }

    /// `Interrupted`: an engine left the step's current attempt (or compensation try)
    /// unfinished.
    pub fn interrupted(self, step: &str) -> History {
        let attempt = self.attempt(step);
        self.raw(Some(step), EventKind::Interrupted, attempt, Payload::Empty)
    }

    /// `Skipped` at the step's current attempt: the step will not run (again).
    pub fn skipped(self, step: &str, reason: &str) -> History {
        let attempt = self.attempt(step);
        let kind = EventKind::Skipped {
            reason: reason.to_owned(),
        };
        self.raw(Some(step), kind, attempt, Payload::Empty)
    }

    /// `Expanded` of the template step's current attempt into `items`, carried as the JSON
    /// array the runtime records.
    pub fn expanded(self, step: &str, items: &[&str]) -> History {
        let attempt = self.attempt(step);
        let array = Value::Array(items.iter().map(|&item| Value::from(item)).collect());
        let kind = EventKind::Expanded {
            items: items.len() as u32,
        };
        let payload = Payload::inline(array.to_string());
        self.raw(Some(step), kind, attempt, payload)
    }

    /// An operator's `RunPaused`.
    pub fn paused(self, by: &str, reason: &str) -> History {
        let kind = EventKind::RunPaused {
            by: by.to_owned(),
            reason: reason.to_owned(),
        };
        self.raw(None, kind, 0, Payload::Empty)
    }

    /// An operator's `RunResumed`.
    pub fn resumed(self, by: &str, reason: &str) -> History {
        let kind = EventKind::RunResumed {
            by: by.to_owned(),
            reason: reason.to_owned(),
        };
        self.raw(None, kind, 0, Payload::Empty)
    }

    /// An operator's `RollbackRequested`.
    pub fn rollback_requested(self, by: &str, reason: &str) -> History {
        let kind = EventKind::RollbackRequested {
            by: by.to_owned(),
            reason: reason.to_owned(),
        };
        self.raw(None, kind, 0, Payload::Empty)
    }

    /// Appends any event, valid or not, with the next seq and event id, at the clock's time;
    /// the clock then moves 10 ms.
    pub fn raw(
        mut self,
        step: Option<&str>,
        kind: EventKind,
        attempt: u32,
        payload: Payload,
    ) -> History {
        let n = self.events.len() as u64;
        self.events.push(Event {
            event_id: EventId(self.first_event_id + n),
            run_id: self.run_id.clone(),
            seq: Seq(n as u32 + 1),
            step: step.map(StepName::from),
            kind,
            attempt,
            at_ms: self.at_ms,
            instance: "test".to_owned(),
            payload,
        });
        self.at_ms += 10;
        self
    }

    /// The step's current attempt, as the next event of its try carries it.
    pub fn attempt(&self, step: &str) -> u32 {
        self.attempts.get(step).copied().unwrap_or(0)
    }

    /// The events so far.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The events, leaving the builder.
    pub fn into_events(self) -> Vec<Event> {
        self.events
    }

    /// The run.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }
}
