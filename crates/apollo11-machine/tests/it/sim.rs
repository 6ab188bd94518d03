//! A miniature runtime for tests: drives `decide` with a virtual clock and scripted step
//! outcomes, appends the events a real runtime would, and checks scheduling invariants on
//! every step it takes.

use crate::pinned;
use apollo11_core::{
    Event, EventId, EventKind, OverrideTarget, Payload, RunId, Seq, StepName, TriggerRule,
    WorkflowSpec,
};
use apollo11_dag::{Dag, NodeId};
use apollo11_machine::{
    decide, Command, Now, Policy, RerunPlan, RunAction, RunMachine, RunState, RunStatus, StepStatus,
};
use std::collections::{BTreeMap, BTreeSet};

/// What an attempt does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Succeeds after this many ms.
    Ok(u64),
    /// Fails after this many ms.
    Err { after_ms: u64, retryable: bool },
    /// Never finishes by itself (only a timeout or a crash ends it).
    Hang,
}

type Script = Box<dyn Fn(&str, u32) -> Outcome>;

/// A script where `step` fails after 5 ms on its attempts up to `until` (`u32::MAX` for every
/// attempt), retryably or not, and every other attempt succeeds after `ok_ms`.
pub fn failing(
    step: &'static str,
    until: u32,
    retryable: bool,
    ok_ms: u64,
) -> impl Fn(&str, u32) -> Outcome {
    move |s, attempt| {
        if s == step && attempt <= until {
            Outcome::Err {
                after_ms: 5,
                retryable,
            }
        } else {
            Outcome::Ok(ok_ms)
        }
    }
}

pub struct Sim {
    /// The run's state, folded event by event as the runtime does.
    pub machine: RunMachine,
    pub events: Vec<Event>,
    pub now_ms: u64,
    script: Script,
    /// What each try of a compensation does: `(step, try)`; `Hang` is not allowed.
    compensation_script: Script,
    /// Executing work: step -> (finishes at, is a compensation, outcome).
    executing: BTreeMap<StepName, (u64, bool, Outcome)>,
    wake_ms: Option<u64>,
    /// Most steps seen running at once.
    pub peak_running: usize,
    /// Compensation tries started.
    pub compensations: usize,
}

impl Sim {
    pub fn new(spec: &WorkflowSpec, script: impl Fn(&str, u32) -> Outcome + 'static) -> Sim {
        let machine =
            RunMachine::compile(spec, RunState::new(RunId::from("run-1")), |_, fallback| {
                fallback
            })
            .unwrap();
        let mut sim = Sim {
            machine,
            events: Vec::new(),
            now_ms: 1_000,
            script: Box::new(script),
            compensation_script: Box::new(|_, _| Outcome::Ok(5)),
            executing: BTreeMap::new(),
            wake_ms: None,
            peak_running: 0,
            compensations: 0,
        };
        sim.append(
            None,
            EventKind::RunCreated {
                workflow: spec.name.clone(),
            },
            0,
            pinned(spec),
        );
        sim
    }

    /// Scripts what each try of a compensation does.
    pub fn compensations(mut self, script: impl Fn(&str, u32) -> Outcome + 'static) -> Sim {
        self.compensation_script = Box::new(script);
        self
    }

    fn append(&mut self, step: Option<&StepName>, kind: EventKind, attempt: u32, payload: Payload) {
        let event = self.next_event(step, kind, attempt, payload);
        self.machine.apply(&event);
        self.events.push(event);
        assert!(
            !self.state().is_anomalous(),
            "decide led to an anomaly: {:?}",
            self.state()
        );
    }

    fn next_event(
        &self,
        step: Option<&StepName>,
        kind: EventKind,
        attempt: u32,
        payload: Payload,
    ) -> Event {
        let n = self.events.len() as u64 + 1;
        Event {
            event_id: EventId(n),
            run_id: self.state().run_id.clone(),
            seq: Seq(n as u32),
            step: step.cloned(),
            kind,
            attempt,
            at_ms: self.now_ms,
            instance: "sim".into(),
            payload,
        }
    }

    /// The commands `decide` gives now. Checks on every call that the machine, kept event by
    /// event, equals one built from its state and gives the same decisions as `decide`.
    pub fn decide(&self) -> Vec<Command> {
        let executing: BTreeSet<StepName> = self.executing.keys().cloned().collect();
        let now = Now {
            ms: self.now_ms,
            executing: &executing,
        };
        let rebuilt = RunMachine::new(
            self.dag().clone(),
            self.policy().clone(),
            self.state().clone(),
        );
        assert_eq!(self.machine, rebuilt, "the machine's index drifted");
        let incremental = self.machine.decide(now);
        assert_eq!(
            incremental,
            decide(self.state(), self.dag(), self.policy(), now)
        );
        incremental
    }

    pub fn state(&self) -> &RunState {
        self.machine.state()
    }

    pub fn dag(&self) -> &Dag {
        self.machine.dag()
    }

    pub fn policy(&self) -> &Policy {
        self.machine.policy()
    }

    /// Carries out commands; returns the terminal status if one was reached.
    fn execute(&mut self, commands: Vec<Command>) -> Option<RunStatus> {
        for command in commands {
            if let Command::Start { step, .. } = &command {
                self.check_startable(step);
            }
            if let Some((step, kind, attempt)) = command.event() {
                self.append(Some(step), kind, attempt, Payload::Empty);
            }
            match command {
                Command::Start { step, attempt } => self.start(step, attempt),
                Command::Fail { step, .. } => {
                    self.executing.remove(&step);
                }
                Command::Skip { step, .. } => assert!(
                    !self.executing.contains_key(&step),
                    "{step} skipped while executing"
                ),
                Command::Fire { step, .. } => assert!(
                    !self.executing.contains_key(&step),
                    "the timer of {step} fired while it was executing"
                ),
                Command::FailCompensation { step, .. } => assert!(
                    !self.executing.contains_key(&step),
                    "the compensation of {step} failed as interrupted while executing"
                ),
                Command::Compensate { step, .. } => {
                    let tries = self.state().step(step.as_str()).compensation_tries;
                    let outcome = (self.compensation_script)(step.as_str(), tries);
                    let ends = match outcome {
                        Outcome::Ok(ms) | Outcome::Err { after_ms: ms, .. } => self.now_ms + ms,
                        Outcome::Hang => unreachable!("compensations in the sim always end"),
                    };
                    self.compensations += 1;
                    self.executing.insert(step, (ends, true, outcome));
                }
                Command::Pause { reason, .. } => {
                    let kind = EventKind::RunPaused {
                        by: "engine".into(),
                        reason,
                    };
                    self.append(None, kind, 0, Payload::Empty);
                }
                Command::WakeAt { ms } => {
                    assert!(
                        ms > self.now_ms,
                        "WakeAt({ms}) is not in the future ({})",
                        self.now_ms
                    );
                    self.wake_ms = Some(ms);
                }
                Command::Finish { status } => return Some(status),
            }
        }
        None
    }

    /// A step may start only after its dependencies (all of them succeeded or skipped,
    /// unless its trigger rule says otherwise), a `one_failed` one, first start or rerun,
    /// only while one has failed, and never after its own success.
    fn check_startable(&self, step: &StepName) {
        let node = self.dag().node(step.as_str()).unwrap();
        let trigger = self.policy().step(node).trigger;
        let all_succeeded = trigger == TriggerRule::AllSucceeded;
        let status = |d: &NodeId| self.state().status(self.dag().name(*d));
        assert!(
            trigger != TriggerRule::OneFailed
                || (self.dag().dependencies(node).iter()).any(|d| status(d) == StepStatus::Failed),
            "{step} (one_failed) started while no dependency has failed"
        );
        for &d in self
            .dag()
            .dependencies(node)
            .iter()
            .filter(|_| all_succeeded)
        {
            assert!(
                self.state()
                    .status(self.dag().name(d))
                    .satisfies_dependents(),
                "{step} started before {}",
                self.dag().name(d)
            );
        }
        assert_ne!(
            self.state().status(step.as_str()),
            StepStatus::Succeeded,
            "{step} rerun after success"
        );
    }

    /// Runs a step whose `Started` was appended.
    fn start(&mut self, step: StepName, attempt: u32) {
        let outcome = (self.script)(step.as_str(), attempt);
        let ends = match outcome {
            Outcome::Ok(ms) | Outcome::Err { after_ms: ms, .. } => self.now_ms + ms,
            Outcome::Hang => u64::MAX,
        };
        self.executing.insert(step, (ends, false, outcome));
        let running = self
            .state()
            .steps
            .values()
            .filter(|s| s.status == StepStatus::Running)
            .count();
        self.peak_running = self.peak_running.max(running);
        assert!(
            running <= self.policy().max_concurrency() as usize,
            "concurrency limit broken"
        );
    }

    /// Advances the clock to the next completion or wake-up and completes what is due.
    fn advance(&mut self) {
        let next_end = self.executing.values().map(|(t, _, _)| *t).min();
        let next = [next_end, self.wake_ms].into_iter().flatten().min();
        let next =
            next.expect("nothing executing and nothing to wait for, but the run is not finished");
        assert!(
            next != u64::MAX,
            "only hung steps remain and no timeout will end them"
        );
        self.now_ms = self.now_ms.max(next);
        self.wake_ms = None;
        let due: Vec<StepName> = self
            .executing
            .iter()
            .filter(|(_, (t, _, _))| *t <= self.now_ms)
            .map(|(s, _)| s.clone())
            .collect();
        for step in due {
            let (_, compensation, outcome) = self.executing.remove(&step).unwrap();
            let attempt = self.state().step(step.as_str()).attempt;
            let kind = match (compensation, outcome) {
                (true, Outcome::Ok(_)) => EventKind::Compensated,
                (true, Outcome::Err { retryable, .. }) => EventKind::CompensationFailed {
                    error: "undo failed".into(),
                    retryable,
                },
                (true, Outcome::Hang) => unreachable!("compensations in the sim always end"),
                (false, Outcome::Ok(_)) => EventKind::Succeeded,
                (false, Outcome::Err { retryable, .. }) => {
                    EventKind::AttemptFailed(apollo11_core::AttemptFailure::new(
                        apollo11_core::FailureClass::Error,
                        "boom",
                        retryable,
                    ))
                }
                (false, Outcome::Hang) => unreachable!("a hung step never comes due"),
            };
            let payload = if kind == EventKind::Succeeded {
                Payload::inline(format!("{step}#{attempt}"))
            } else {
                Payload::Empty
            };
            self.append(Some(&step), kind, attempt, payload);
        }
    }

    /// One decision and its execution; when it decided nothing but waiting, the clock moves
    /// to the next completion or wake-up. Returns the terminal status once reached.
    pub fn round(&mut self) -> Option<RunStatus> {
        let commands = self.decide();
        let acted = commands
            .iter()
            .any(|c| !matches!(c, Command::WakeAt { .. }));
        if let Some(status) = self.execute(commands) {
            assert!(self.executing.is_empty(), "finished with work executing");
            return Some(status);
        }
        if !acted {
            self.advance();
        }
        None
    }

    /// Runs until the run is terminal.
    pub fn run(&mut self) -> RunStatus {
        for _ in 0..100_000 {
            if let Some(status) = self.round() {
                return status;
            }
        }
        panic!("the run made no progress in 100,000 decisions");
    }

    /// The scheduler dies: everything executing is forgotten.
    pub fn crash(&mut self) {
        self.executing.clear();
        self.wake_ms = None;
    }

    /// Runs decisions until `step` has started `attempt` (then stops, as if killed mid-step).
    pub fn run_until_started(&mut self, step: &str, attempt: u32) {
        for _ in 0..10_000 {
            let s = self.state().step(step);
            if s.status == StepStatus::Running && s.attempt == attempt {
                return;
            }
            assert!(self.round().is_none(), "run ended before {step} started");
        }
        panic!("{step} never started attempt {attempt}");
    }

    /// An operator's action on the run, appended as its run-level event.
    pub fn operator(&mut self, action: RunAction, reason: &str) {
        self.append(None, action.event("operator", reason), 0, Payload::Empty);
    }

    /// An operator's rerun of `step` (and its downstream steps), as the machine plans it.
    pub fn rerun(&mut self, step: &str, downstream: bool) -> RerunPlan {
        let plan = self.machine.check_rerun(step, downstream).unwrap();
        self.append(None, plan.event("operator", "again"), 0, Payload::Empty);
        plan
    }

    pub fn override_step(&mut self, step: &str, to: OverrideTarget, reason: &str) {
        let attempt = self.state().step(step).attempt;
        let kind = EventKind::ManualOverride {
            to,
            by: "operator".into(),
            reason: reason.into(),
        };
        let step = StepName::from(step);
        self.append(Some(&step), kind, attempt, Payload::Empty);
        // As the runtime's driver does: work the override made stale is stopped.
        self.executing.remove(&step);
    }

    /// Appends an event no decision asked for (to make the run anomalous), unchecked.
    pub fn inject(&mut self, step: &str, kind: EventKind) {
        let step = StepName::from(step);
        let attempt = self.state().step(step.as_str()).attempt;
        let event = self.next_event(Some(&step), kind, attempt, Payload::Empty);
        self.machine.apply(&event);
        self.events.push(event);
    }

    /// `step=status#attempt` for every step, in declaration order.
    pub fn summary(&self) -> String {
        self.dag()
            .nodes()
            .map(|n| {
                let s = self.state().step(self.dag().name(n));
                format!("{}={}#{}", self.dag().name(n), s.status, s.attempt)
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The order in which events of `kind` name steps.
    pub fn steps_with(&self, kind: &str) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e.kind.name() == kind)
            .filter_map(|e| e.step.as_ref().map(|s| s.to_string()))
            .collect()
    }
}
