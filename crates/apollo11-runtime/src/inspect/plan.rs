//! What resuming a run would do now: the same `decide` the engine runs, on the same state,
//! with nothing executing (as after a crash). Attempts and compensation tries it would mark
//! interrupted (or fail past their timeout), steps it would skip, and a pause it would make,
//! are folded, so the plan also shows what follows from them.

use super::Pause;
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
    /// Skip a step whose trigger rule can never hold.
    Skip {
        /// The step.
        step: StepName,
        /// Why.
        reason: String,
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

impl Plan {
    /// Follows the machine's decisions at `now_ms` until something starts or the run ends.
    pub(crate) fn new(mut machine: RunMachine, now_ms: u64) -> Plan {
        let state = machine.status();
        let nothing = BTreeSet::new();
        let mut at_ms = now_ms;
        let mut steps = Vec::new();
        for _ in 0..ROUNDS_MAX {
            let commands = machine.decide(Now {
                ms: at_ms,
                executing: &nothing,
            });
            let mut wake = None;
            let mut failures = Vec::new();
            for command in &commands {
                match command {
                    Command::WakeAt { ms } => wake = Some(*ms),
                    Command::Fail { .. }
                    | Command::FailCompensation { .. }
                    | Command::Skip { .. } => {
                        failures.extend(command.event().map(|(step, kind, attempt)| {
                            hypothetical(&machine, Some(step), kind, attempt, at_ms)
                        }));
                    }
                    Command::Pause { reason, .. } => {
                        let kind = EventKind::RunPaused {
                            by: ENGINE.to_owned(),
                            reason: reason.clone(),
                        };
                        failures.push(hypothetical(&machine, None, kind, 0, at_ms));
                    }
                    Command::Start { .. } | Command::Compensate { .. } | Command::Finish { .. } => {
                    }
                }
                steps.push(PlanStep::new(command, at_ms));
            }
            let acted = commands.iter().any(|c| {
                matches!(
                    c,
                    Command::Start { .. } | Command::Compensate { .. } | Command::Finish { .. }
                )
            });
            let failed = !failures.is_empty();
            for event in failures {
                machine.apply(&event);
            }
            match (acted, wake) {
                (false, Some(ms)) if !failed => at_ms = ms,
                (false, _) if failed => {}
                _ => break,
            }
        }
        Plan::of(state, &machine, steps)
    }

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
            PlanStep::Pause { reason, .. } => write!(f, "pause the run: {reason}"),
            PlanStep::Wait { ms } => write!(
                f,
                "then, after {} (a retry backoff or a timeout):",
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

/// The event resuming would append for a command that ends an attempt or a compensation
/// try, skips a step, or pauses the run (its id is only for the fold: it orders after the run's last
/// event).
fn hypothetical(
    machine: &RunMachine,
    step: Option<&StepName>,
    kind: EventKind,
    attempt: u32,
    at_ms: u64,
) -> Event {
    let state = machine.state();
    Event {
        event_id: EventId(state.last_event_id.0 + 1),
        run_id: state.run_id.clone(),
        seq: Seq(state.last_seq.0 + 1),
        step: step.cloned(),
        kind,
        attempt,
        at_ms,
        instance: "plan".into(),
        payload: Payload::Empty,
    }
}
