//! A run as it stands: its status, what an operator may do, why it waits, and each step.

use apollo11_core::{
    Event, EventId, EventKind, Idempotency, Origin, OverrideTarget, ParamKind, ParamSpec, RunId,
    SecretSource, StepName, TriggerRule, Value, WorkflowSpec,
};
use apollo11_machine::{
    OperatorAction, OverrideEffect, PauseCause, RunAction, RunMachine, RunStatus, StepStatus,
};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

use super::event::PayloadView;
use super::usage::TryUsage;
use super::waiting::{waiting, Waiting};

/// A run now or at an event (the HTTP server's `GET /api/v1/runs/{id}`). `L` is how a step's
/// output is named: a [`StepLog`] here, what serves it in a front end ([`RunView::map_logs`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(bound(serialize = "L: Serialize"))]
#[non_exhaustive]
pub struct RunView<L = StepLog> {
    /// The run.
    pub run_id: RunId,
    /// The workflow it pinned.
    pub workflow: String,
    /// Its status, derived from its steps, operators' actions and definition.
    pub state: RunStatus,
    /// The last event folded.
    pub event_id: EventId,
    /// How many of the run's events were folded.
    pub events: u32,
    /// When it was created (ms since the epoch).
    pub created_at: u64,
    /// When its last folded event was written (ms since the epoch).
    pub updated_at: u64,
    /// Its steps in topological order (ties by declaration).
    pub order: Vec<String>,
    /// Whether each operator action ([`RunAction::name`], and `override`, of any step) is
    /// allowed now.
    pub allowed: BTreeMap<&'static str, bool>,
    /// For each action not allowed, why not (the message an attempt would be refused with).
    pub refused: BTreeMap<&'static str, String>,
    /// Why the run waits for a person, when it does.
    pub paused: Option<Pause>,
    /// An operator's pause asked while steps are at work: the run stays `running` until they
    /// finish, then is `paused` (with [`RunView::paused`] saying by whom).
    pub pausing: Option<OperatorAction>,
    /// The operator's request to roll back, once made.
    pub rollback: Option<OperatorAction>,
    /// The parameters its definition declares.
    pub params: Vec<ParamView>,
    /// The values it started with, defaults filled in (a secret's never among them).
    pub arguments: BTreeMap<String, Value>,
    /// The steps, in declaration order (serialized as an object keyed by step name).
    #[serde(serialize_with = "steps_by_name")]
    pub steps: Vec<StepView<L>>,
    /// True when only an archive holds the run (see [`RunView::archived`]).
    pub archived: bool,
    /// What started the run, as the front end that started it pinned it: its definition's
    /// attributes named [`STARTED_BY`]`NAME`, by `NAME` (a schedule's run: `schedule`,
    /// `fire_time`). Empty for a run started by hand.
    pub started_by: BTreeMap<String, String>,
}

/// The prefix of the definition attributes a run's view shows as [`RunView::started_by`].
pub const STARTED_BY: &str = "started_by.";

/// One step of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StepView<L = StepLog> {
    /// The step's name (the key of the serialized map).
    #[serde(skip)]
    pub name: String,
    /// Its state.
    pub state: StepStatus,
    /// Its attempt counter (0 before the first start).
    pub attempt: u32,
    /// What it waits for.
    pub depends_on: Vec<String>,
    /// How it is made safe to rerun.
    pub idempotency: Idempotency,
    /// Whether it has a compensation.
    pub compensate: bool,
    /// When it runs, given how its dependencies ended.
    pub trigger: TriggerRule,
    /// The condition it runs under, as written.
    pub condition: Option<String>,
    /// The declaration and item it was made from, when a `for_each` made it.
    pub origin: Option<Origin>,
    /// Why it will not run: the reason of its last `Skipped` event, while it is skipped
    /// (`None` for a step an operator overrode to skipped).
    pub skip_reason: Option<String>,
    /// How long its last finished attempt took.
    pub duration_ms: Option<u64>,
    /// When its current or last attempt started.
    pub started_at: Option<u64>,
    /// The last error: its compensation's, if a try failed (that says more about where the
    /// step is), else its last attempt's.
    pub error: Option<String>,
    /// The class of its last attempt's failure (`exit:1`, `timeout`, an author's
    /// `transient`), kept until it succeeds.
    pub error_class: Option<String>,
    /// How many tries its current compensation has had.
    pub compensation_tries: u32,
    /// Whose output a front end shows for the step, when it has started.
    pub log: Option<L>,
    /// Where its last try (an attempt, or a try of its compensation) was placed, as its
    /// last `placed` event said: kept after the try ends, so a front end shows what ran.
    pub placed: Option<Placement>,
    /// What an override to each target ([`OverrideTarget::name`]) would do now; empty when
    /// the run takes no override (see the run's `refused`).
    pub overrides: BTreeMap<&'static str, OverrideChoice>,
    /// Its try under way, while no place is recorded for it (a step placed by labels waits
    /// for a worker until then).
    pub unplaced: Option<Unplaced>,
    /// What it waits for, while a waiting step is at its wait (a signal, or its timer).
    pub waiting: Option<Waiting>,
    /// What each of its tries used, in the order they ended; omitted when none recorded
    /// any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<TryUsage>,
}

/// A try under way (the step `running` or `compensating`) whose `placed` event has not come:
/// its step executor has not placed it yet. A local shell step is placed within
/// milliseconds; one placed by labels waits for a worker carrying them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Unplaced {
    /// True for a try of the step's compensation.
    pub compensation: bool,
    /// When the try began (its `started` or `compensating` event), ms since the epoch.
    pub since: u64,
    /// What it waits for, in words, as a front end that knows the step's executor says it
    /// (`None` as the inspector answers: it knows no executor).
    pub waiting_for: Option<String>,
    /// The step's attributes (its executor's part of the definition), for that front end;
    /// never served.
    #[serde(skip)]
    pub attributes: BTreeMap<String, String>,
}

/// A parameter as a front end shows it: never a secret's value, nor the path of the file
/// one is read from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ParamView {
    /// Its name.
    pub name: String,
    /// The type a value must have.
    #[serde(rename = "type")]
    pub kind: ParamKind,
    /// The value when none is given.
    pub default: Option<Value>,
    /// Whether a start must give a value.
    pub required: bool,
    /// What it is for.
    pub description: String,
    /// Whether it is a secret, read at each attempt and never given at start.
    pub secret: bool,
    /// The environment variable a secret is read from (`None` for a file's).
    pub secret_env: Option<String>,
}

impl ParamView {
    /// The view of a declaration.
    pub fn of(spec: &ParamSpec) -> ParamView {
        ParamView {
            name: spec.name.clone(),
            kind: spec.kind,
            default: spec.default.clone(),
            required: spec.required,
            description: spec.description.clone(),
            secret: spec.secret.is_some(),
            secret_env: match &spec.secret {
                Some(SecretSource::Env(var)) => Some(var.clone()),
                _ => None,
            },
        }
    }
}

/// What an override of a step to one target does (see [`apollo11_machine::check_override`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OverrideChoice {
    /// What happens next.
    pub does: OverrideEffect,
    /// The same in words, for a label.
    pub says: &'static str,
}

/// Which output of a step to show: its last attempt's, and whether a compensation ran.
/// Where that output lives is the step executor's business (the shell executor keeps it in
/// the data dir).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StepLog {
    /// The attempt.
    pub attempt: u32,
    /// True when the step is being or was compensated (the compensation has a log of its
    /// own).
    pub compensation: bool,
}

/// A step's last `placed` event: the try, where it ran, and what the step executor recorded
/// with the place (its payload; for a shell step, `{"command", "cwd", "isolation"}` as the try ran them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Placement {
    /// The event.
    pub event_id: EventId,
    /// The attempt it belongs to.
    pub attempt: u32,
    /// True when it placed a try of the step's compensation rather than an attempt.
    pub compensation: bool,
    /// The host the try ran on.
    pub host: String,
    /// The step's own handle on it.
    pub handle: String,
    /// What the event carries: JSON when it is JSON.
    pub payload: PayloadView,
}

/// Why a run waits for a person, with what an operator needs to decide.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum Pause {
    /// An operator paused it.
    Operator {
        /// Who.
        by: String,
        /// Why.
        reason: String,
    },
    /// A step failed for good under `on_failure = "pause"`.
    StepFailed {
        /// The step.
        step: StepName,
        /// Its attempts.
        attempts: u32,
        /// Its last error, if one was recorded.
        error: Option<String>,
        /// The class of its last failure.
        class: Option<String>,
        /// Why it is not tried again (`the same failure repeated …`, `no attempt left …`).
        stopped: Option<String>,
    },
    /// A step's compensation failed for good.
    CompensationFailed {
        /// The step.
        step: StepName,
        /// Tries of its compensation.
        tries: u32,
        /// The last try's error, if one was recorded.
        error: Option<String>,
        /// The override that has the compensation tried again, when there is one.
        retry_with: Option<OverrideTarget>,
    },
}

impl Pause {
    /// The pause of a machine's run, if it waits for a person.
    pub fn of(machine: &RunMachine) -> Option<Pause> {
        let state = machine.state();
        let error = |f: Option<&apollo11_machine::Failure>| f.map(|f| f.error.clone());
        Some(match machine.pause_cause()? {
            PauseCause::Operator { by, reason } => Pause::Operator { by, reason },
            PauseCause::StepFailed { step } => {
                let s = state.step(step.as_str());
                Pause::StepFailed {
                    attempts: s.attempts_spent(),
                    error: error(s.last_error.as_deref()),
                    class: s.last_error.as_ref().map(|f| f.class.name()),
                    stopped: machine.stop_reason(step.as_str()),
                    step,
                }
            }
            PauseCause::CompensationFailed { step, retry_with } => {
                let s = state.step(step.as_str());
                Pause::CompensationFailed {
                    tries: s.compensation_tries,
                    error: error(s.compensation_error.as_deref()),
                    step,
                    retry_with,
                }
            }
        })
    }
}

impl RunView {
    /// The view of a folded run; `events` are the events folded (for the times).
    pub(crate) fn new(machine: &RunMachine, spec: &WorkflowSpec, events: &[Event]) -> RunView {
        let state = machine.state();
        let dag = machine.dag();
        let skip_reasons = skip_reasons(events);
        let mut placements = placements(events);
        let begun = tries_begun(events);
        let mut usages = super::usage::usages(events);
        let refusals: Vec<_> = (RunAction::ALL.iter())
            .map(|&a| (a.name(), machine.check_action(a).err()))
            .chain([("override", machine.check_overrides().err())])
            .collect();
        RunView {
            run_id: state.run_id.clone(),
            workflow: spec.name.clone(),
            state: machine.status(),
            event_id: state.last_event_id,
            events: state.last_seq.0,
            created_at: state.created_ms,
            updated_at: events.last().map_or(state.created_ms, |e| e.at_ms),
            order: (dag.topological_order().iter())
                .map(|&n| dag.name(n).to_owned())
                .collect(),
            allowed: (refusals.iter())
                .map(|(name, r)| (*name, r.is_none()))
                .collect(),
            refused: (refusals.iter())
                .filter_map(|(name, r)| Some((*name, r.as_ref()?.to_string())))
                .collect(),
            paused: Pause::of(machine),
            pausing: (state.paused.clone()).filter(|_| machine.status() == RunStatus::Running),
            rollback: state.rollback.clone(),
            params: spec.params.iter().map(ParamView::of).collect(),
            arguments: spec.arguments.clone(),
            started_by: (spec.attributes.iter())
                .filter_map(|(k, v)| Some((k.strip_prefix(STARTED_BY)?.to_owned(), v.clone())))
                .collect(),
            steps: (spec.steps.iter())
                .map(|s| {
                    let name = s.name.as_str();
                    let skip_reason = skip_reasons.get(name).copied();
                    let placed = placements.remove(name);
                    let mut step = StepView::new(machine, s, skip_reason, placed);
                    // A waiting step is never placed: nothing of it runs anywhere.
                    if step.waiting.is_none() {
                        step.unplaced = unplaced(&step, s, begun.get(name));
                    }
                    step.usage = usages.remove(name).unwrap_or_default();
                    step
                })
                .collect(),
            archived: false,
        }
    }
}

impl<L> RunView<L> {
    /// The view of a run `gc` archived: it takes no more events, so every action and override
    /// is refused with why (the store refuses an append to it).
    pub fn archived(mut self) -> RunView<L> {
        let why = archived_refusal(&self.run_id);
        let names = RunAction::ALL.map(RunAction::name);
        for name in names.into_iter().chain(["override"]) {
            self.allowed.insert(name, false);
            self.refused.insert(name, why.clone());
        }
        for step in &mut self.steps {
            step.overrides.clear();
        }
        self.archived = true;
        self
    }

    /// How many steps are succeeded or skipped.
    pub fn steps_done(&self) -> usize {
        (self.steps.iter())
            .filter(|s| s.state.satisfies_dependents())
            .count()
    }

    /// The same view with each step's log named by `name` (given the run, the step and the
    /// log): how a front end says where a step's output is served.
    pub fn map_logs<M>(self, name: impl Fn(&RunId, &str, L) -> M) -> RunView<M> {
        let run_id = self.run_id;
        let steps = (self.steps.into_iter())
            .map(|step| StepView {
                log: step.log.map(|log| name(&run_id, &step.name, log)),
                placed: step.placed,
                name: step.name,
                state: step.state,
                attempt: step.attempt,
                depends_on: step.depends_on,
                idempotency: step.idempotency,
                compensate: step.compensate,
                trigger: step.trigger,
                condition: step.condition,
                origin: step.origin,
                skip_reason: step.skip_reason,
                duration_ms: step.duration_ms,
                started_at: step.started_at,
                error: step.error,
                error_class: step.error_class,
                compensation_tries: step.compensation_tries,
                overrides: step.overrides,
                unplaced: step.unplaced,
                waiting: step.waiting,
                usage: step.usage,
            })
            .collect();
        RunView {
            run_id,
            workflow: self.workflow,
            state: self.state,
            event_id: self.event_id,
            events: self.events,
            created_at: self.created_at,
            updated_at: self.updated_at,
            order: self.order,
            allowed: self.allowed,
            refused: self.refused,
            paused: self.paused,
            pausing: self.pausing,
            rollback: self.rollback,
            params: self.params,
            arguments: self.arguments,
            steps,
            archived: self.archived,
            started_by: self.started_by,
        }
    }
}

impl StepView {
    fn new(
        machine: &RunMachine,
        spec: &apollo11_core::StepSpec,
        skip_reason: Option<&str>,
        placed: Option<Placement>,
    ) -> StepView {
        let step = machine.state().step(&spec.name);
        let choices = machine.override_choices(&spec.name).unwrap_or_default();
        let error = (step.compensation_error.as_ref())
            .or(step.last_error.as_ref())
            .map(|e| e.error.clone());
        StepView {
            name: spec.name.clone(),
            state: step.status,
            attempt: step.attempt,
            depends_on: spec.depends_on.clone(),
            idempotency: spec.idempotency,
            compensate: spec.has_compensation,
            trigger: spec.trigger,
            condition: spec.condition.clone(),
            origin: spec.origin.clone(),
            skip_reason: skip_reason
                .filter(|_| step.status == StepStatus::Skipped)
                .map(str::to_owned),
            duration_ms: step.duration_ms,
            started_at: step.started_ms,
            error,
            error_class: step.last_error.as_ref().map(|f| f.class.name()),
            compensation_tries: step.compensation_tries,
            log: (step.attempt > 0).then_some(StepLog {
                attempt: step.attempt,
                compensation: matches!(
                    step.status,
                    StepStatus::Compensating
                        | StepStatus::CompensationFailed
                        | StepStatus::Compensated
                ),
            }),
            placed,
            overrides: (choices.into_iter())
                .map(|(to, does)| {
                    let says = does.describe();
                    (to.name(), OverrideChoice { does, says })
                })
                .collect(),
            unplaced: None,
            waiting: waiting(spec, step),
            usage: Vec::new(),
        }
    }
}

/// The try `step` has under way, when its last `begun` has no place yet (`begun`: its last
/// `started` or `compensating` with no `placed` after it, see [`tries_begun`]).
fn unplaced(
    step: &StepView,
    spec: &apollo11_core::StepSpec,
    begun: Option<&(bool, u64)>,
) -> Option<Unplaced> {
    let &(compensation, since) = begun?;
    let under_way = match compensation {
        false => step.state == StepStatus::Running,
        true => step.state == StepStatus::Compensating,
    };
    under_way.then(|| Unplaced {
        compensation,
        since,
        waiting_for: None,
        attributes: spec.attributes.clone(),
    })
}

/// Each step's last try begun (`started`: an attempt, `compensating`: a compensation's try),
/// whether it was a compensation's and when, unless a `placed` event came after it.
fn tries_begun(events: &[Event]) -> BTreeMap<&str, (bool, u64)> {
    let mut begun = BTreeMap::new();
    for event in events {
        let Some(step) = &event.step else { continue };
        match &event.kind {
            EventKind::Started => {
                begun.insert(step.as_str(), (false, event.at_ms));
            }
            EventKind::Compensating => {
                begun.insert(step.as_str(), (true, event.at_ms));
            }
            EventKind::Placed { .. } => {
                begun.remove(step.as_str());
            }
            _ => {}
        }
    }
    begun
}

/// The reason of each step's last `Skipped` event, unless an operator's override came after.
fn skip_reasons(events: &[Event]) -> BTreeMap<&str, &str> {
    let mut reasons = BTreeMap::new();
    for event in events {
        let Some(step) = &event.step else { continue };
        match &event.kind {
            EventKind::Skipped { reason } => {
                reasons.insert(step.as_str(), reason.as_str());
            }
            EventKind::ManualOverride { .. } => {
                reasons.remove(step.as_str());
            }
            _ => {}
        }
    }
    reasons
}

/// Each step's last `placed` event, and whether it placed a compensation's try (a
/// `compensating` event came after the step's last `started`).
fn placements(events: &[Event]) -> BTreeMap<&str, Placement> {
    let mut compensating = BTreeMap::new();
    let mut placed = BTreeMap::new();
    for event in events {
        let Some(step) = &event.step else { continue };
        match &event.kind {
            EventKind::Started => {
                compensating.insert(step.as_str(), false);
            }
            EventKind::Compensating => {
                compensating.insert(step.as_str(), true);
            }
            EventKind::Placed { host, handle } => {
                let placement = Placement {
                    event_id: event.event_id,
                    attempt: event.attempt,
                    compensation: compensating.get(step.as_str()) == Some(&true),
                    host: host.clone(),
                    handle: handle.clone(),
                    payload: PayloadView::from(&event.payload),
                };
                placed.insert(step.as_str(), placement);
            }
            _ => {}
        }
    }
    placed
}

/// Why an action on an archived run is refused.
pub fn archived_refusal(run_id: &RunId) -> String {
    format!("run `{run_id}` is archived: an archived run takes no more events")
}

fn steps_by_name<S: Serializer, L: Serialize>(
    steps: &[StepView<L>],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(steps.iter().map(|step| (&step.name, step)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo11_core::Payload;
    use apollo11_machine::History;

    #[test]
    fn a_skip_reason_is_the_last_one_and_an_override_after_it_clears_it() {
        let events = History::new("r")
            .created("w", Payload::Empty)
            .skipped("a", "first")
            .skipped("a", "second")
            .skipped("b", "kept")
            .skipped("c", "cleared")
            .overridden("c", OverrideTarget::Skipped, "ops", "by hand")
            .into_events();
        let reasons = skip_reasons(&events);
        let expected = BTreeMap::from([("a", "second"), ("b", "kept")]);
        assert_eq!(reasons, expected);
    }

    #[test]
    fn a_try_begun_is_the_steps_last_start_with_no_place_after_it() {
        let placed = EventKind::Placed {
            host: "h".to_owned(),
            handle: "h".to_owned(),
        };
        let events = History::new("r")
            .created("w", Payload::Empty)
            .started("a")
            .raw(Some("a"), placed.clone(), 1, Payload::Empty)
            .started("b")
            .started("c")
            .raw(Some("c"), placed, 1, Payload::Empty)
            .succeeded("c", "")
            .compensating("c")
            .into_events();
        let begun = tries_begun(&events);
        let at = |i: usize| events[i].at_ms;
        let expected = BTreeMap::from([("b", (false, at(3))), ("c", (true, at(7)))]);
        assert_eq!(
            begun, expected,
            "a was placed; c's compensation was not yet"
        );
    }

    #[test]
    fn a_placement_is_the_steps_last_with_its_payload_and_whether_it_placed_a_compensation() {
        let ran = |command: &str| Payload::inline(format!(r#"{{"command":"{command}"}}"#));
        let placed = |host: &str| EventKind::Placed {
            host: host.to_owned(),
            handle: "h".to_owned(),
        };
        let events = History::new("r")
            .created("w", Payload::Empty)
            .started("a")
            .raw(Some("a"), placed("one"), 1, ran("echo 1"))
            .failed("a", "boom", true)
            .started("a")
            .raw(Some("a"), placed("two"), 2, ran("echo 2"))
            .succeeded("a", "")
            .compensating("a")
            .raw(Some("a"), placed("three"), 2, Payload::inline("not json"))
            .started("b")
            .into_events();
        let last = placements(&events);
        assert_eq!(last.len(), 1, "b was never placed");
        let a = &last["a"];
        assert_eq!(
            (a.attempt, a.compensation, a.host.as_str()),
            (2, true, "three")
        );
        assert_eq!(a.payload, PayloadView::Text("not json".to_owned()));
        let before_undo = placements(&events[..7]);
        let a = &before_undo["a"];
        assert_eq!(
            (a.attempt, a.compensation, a.host.as_str()),
            (2, false, "two")
        );
        assert_eq!(a.event_id, events[5].event_id);
        let command = serde_json::json!({"command": "echo 2"});
        assert_eq!(a.payload, PayloadView::Json(command));
    }
}
