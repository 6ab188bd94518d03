//! Run state as a fold over the run's events. Total and deterministic: the same events give
//! the same state, and no event sequence makes it panic.

use crate::{transition, Rule, StepStatus};
use apollo11_core::{
    AttemptFailure, Event, EventId, EventKind, EventRef, FailureClass, KindTag, OverrideTarget,
    Payload, RunId, Seq, StepName,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The last failure of a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Failure {
    /// The error text of the `Failed` event (or of the override that failed the step).
    pub error: String,
    /// Whether a retry may help.
    pub retryable: bool,
    /// When it failed (wall clock of the event, for backoff).
    pub at_ms: u64,
    /// Its class (`error` in states saved before classes existed).
    #[serde(default = "unclassified")]
    pub class: FailureClass,
    /// Its fingerprint; 0 for none.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub fingerprint: u64,
    /// Failures of the step in a row, this one included, of this class and this
    /// fingerprint (1 for a failure with no fingerprint).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub same_in_a_row: u32,
    /// Why the engine said it will not try again, as the event recorded it; empty if not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// The delay before the next attempt the step asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

fn unclassified() -> FailureClass {
    FailureClass::Error
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

impl Failure {
    /// The failure `failed` records at `at_ms`, following `previous`, the step's last
    /// failure if any: the count of the same failure in a row carried on when both have
    /// the same class and the same (non-zero) fingerprint.
    pub fn after(previous: Option<&Failure>, failed: &AttemptFailure, at_ms: u64) -> Failure {
        let same = previous.is_some_and(|p| {
            failed.fingerprint != 0
                && p.fingerprint == failed.fingerprint
                && p.class == failed.class
        });
        Failure {
            error: failed.error.clone(),
            retryable: failed.retryable,
            at_ms,
            class: failed.class.clone(),
            fingerprint: failed.fingerprint,
            same_in_a_row: if same {
                previous.map_or(1, |p| p.same_in_a_row.saturating_add(1))
            } else {
                1
            },
            note: failed.note.clone(),
            retry_after_ms: failed.retry_after_ms,
        }
    }
}

/// An event that broke the rules, and the state it hit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Anomaly {
    /// The offending event.
    pub event_id: EventId,
    /// Its kind.
    pub kind: KindTag,
    /// Its attempt number.
    pub event_attempt: u32,
    /// What it hit: the run, or the step in the state it was in.
    pub from: AnomalySite,
    /// What is wrong.
    pub reason: String,
}

/// What an anomalous event hit. Serializes as `"run"` or the step state's name, as the
/// field always has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnomalySite {
    /// The run as a whole (an event out of sequence, of another run, before `RunCreated`).
    Run,
    /// A step, in the state it was in.
    Step(StepStatus),
}

impl AnomalySite {
    /// `run`, or the step state's name.
    pub fn name(self) -> &'static str {
        match self {
            AnomalySite::Run => "run",
            AnomalySite::Step(status) => status.name(),
        }
    }
}

impl Serialize for AnomalySite {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for AnomalySite {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        if name == "run" {
            return Ok(AnomalySite::Run);
        }
        StepStatus::parse(&name)
            .map(AnomalySite::Step)
            .ok_or_else(|| {
                serde::de::Error::custom(format!("`{name}` is neither `run` nor a step state"))
            })
    }
}

/// Where a step's current attempt or compensation try runs, as its `Placed` event said.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    /// The machine (or cluster, or service) the work runs on.
    pub host: String,
    /// What finds the work there; the step's own format.
    pub handle: String,
}

/// State of one step, folded from its events.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StepState {
    /// Current state.
    pub status: StepStatus,
    /// Attempts started so far (0 before the first `Started`).
    pub attempt: u32,
    /// When the current state was entered.
    pub since_ms: u64,
    /// When the current or last attempt started.
    pub started_ms: Option<u64>,
    /// How long the last finished attempt took.
    pub duration_ms: Option<u64>,
    /// The last failure, kept until the step succeeds.
    pub last_error: Option<Box<Failure>>,
    /// Seq of the last `Succeeded` or `Failed` event when it carried a payload (the output of
    /// a success, or the marker a checkpoint step left before failing). The payload stays in
    /// the log: the state of a run is as small as its steps' statuses, however big their
    /// outputs.
    pub payload_seq: Option<Seq>,
    /// The first event that made the step anomalous, while it is.
    pub anomaly: Option<Box<Anomaly>>,
    /// Tries of the step's current compensation (1 once it starts, +1 for each retry); 0
    /// when no compensation is under way or waiting for its next try. Omitted when 0, so
    /// states written before compensation tries existed read the same.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compensation_tries: u32,
    /// The last failed try of the current compensation, until it finishes or an operator
    /// overrides the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation_error: Option<Box<Failure>>,
    /// Where the current attempt or compensation try runs, once its `Placed` event is in;
    /// forgotten at the step's next event, so it never names an earlier try.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<Box<Place>>,
    /// Attempts an engine left unfinished (`Interrupted`): started, but spending none of
    /// the step's `max_attempts`. Omitted when 0, as below.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interrupted: u32,
    /// Tries of the step (attempts or compensation tries) interrupted one after another:
    /// back to 0 when a try ends otherwise, an operator overrides the step, or a person
    /// resumes the run or asks it to roll back. A step that keeps taking the engine down
    /// pauses its run at [`crate::INTERRUPTIONS_MAX`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interrupted_in_a_row: u32,
    /// Attempts spent before an operator's last rerun of the step: its budget starts over
    /// there. Omitted when 0, as above.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spent_before_rerun: u32,
    /// The memory limit the step's last measured attempt ran with (its `AttemptUsage`), in
    /// bytes: what a retry after an `oom` grows ([`crate::memory_limit`]). Forgotten by a
    /// rerun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The state of a step that has had no event.
static NOT_STARTED: StepState = StepState {
    status: StepStatus::Pending,
    attempt: 0,
    since_ms: 0,
    started_ms: None,
    duration_ms: None,
    last_error: None,
    payload_seq: None,
    anomaly: None,
    compensation_tries: 0,
    compensation_error: None,
    place: None,
    interrupted: 0,
    interrupted_in_a_row: 0,
    spent_before_rerun: 0,
    memory_limit: None,
};

/// An operator's action on a run, as the log recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct OperatorAction {
    /// Who.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When (wall clock of the event).
    pub at_ms: u64,
    /// The event that recorded it.
    pub event_id: EventId,
}

/// A template step's expansion at run time, as its `Expanded` event recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expansion {
    /// The template step.
    pub step: StepName,
    /// Seq of its `Expanded` event, whose payload holds the items.
    pub seq: Seq,
    /// How many items.
    pub items: u32,
}

/// State of one run, folded from its events.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunState {
    /// The run.
    pub run_id: RunId,
    /// Workflow name from `RunCreated`, once seen.
    pub workflow: Option<String>,
    /// The pinned definition carried by `RunCreated`.
    pub definition: Payload,
    /// When the run was created.
    pub created_ms: u64,
    /// Sequence number of the last event applied.
    pub last_seq: Seq,
    /// Id of the last event applied: the watermark of this state.
    pub last_event_id: EventId,
    /// Steps that have had at least one event, by name.
    pub steps: BTreeMap<StepName, StepState>,
    /// The first run-level anomaly (an event out of sequence, before `RunCreated`, …).
    pub anomaly: Option<Anomaly>,
    /// The operator's pause in force (`RunPaused`, until `RunResumed`). Omitted when none, like the fields below, so states written
    /// before operator events existed read the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<OperatorAction>,
    /// The operator's request to roll back (`RollbackRequested`), once made: it stays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<OperatorAction>,
    /// The template steps expanded so far, in the order of their `Expanded` events: with the
    /// pinned definition, what the run's graph has grown to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expansions: Vec<Expansion>,
    /// Steps an operator's rerun (`RerunRequested`) compensates before they run again, until
    /// their compensation finishes (or an override takes them over).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub undo_first: BTreeSet<StepName>,
}

/// Folds `events` of one run into its state.
pub fn fold<'a>(run_id: &RunId, events: impl IntoIterator<Item = &'a Event>) -> RunState {
    let mut state = RunState::new(run_id.clone());
    for event in events {
        state.apply(event);
    }
    state
}

impl RunState {
    /// The state of a run with no events yet.
    pub fn new(run_id: RunId) -> RunState {
        RunState {
            run_id,
            ..RunState::default()
        }
    }

    /// State of a step; steps without events are pending with attempt 0.
    pub fn step(&self, name: &str) -> &StepState {
        self.steps.get(name).unwrap_or(&NOT_STARTED)
    }

    /// Status of a step by name (pending when it has no events).
    pub fn status(&self, name: &str) -> StepStatus {
        self.steps
            .get(name)
            .map_or(StepStatus::Pending, |s| s.status)
    }

    /// True when the run or one of its steps is anomalous.
    pub fn is_anomalous(&self) -> bool {
        self.anomaly.is_some()
            || self
                .steps
                .values()
                .any(|s| s.status == StepStatus::Anomalous)
    }

    /// Applies one event and returns the rule it matched (`None` for run-level events and for
    /// events that were only recorded as a run anomaly).
    pub fn apply(&mut self, event: &Event) -> Option<Rule> {
        self.apply_ref(&event.view())
    }

    /// [`RunState::apply`] for an event borrowed from where it was decoded: a fold of a log
    /// copies only the strings the state keeps.
    pub fn apply_ref(&mut self, event: &EventRef<'_>) -> Option<Rule> {
        if let Some(reason) = self.run_level_problem(event) {
            self.record_run_anomaly(event, reason);
            if event.run_id != self.run_id.as_str() {
                return None;
            }
        }
        self.last_seq = event.seq;
        self.last_event_id = event.event_id;
        match (&event.step, &event.kind) {
            (None, EventKind::RunCreated { workflow }) => {
                if self.workflow.is_none() {
                    self.workflow = Some(workflow.clone());
                    self.definition = event.payload.to_payload();
                    self.created_ms = event.at_ms;
                }
                None
            }
            (None, kind) => {
                self.apply_operator_action(kind, event);
                None
            }
            (Some(step), kind) => {
                let rule = self.apply_to_step(step, event);
                self.undone_for_rerun(step, rule, event.at_ms);
                if let (Rule::Expand, EventKind::Expanded { items }) = (rule, kind) {
                    self.expansions.push(Expansion {
                        step: StepName((*step).to_owned()),
                        seq: event.seq,
                        items: *items,
                    });
                }
                Some(rule)
            }
        }
    }

    /// Run-level operator events. They are never anomalies: what an operator did is recorded
    /// as it was (a second pause keeps the first, a resume of a run not paused changes
    /// nothing); which actions make sense in which state is `allowed_actions`' business,
    /// asked before an action is appended.
    fn apply_operator_action(&mut self, kind: &EventKind, event: &EventRef<'_>) {
        let action = |by: &String, reason: &String| OperatorAction {
            by: by.clone(),
            reason: reason.clone(),
            at_ms: event.at_ms,
            event_id: event.event_id,
        };
        match kind {
            EventKind::RunPaused { by, reason } => {
                if self.paused.is_none() {
                    self.paused = Some(action(by, reason));
                }
            }
            EventKind::RunResumed { .. } => {
                self.paused = None;
                self.forget_interruptions();
            }
            EventKind::RollbackRequested { by, reason } => {
                // An operator's pause holds the rollback too: only `RunResumed` lifts it.
                self.forget_interruptions();
                if self.rollback.is_none() {
                    self.rollback = Some(action(by, reason));
                }
            }
            EventKind::RerunRequested {
                steps, compensate, ..
            } => self.rerun(steps, compensate, event.at_ms),
            // `RunCreated` is folded by the caller; step kinds without a step are run
            // anomalies, recorded by the caller, and change nothing here.
            EventKind::RunCreated { .. }
            | EventKind::Started
            | EventKind::Succeeded
            | EventKind::AttemptFailed(_)
            | EventKind::Failed { .. }
            | EventKind::Compensating
            | EventKind::Compensated
            | EventKind::ManualOverride { .. }
            | EventKind::CompensationFailed { .. }
            | EventKind::CompensationTryFailed(_)
            | EventKind::Placed { .. }
            | EventKind::Interrupted
            | EventKind::Skipped { .. }
            | EventKind::Expanded { .. }
            | EventKind::Signalled { .. }
            | EventKind::AttemptUsage(_) => {}
        }
    }

    /// An operator's rerun: a finished rollback is called off; the steps of `compensate`
    /// (that succeeded, or failed) wait for their compensation, every other step of `steps`
    /// is pending again, each with a fresh budget of attempts. A step at work is left as it
    /// is (the rerun is refused then: `check_rerun`).
    fn rerun(&mut self, steps: &[String], compensate: &[String], at_ms: u64) {
        self.rollback = None;
        self.forget_interruptions();
        // A step with no event yet is pending with a full budget already.
        for name in steps {
            let Some(step) = self.steps.get_mut(name.as_str()) else {
                continue;
            };
            match step.status {
                StepStatus::Succeeded | StepStatus::Failed if compensate.contains(name) => {
                    // Its failure no longer stops the run: it is undone, then run again.
                    step.last_error = None;
                    self.undo_first.insert(StepName(name.clone()));
                }
                StepStatus::Pending
                | StepStatus::Succeeded
                | StepStatus::Failed
                | StepStatus::Compensated
                | StepStatus::Skipped => step.start_over(at_ms),
                StepStatus::Running
                | StepStatus::Compensating
                | StepStatus::CompensationFailed
                | StepStatus::Anomalous => {}
            }
        }
    }

    /// A step a rerun compensates first is pending once its compensation finished; an
    /// override takes it out of the rerun's hands.
    fn undone_for_rerun(&mut self, name: &str, rule: Rule, at_ms: u64) {
        let ends = matches!(rule, Rule::FinishCompensation | Rule::Override);
        if !ends || !self.undo_first.remove(name) {
            return;
        }
        if let (Rule::FinishCompensation, Some(step)) = (rule, self.steps.get_mut(name)) {
            step.start_over(at_ms);
        }
    }

    /// A person acted on the run: the interruptions each step had in a row are forgiven.
    fn forget_interruptions(&mut self) {
        for step in self.steps.values_mut() {
            step.interrupted_in_a_row = 0;
        }
    }

    fn run_level_problem(&self, event: &EventRef<'_>) -> Option<String> {
        let created = self.workflow.is_some();
        let expected_seq = self.last_seq.next();
        if event.run_id != self.run_id.as_str() {
            Some(format!(
                "event of run `{}` in run `{}`",
                event.run_id, self.run_id
            ))
        } else if event.seq != expected_seq {
            Some(format!(
                "seq {} where {} was expected",
                event.seq, expected_seq
            ))
        } else if let (None, EventKind::RunCreated { .. }) = (&event.step, &event.kind) {
            created.then(|| "a second RunCreated".to_owned())
        } else if event.step.is_none() && !event.kind.is_run_level() {
            Some("a step event without a step".to_owned())
        } else if !created {
            Some(if event.step.is_some() {
                "a step event before RunCreated".to_owned()
            } else {
                format!("{} before RunCreated", event.kind.name())
            })
        } else {
            None
        }
    }

    fn record_run_anomaly(&mut self, event: &EventRef<'_>, reason: String) {
        if self.anomaly.is_none() {
            self.anomaly = Some(Anomaly {
                event_id: event.event_id,
                kind: event.kind.tag(),
                event_attempt: event.attempt,
                from: AnomalySite::Run,
                reason,
            });
        }
    }

    fn apply_to_step(&mut self, name: &str, event: &EventRef<'_>) -> Rule {
        if let Some(step) = self.steps.get_mut(name) {
            return step.apply(event);
        }
        let step = self.steps.entry(StepName(name.to_owned())).or_default();
        step.apply(event)
    }
}

impl StepState {
    /// Applies one event of this step and returns the rule it matched.
    fn apply(&mut self, event: &EventRef<'_>) -> Rule {
        let t = transition(self.status, self.attempt, &event.kind, event.attempt);
        let from = self.status;
        self.status = t.next;
        self.attempt = t.attempt;
        if from != t.next {
            self.since_ms = event.at_ms;
        }
        let keeps_place = matches!(
            t.rule,
            Rule::Anomaly | Rule::StayAnomalous | Rule::Measure | Rule::MeasureCompensation
        );
        if !keeps_place {
            self.place = None;
        }
        match t.rule {
            Rule::Place | Rule::PlaceCompensation => {
                if let EventKind::Placed { host, handle } = &event.kind {
                    self.place = Some(Box::new(Place {
                        host: host.clone(),
                        handle: handle.clone(),
                    }));
                }
            }
            Rule::Measure => {
                if let EventKind::AttemptUsage(usage) = &event.kind {
                    self.memory_limit = usage.memory_limit_bytes;
                }
            }
            Rule::MeasureCompensation => {}
            Rule::Start | Rule::Retry | Rule::Rerun => self.started_ms = Some(event.at_ms),
            Rule::Succeed | Rule::Expand | Rule::Signal => {
                self.finish_attempt(event);
                self.last_error = None;
            }
            Rule::Skip | Rule::SkipRetry => self.last_error = None,
            Rule::Fail => {
                self.finish_attempt(event);
                if let Some(failed) = event.kind.failure() {
                    self.record_failure(&failed, event.at_ms);
                }
            }
            Rule::Interrupt => {
                self.finish_attempt(event);
                self.last_error = Some(interruption(event));
                self.interrupted = self.interrupted.saturating_add(1);
            }
            Rule::InterruptCompensation => {
                self.compensation_error = Some(interruption(event));
                // The next try takes this one's number: an interrupted try is not spent.
                self.compensation_tries = self.compensation_tries.saturating_sub(1);
            }
            Rule::Override => self.apply_override(event),
            Rule::Anomaly => self.anomaly = Some(Box::new(anomaly(event, from))),
            Rule::CompensateFailure | Rule::CompensateSuccess => {
                self.compensation_tries = 1;
                self.compensation_error = None;
            }
            Rule::RetryCompensation => {
                self.compensation_tries = self.compensation_tries.saturating_add(1);
            }
            Rule::FailCompensation => {
                if let Some(failed) = event.kind.compensation_failure() {
                    let failure = Failure::after(None, &failed, event.at_ms);
                    self.compensation_error = Some(Box::new(failure));
                }
            }
            Rule::FinishCompensation => self.end_compensation(),
            Rule::StayAnomalous => {}
        }
        self.count_interruptions(t.rule);
        t.rule
    }

    /// Counts the interruptions in a row: one more for a try an engine left unfinished, none
    /// once a try ends any other way or an operator sets the step.
    fn count_interruptions(&mut self, rule: Rule) {
        match rule {
            Rule::Interrupt | Rule::InterruptCompensation => {
                self.interrupted_in_a_row = self.interrupted_in_a_row.saturating_add(1);
            }
            Rule::Succeed
            | Rule::Expand
            | Rule::Signal
            | Rule::Fail
            | Rule::FinishCompensation
            | Rule::FailCompensation
            | Rule::Override => self.interrupted_in_a_row = 0,
            Rule::Start
            | Rule::Retry
            | Rule::Rerun
            | Rule::CompensateFailure
            | Rule::CompensateSuccess
            | Rule::RetryCompensation
            | Rule::Place
            | Rule::PlaceCompensation
            | Rule::Measure
            | Rule::MeasureCompensation
            | Rule::Skip
            | Rule::SkipRetry
            | Rule::Anomaly
            | Rule::StayAnomalous => {}
        }
    }

    /// Records `failed`, at `at_ms`, as the step's last failure.
    pub(crate) fn record_failure(&mut self, failed: &AttemptFailure, at_ms: u64) {
        let failure = Failure::after(self.last_error.as_deref(), failed, at_ms);
        self.last_error = Some(Box::new(failure));
    }

    /// Attempts that count against `max_attempts`: those started since the step's last
    /// rerun, but for the interrupted.
    pub fn attempts_spent(&self) -> u32 {
        self.attempt
            .saturating_sub(self.interrupted)
            .saturating_sub(self.spent_before_rerun)
    }

    /// Pending again, as a rerun leaves it: no failure, no compensation, a fresh budget of
    /// attempts (its attempt counter is kept, as the log's attempts go on).
    fn start_over(&mut self, at_ms: u64) {
        if self.status != StepStatus::Pending {
            self.since_ms = at_ms;
        }
        self.status = StepStatus::Pending;
        self.last_error = None;
        self.place = None;
        self.memory_limit = None;
        self.interrupted_in_a_row = 0;
        self.end_compensation();
        self.spent_before_rerun = self.attempt.saturating_sub(self.interrupted);
    }

    /// Forgets the tries of a compensation that finished or that an operator ended.
    fn end_compensation(&mut self) {
        self.compensation_tries = 0;
        self.compensation_error = None;
    }

    fn finish_attempt(&mut self, event: &EventRef<'_>) {
        self.duration_ms = self.started_ms.map(|s| event.at_ms.saturating_sub(s));
        self.payload_seq = (!event.payload.is_empty()).then_some(event.seq);
    }

    fn apply_override(&mut self, event: &EventRef<'_>) {
        self.anomaly = None;
        self.end_compensation();
        if let EventKind::ManualOverride { to, by, reason } = &event.kind {
            match to {
                OverrideTarget::Failed => {
                    let error = format!("failed by {by}: {reason}");
                    self.last_error = Some(failure(&error, false, event));
                }
                OverrideTarget::Succeeded | OverrideTarget::Skipped => self.last_error = None,
                OverrideTarget::Pending => {}
            }
        }
    }
}

/// A failure of `error`'s class as a legacy text reads it (`interrupted`, `error`).
fn failure(error: &str, retryable: bool, event: &EventRef<'_>) -> Box<Failure> {
    let failed = AttemptFailure::legacy(error, retryable);
    Box::new(Failure::after(None, &failed, event.at_ms))
}

/// The failure an interrupted try leaves: `interrupted`, retryable.
fn interruption(event: &EventRef<'_>) -> Box<Failure> {
    failure("interrupted", true, event)
}

fn anomaly(event: &EventRef<'_>, from: StepStatus) -> Anomaly {
    Anomaly {
        event_id: event.event_id,
        kind: event.kind.tag(),
        event_attempt: event.attempt,
        from: AnomalySite::Step(from),
        reason: format!(
            "{} (attempt {}) is not allowed here",
            event.kind.name(),
            event.attempt
        ),
    }
}
