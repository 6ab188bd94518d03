//! Building event histories by hand and at random.

use apollo11_core::{Event, EventId, EventKind, OverrideTarget, Payload, RunId, Seq, StepName};
use proptest::prelude::*;
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

    pub fn created(self, workflow: &str, definition: Payload) -> History {
        let kind = EventKind::RunCreated {
            workflow: workflow.to_owned(),
        };
        self.raw(None, kind, 0, definition)
    }

    pub fn started(mut self, step: &str) -> History {
        let attempt = self.attempts.entry(step.to_owned()).or_default();
        *attempt += 1;
        let attempt = *attempt;
        self.raw(Some(step), EventKind::Started, attempt, Payload::Empty)
    }

    pub fn succeeded(self, step: &str, output: &str) -> History {
        let attempt = self.attempt(step);
        self.raw(
            Some(step),
            EventKind::Succeeded,
            attempt,
            Payload::inline(output),
        )
    }

    pub fn failed(self, step: &str, error: &str, retryable: bool) -> History {
        let attempt = self.attempt(step);
        let kind = EventKind::Failed {
            error: error.to_owned(),
            retryable,
        };
        self.raw(Some(step), kind, attempt, Payload::Empty)
    }

    pub fn compensating(self, step: &str) -> History {
        let attempt = self.attempt(step);
        self.raw(Some(step), EventKind::Compensating, attempt, Payload::Empty)
    }

    pub fn compensated(self, step: &str) -> History {
        let attempt = self.attempt(step);
        self.raw(Some(step), EventKind::Compensated, attempt, Payload::Empty)
    }

    pub fn compensation_failed(self, step: &str, error: &str, retryable: bool) -> History {
        let attempt = self.attempt(step);
        let kind = EventKind::CompensationFailed {
            error: error.to_owned(),
            retryable,
        };
        self.raw(Some(step), kind, attempt, Payload::Empty)
    }

    pub fn overridden(self, step: &str, to: OverrideTarget, by: &str, reason: &str) -> History {
        let attempt = self.attempt(step);
        let kind = EventKind::ManualOverride {
            to,
            by: by.to_owned(),
            reason: reason.to_owned(),
        };
        self.raw(Some(step), kind, attempt, Payload::Empty)
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

    /// Appends any event, valid or not, with the next seq and event id.
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

    fn attempt(&self, step: &str) -> u32 {
        self.attempts.get(step).copied().unwrap_or(0)
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    pub fn into_events(self) -> Vec<Event> {
        self.events
    }

    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }
}

/// Any event kind, including ones a correct scheduler would never write at a given point.
pub fn arb_event_kind() -> impl Strategy<Value = EventKind> {
    let target = prop_oneof![
        Just(OverrideTarget::Succeeded),
        Just(OverrideTarget::Skipped),
        Just(OverrideTarget::Pending),
        Just(OverrideTarget::Failed),
    ];
    prop_oneof![
        4 => Just(EventKind::Started),
        3 => Just(EventKind::Succeeded),
        3 => (any::<bool>(), "[a-z]{0,6}").prop_map(|(retryable, error)| EventKind::Failed { error, retryable }),
        2 => Just(EventKind::Compensating),
        2 => Just(EventKind::Compensated),
        2 => (any::<bool>(), "[a-z]{0,6}").prop_map(|(retryable, error)| EventKind::CompensationFailed { error, retryable }),
        1 => (target, "[a-z]{1,4}").prop_map(|(to, by)| EventKind::ManualOverride { to, by, reason: "why".into() }),
        1 => "[a-z]{1,4}".prop_map(|workflow| EventKind::RunCreated { workflow }),
        1 => "[a-z]{1,4}".prop_map(|by| EventKind::RunPaused { by, reason: "why".into() }),
        1 => "[a-z]{1,4}".prop_map(|by| EventKind::RunResumed { by, reason: "why".into() }),
        1 => "[a-z]{1,4}".prop_map(|by| EventKind::RollbackRequested { by, reason: "why".into() }),
    ]
}

/// A run's history over `steps` steps: mostly plausible (attempts near the step's current
/// count, run-level `RunCreated` first, operator actions on the run), sometimes wrong in
/// every way the table can see: wrong attempts, events out of order, a missing
/// `RunCreated`, a bad seq, a run-level event naming a step.
pub fn arb_history(steps: usize, max_len: usize) -> impl Strategy<Value = Vec<Event>> {
    let one = (0..steps, arb_event_kind(), 0u32..3, 0u32..20, 0u64..5_000);
    (any::<bool>(), proptest::collection::vec(one, 0..max_len)).prop_map(move |(created, picks)| {
        let mut history = History::new("run-p");
        if created {
            history = history.created("wf", Payload::Empty);
        }
        let mut attempts = vec![0u32; steps];
        for (step, kind, delta, noise, wait) in picks {
            let name = format!("s{step}");
            if matches!(kind, EventKind::Started) && delta > 0 {
                attempts[step] += 1;
            }
            // One event in twenty gets a random attempt number.
            let attempt = if noise == 0 { delta } else { attempts[step] };
            // Operator actions go to the run most of the time, and to a step (an anomaly)
            // otherwise; a stray `RunCreated` goes to a step (a second one on the run is
            // tested on its own).
            let operator = kind.is_run_level() && !matches!(kind, EventKind::RunCreated { .. });
            let step = (!operator || noise % 4 == 0).then_some(name.as_str());
            history = history.wait(wait).raw(step, kind, attempt, Payload::Empty);
        }
        let mut events = history.into_events();
        if let Some(e) = events.get_mut(max_len / 2).filter(|_| !created) {
            e.seq = apollo11_core::Seq(e.seq.0 + 7);
        }
        events
    })
}
