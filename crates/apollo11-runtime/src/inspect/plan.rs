//! What resuming a run would do now: the same `decide` the engine runs, on the same state,
//! with nothing executing (as after a crash), and each step it would start judged by its
//! condition as the driver judges it. Attempts and compensation tries it would mark
//! interrupted (or fail past their timeout), steps it would skip (by their trigger rule or
//! their condition) or fail for good (a condition that cannot be evaluated), and a pause it
//! would make, are folded, so the plan also shows what follows from them.

use super::Pause;
use crate::condition::Verdict;
use apollo11_core::{Event, EventId, EventKind, Payload, Seq, StepName};
use apollo11_machine::{Command, FailReason, Now, RunMachine, RunStatus};
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt;

/// How many rounds of decisions a plan follows through interruptions and backoffs.
const ROUNDS_MAX: usize = 4;

/// Who the plan says would pause the run: the engine that resumes it.
const ENGINE: &str = "the engine";

/// What resuming the run would do (the server's `GET /api/v1/runs/{id}/plan`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Plan {
    /// The run's status now.
    pub state: RunStatus,
    /// Steps that would be started again (attempt 2 or later).
    pub rerun: Vec<StepName>,
    /// Steps whose compensation would be tried.
    pub compensate: Vec<StepName>,
    /// Steps whose attempt or compensation try would be marked interrupted.
    pub interrupted: Vec<StepName>,
    /// The run's status once the interruptions are recorded.
    pub run_state_after: RunStatus,
    /// Each step of the plan, in order.
    pub steps: Vec<PlanStep>,
    /// Each step as a sentence.
    pub lines: Vec<String>,
    /// Why the run would wait for a person, when the plan ends with it paused.
    pub paused: Option<Pause>,
}

/// One thing resuming would do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "do", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PlanStep {
    /// Start a step (attempt 1) or run it again.
    Start {
        /// The step.
        step: StepName,
        /// The attempt.
        attempt: u32,
    },
    /// Fail an attempt: past its timeout, or left running by an engine that stopped.
    Fail {
        /// The step.
        step: StepName,
        /// The attempt.
        attempt: u32,
        /// `true` when interrupted, `false` when past its timeout.
        interrupted: bool,
    },
    /// Try the step's compensation.
    Compensate {
        /// The step.
        step: StepName,
    },
    /// Mark a compensation try left running as interrupted.
    FailCompensation {
        /// The step.
        step: StepName,
    },
    /// Skip a step: its trigger rule can never hold, or its condition is false.
    Skip {
        /// The step.
        step: StepName,
        /// Why.
        reason: String,
    },
    /// Fail a step for good in place of starting it: its condition cannot be evaluated.
    FailForGood {
        /// The step.
        step: StepName,
        /// The attempt.
        attempt: u32,
        /// Why.
        error: String,
    },
    /// A waiting step's timer fires: it succeeds.
    Fire {
        /// The step.
        step: StepName,
    },
    /// Pause the run for a person: a step's tries were interrupted too many times in a row.
    Pause {
        /// The step.
        step: StepName,
        /// Why.
        reason: String,
    },
    /// Wait (a retry backoff or a timeout), then go on.
    Wait {
        /// How long.
        ms: u64,
    },
    /// Nothing: the run ends with this status.
    Finish {
        /// The status.
        status: RunStatus,
    },
}

/// A plan being made, round by round: the machine's decisions at `now_ms` followed until
/// something starts or the run ends. Each round, the inspector judges each step the round
/// would start (its condition, as the driver would judge it); what a verdict appends
/// instead is folded and the plan goes on, as resume would, with what follows from it (the
/// step's dependents, per their trigger rules).
pub(crate) struct Planner {
    machine: RunMachine,
    state: RunStatus,
    round: Round,
    steps: Vec<PlanStep>,
    waits: usize,
    stopped: bool,
}

impl Planner {
    pub(crate) fn new(machine: RunMachine, now_ms: u64) -> Planner {
        Planner {
            state: machine.status(),
            machine,
            round: Round {
                at_ms: now_ms,
                ..Round::default()
            },
            steps: Vec::new(),
            waits: 0,
            stopped: false,
        }
    }

    /// The run as the plan has it so far.
    pub(crate) fn machine(&self) -> &RunMachine {
        &self.machine
    }

    /// The next round's decisions; `None` once the plan is made.
    pub(crate) fn decide(&mut self) -> Option<Vec<Command>> {
        if self.stopped || self.waits >= ROUNDS_MAX {
            return None;
        }
        Some(self.machine.decide(Now {
            ms: self.round.at_ms,
            executing: &self.round.executing,
        }))
    }

    /// Takes a round's decisions, each with the verdict on the step it would start (`None`
    /// when it runs, or starts nothing).
    pub(crate) fn take(&mut self, commands: &[Command], verdicts: Vec<Option<Verdict>>) {
        self.round.begin();
        for (command, verdict) in commands.iter().zip(verdicts) {
            let step = self.round.take(&self.machine, command, verdict);
            self.steps.push(step);
        }
        for event in std::mem::take(&mut self.round.folded) {
            self.machine.apply(&event);
        }
        match self.round.next() {
            Next::Again => {}
            Next::Wait(ms) => {
                self.round.at_ms = ms;
                self.waits += 1;
            }
            Next::Stop => self.stopped = true,
            Next::Fold => self.waits += 1,
        }
    }

    /// The plan made.
    pub(crate) fn plan(self) -> Plan {
        Plan::of(self.state, &self.machine, self.steps)
    }
}

impl Plan {
    fn of(state: RunStatus, after: &RunMachine, steps: Vec<PlanStep>) -> Plan {
        let names = |f: fn(&PlanStep) -> Option<&StepName>| -> Vec<StepName> {
            steps.iter().filter_map(f).cloned().collect()
        };
        Plan {
            state,
            rerun: names(|s| match s {
                PlanStep::Start { step, attempt } if *attempt > 1 => Some(step),
                _ => None,
            }),
            compensate: names(|s| match s {
                PlanStep::Compensate { step } => Some(step),
                _ => None,
            }),
            interrupted: names(|s| match s {
                PlanStep::Fail {
                    step,
                    interrupted: true,
                    ..
                }
                | PlanStep::FailCompensation { step } => Some(step),
                _ => None,
            }),
            run_state_after: after.status(),
            lines: steps.iter().map(ToString::to_string).collect(),
            steps,
            paused: (after.status() == RunStatus::Paused)
                .then(|| Pause::of(after))
                .flatten(),
        }
    }
}

/// What one round of decisions did, and what the plan keeps across rounds.
#[derive(Default)]
struct Round {
    /// When the round decides.
    at_ms: u64,
    /// The steps the plan started or compensates: at work from then on.
    executing: BTreeSet<StepName>,
    /// Whether the plan started, compensated or finished anything so far.
    acted: bool,
    /// The events the round's commands would append, to fold before the next round.
    folded: Vec<Event>,
    /// Whether the round skipped or judged a step: resume decides again at once.
    instant: bool,
    /// Whether the round failed a try or paused the run.
    failed: bool,
    /// When the round asked to be woken.
    wake: Option<u64>,
}

/// What the plan does after a round.
enum Next {
    /// Decide again at once.
    Again,
    /// Decide again at this time.
    Wait(u64),
    /// Decide again once the round's failures are folded.
    Fold,
    /// Nothing more to follow.
    Stop,
}

impl Round {
    fn begin(&mut self) {
        self.instant = false;
        self.failed = false;
        self.wake = None;
    }

    /// The plan's step for `command`, judged by `verdict` when it starts a step; what it
    /// would append is kept for the fold.
    fn take(
        &mut self,
        machine: &RunMachine,
        command: &Command,
        verdict: Option<Verdict>,
    ) -> PlanStep {
        match (command, verdict) {
            (Command::Start { step, attempt }, Some(verdict)) => {
                for (kind, attempt) in verdict.events(*attempt) {
                    self.fold(machine, Some((step, kind, attempt)));
                }
                self.instant = true;
                return PlanStep::judged(step, *attempt, verdict);
            }
            (Command::Start { step, .. } | Command::Compensate { step, .. }, _) => {
                self.fold(machine, command.event());
                self.executing.insert(step.clone());
                self.acted = true;
            }
            (Command::Finish { .. }, _) => self.acted = true,
            (Command::WakeAt { ms }, _) => self.wake = Some(*ms),
            (Command::Skip { .. } | Command::Fire { .. }, _) => {
                self.fold(machine, command.event());
                self.instant = true;
            }
            (Command::Fail { .. } | Command::FailCompensation { .. }, _) => {
                self.fold(machine, command.event());
                self.failed = true;
            }
            (Command::Pause { reason, .. }, _) => {
                let kind = EventKind::RunPaused {
                    by: ENGINE.to_owned(),
                    reason: reason.clone(),
                };
                self.fold_event(machine, None, kind, 0);
                self.failed = true;
            }
        }
        PlanStep::new(command, self.at_ms)
    }

    /// Keeps the event of a step's command for the fold.
    fn fold(&mut self, machine: &RunMachine, event: Option<(&StepName, EventKind, u32)>) {
        if let Some((step, kind, attempt)) = event {
            self.fold_event(machine, Some(step), kind, attempt);
        }
    }

    /// Keeps the event resuming would append, after those kept before it this round (its
    /// id is only for the fold: it orders after the run's last event).
    fn fold_event(
        &mut self,
        machine: &RunMachine,
        step: Option<&StepName>,
        kind: EventKind,
        attempt: u32,
    ) {
        let state = machine.state();
        let ahead = self.folded.len() as u64 + 1;
        self.folded.push(Event {
            event_id: EventId(state.last_event_id.0 + ahead),
            run_id: state.run_id.clone(),
            seq: Seq(state.last_seq.0 + ahead as u32),
            step: step.cloned(),
            kind,
            attempt,
            at_ms: self.at_ms,
            instance: "plan".into(),
            payload: Payload::Empty,
        });
    }

    fn next(&self) -> Next {
        if self.instant {
            return Next::Again;
        }
        match (self.acted, self.wake) {
            (false, Some(ms)) if !self.failed => Next::Wait(ms),
            (false, _) if self.failed => Next::Fold,
            _ => Next::Stop,
        }
    }
}

impl PlanStep {
    fn new(command: &Command, now_ms: u64) -> PlanStep {
        match command {
            Command::Start { step, attempt } => PlanStep::Start {
                step: step.clone(),
                attempt: *attempt,
            },
            Command::Fail {
                step,
                attempt,
                reason,
            } => PlanStep::Fail {
                step: step.clone(),
                attempt: *attempt,
                interrupted: *reason == FailReason::Interrupted,
            },
            Command::Compensate { step, .. } => PlanStep::Compensate { step: step.clone() },
            Command::FailCompensation { step, .. } => {
                PlanStep::FailCompensation { step: step.clone() }
            }
            Command::Skip { step, reason, .. } => PlanStep::Skip {
                step: step.clone(),
                reason: reason.clone(),
            },
            Command::Fire { step, .. } => PlanStep::Fire { step: step.clone() },
            Command::Pause { step, reason } => PlanStep::Pause {
                step: step.clone(),
                reason: reason.clone(),
            },
            Command::WakeAt { ms } => PlanStep::Wait {
                ms: ms.saturating_sub(now_ms),
            },
            Command::Finish { status } => PlanStep::Finish { status: *status },
        }
    }

    /// What a condition's verdict does in place of starting attempt `attempt` of `step`.
    fn judged(step: &StepName, attempt: u32, verdict: Verdict) -> PlanStep {
        let step = step.clone();
        match verdict {
            Verdict::Skip(reason) => PlanStep::Skip { step, reason },
            Verdict::Fail(error) => PlanStep::FailForGood {
                step,
                attempt,
                error,
            },
        }
    }
}

impl fmt::Display for PlanStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanStep::Start { step, attempt: 1 } => write!(f, "start {step}"),
            PlanStep::Start { step, attempt } => write!(f, "rerun {step} as attempt {attempt}"),
            PlanStep::Fail { step, attempt, interrupted: true } => write!(
                f,
                "mark {step} attempt {attempt} as interrupted (it was running when the engine stopped; that spends no attempt), then retry it per its policy"
            ),
            PlanStep::Fail { step, attempt, interrupted: false } => {
                write!(f, "fail {step} attempt {attempt}: past its timeout")
            }
            PlanStep::Compensate { step } => write!(f, "compensate {step}"),
            PlanStep::FailCompensation { step } => write!(
                f,
                "mark the compensation of {step} as interrupted (it was running when the engine stopped; that spends no try), then try it again per the step's retry policy"
            ),
            PlanStep::Skip { step, reason } => write!(f, "skip {step}: {reason}"),
            PlanStep::FailForGood { step, attempt, error } => {
                write!(f, "fail {step} attempt {attempt} for good: {error}")
            }
            PlanStep::Fire { step } => write!(f, "end the wait of {step}: its timer is due"),
            PlanStep::Pause { reason, .. } => write!(f, "pause the run: {reason}"),
            PlanStep::Wait { ms } => write!(
                f,
                "then, after {} (a retry backoff, a timeout or a timer):",
                millis(*ms)
            ),
            PlanStep::Finish { status } => write!(f, "nothing: the run is {status}"),
        }
    }
}

/// A duration as people read it: `850ms`, `1.2s`, `2m05s`.
pub fn millis(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1e3),
        _ => format!("{}m{:02}s", ms / 60_000, ms / 1_000 % 60),
    }
}
