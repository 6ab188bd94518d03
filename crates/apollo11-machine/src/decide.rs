//! `decide`: the scheduling brain as a pure function. The runtime calls it after every
//! change, executes the commands, appends the events they produce, and calls it again.
//!
//! Once a step has failed for good, nothing new starts but the handlers (steps whose
//! trigger rule is `all_done` or `one_failed`, see `trigger.rs`): they start, or are
//! skipped, as their rule says, and are retried per their policy. Under `on_failure =
//! "pause"` the run pauses once no handler has anything left to do and nothing runs; under
//! `"rollback"` the rollback starts only then, so a cleanup or a notification runs before
//! the compensations (and, having succeeded, is compensated first if it has a
//! compensation). An operator's rollback without a failure runs no handler.

use crate::interrupt::interruptions_pause;
use crate::retry::{compensation_delay_ms, delay_ms};
use crate::rollback::{compensation_stuck, failed_for_good, rolling_back, status_with, to_undo};
use crate::trigger::{handlers_due, verdict, Verdict};
use crate::wait::{fired, holding_slots, timer_due_ms, waits};
use crate::{Frontier, Policy, RunState, RunStatus, StepState, StepStatus};
use apollo11_core::{AttemptFailure, EventKind, FailureClass, Idempotency, StepName};
use apollo11_dag::{Dag, NodeId};
use std::collections::BTreeSet;
use std::fmt;

/// The present as the runtime sees it: the time, and the steps whose attempt or
/// compensation it is executing right now. A step the log says is running but that is not
/// executing was left behind by a scheduler that died.
#[derive(Clone, Copy, Debug)]
pub struct Now<'a> {
    /// Wall-clock milliseconds, on the same clock as events' `at_ms`.
    pub ms: u64,
    /// Steps being executed by the caller.
    pub executing: &'a BTreeSet<StepName>,
}

/// Why the machine itself ends an attempt or a compensation try. A timeout is the step's
/// failure, recorded as the error text `"timeout"` of a `Failed` event; an interruption is
/// not, and is recorded as an `Interrupted` event, which spends no attempt (logs written
/// before it existed recorded a `Failed` event with the text `"interrupted"`, and still
/// fold as they did).
///
/// Exhaustive: front ends describe each reason (the plan tells an interrupted attempt from a
/// timed-out one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailReason {
    /// The attempt ran past its timeout: the runtime stops it.
    Timeout,
    /// A scheduler that died left the attempt or try unfinished.
    Interrupted,
}

impl FailReason {
    /// The error text the event records.
    pub fn as_str(self) -> &'static str {
        match self {
            FailReason::Timeout => "timeout",
            FailReason::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing for the runtime to do. Exhaustive on purpose: a runtime that meets a command it
/// does not know must not compile, rather than skip it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Append `Started(attempt)` and run the step.
    Start {
        /// The step.
        step: StepName,
        /// The attempt to start.
        attempt: u32,
    },
    /// Append `Failed` of class `timeout`, retryable, for an attempt that timed out
    /// (stop it), or `Interrupted` for one that a dead scheduler left running.
    Fail {
        /// The step.
        step: StepName,
        /// The attempt that failed.
        attempt: u32,
        /// Why.
        reason: FailReason,
    },
    /// Append `Compensating` and run one try of the step's compensation, whose outcome is
    /// appended as `Compensated` or `CompensationFailed`.
    Compensate {
        /// The step.
        step: StepName,
        /// Its current attempt.
        attempt: u32,
    },
    /// Append `Interrupted` for a try of a compensation that a dead scheduler left
    /// unfinished; it is retried like a failed try, but spends no try.
    FailCompensation {
        /// The step.
        step: StepName,
        /// Its current attempt.
        attempt: u32,
    },
    /// Append `RunPaused {by: the engine, reason}`: a step's tries were interrupted
    /// [`crate::INTERRUPTIONS_MAX`] times in a row, so it may be what takes the engine
    /// down; a person looks before it runs again, and resumes the run.
    Pause {
        /// The step.
        step: StepName,
        /// Why, naming the step and its interruptions.
        reason: String,
    },
    /// Append `Skipped {reason}`: the step's trigger rule can never hold, so a pending step
    /// will not run, and a failed or compensated one will not run again (an override took
    /// away the failure it handled); its dependents take it as a success.
    Skip {
        /// The step.
        step: StepName,
        /// Its current attempt (0 for a step never started, unless an operator put it back
        /// to pending).
        attempt: u32,
        /// Why, naming the rule.
        reason: String,
    },
    /// Append `Succeeded`, with no output, for a waiting step whose timer is due.
    Fire {
        /// The step.
        step: StepName,
        /// Its waiting attempt.
        attempt: u32,
    },
    /// Nothing more is due before this time (a retry backoff or a timeout); decide again then.
    WakeAt {
        /// Wall-clock milliseconds.
        ms: u64,
    },
    /// The run reached a terminal status.
    Finish {
        /// How it ended.
        status: RunStatus,
    },
}

impl Command {
    /// The event this command appends, durable before anything it starts runs:
    /// (step, kind, attempt); `None` for commands that append nothing.
    pub fn event(&self) -> Option<(&StepName, EventKind, u32)> {
        match self {
            Command::Start { step, attempt } => Some((step, EventKind::Started, *attempt)),
            Command::Fail {
                step,
                attempt,
                reason: FailReason::Timeout,
            } => {
                let failed = EventKind::AttemptFailed(AttemptFailure::new(
                    FailureClass::Timeout,
                    FailReason::Timeout.as_str(),
                    true,
                ));
                Some((step, failed, *attempt))
            }
            Command::Fail {
                step,
                attempt,
                reason: FailReason::Interrupted,
            }
            | Command::FailCompensation { step, attempt } => {
                Some((step, EventKind::Interrupted, *attempt))
            }
            Command::Compensate { step, attempt } => {
                Some((step, EventKind::Compensating, *attempt))
            }
            Command::Skip {
                step,
                attempt,
                reason,
            } => {
                let skipped = EventKind::Skipped {
                    reason: reason.clone(),
                };
                Some((step, skipped, *attempt))
            }
            Command::Fire { step, attempt } => Some((step, EventKind::Succeeded, *attempt)),
            Command::Pause { .. } | Command::WakeAt { .. } | Command::Finish { .. } => None,
        }
    }
}

/// Decides what to do next for one run. Deterministic: commands come in topological order
/// of their steps, ties broken by name. An empty result means "wait for an executing step".
pub fn decide(state: &RunState, dag: &Dag, policy: &Policy, now: Now<'_>) -> Vec<Command> {
    decide_with(state, dag, policy, now, &Frontier::new(dag, state))
}

/// [`decide`] with the run's [`Frontier`] kept current by [`crate::RunMachine`]: the same
/// decisions, in time proportional to what the run is doing rather than to its number of
/// steps.
pub(crate) fn decide_with(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    now: Now<'_>,
    f: &Frontier,
) -> Vec<Command> {
    let urgent = interrupted_and_timed_out(state, dag, policy, now, f);
    if !urgent.is_empty() {
        return urgent;
    }
    let status = status_with(state, dag, policy, f);
    if status.is_terminal() {
        return vec![Command::Finish { status }];
    }
    if let Some(pause) = interruptions_pause(state, dag, f) {
        return vec![pause];
    }
    let rolling_back = rolling_back(state, dag, policy, f);
    let mut commands = if state.anomaly.is_some()
        || f.anomalous()
        || compensation_stuck(state, dag, policy, f)
        || state.paused.is_some()
    {
        Vec::new()
    } else if !state.undo_first.is_empty() {
        // An operator's rerun compensates its steps before anything starts.
        let undo: Vec<NodeId> = (state.undo_first.iter())
            .filter_map(|s| dag.node(s.as_str()))
            .collect();
        undo_wave(state, dag, policy, now, f, &undo)
    } else if failed_for_good(state, dag, policy, f) {
        // Only handlers go on; running work finishes. Then the run rolls back or pauses.
        let handling = handle_failure(state, dag, policy, now, f, rolling_back);
        if handling.is_empty() && rolling_back {
            rollback_wave(state, dag, policy, now, f)
        } else {
            handling
        }
    } else if rolling_back {
        rollback_wave(state, dag, policy, now, f)
    } else {
        progress(state, dag, policy, now, f)
    };
    let wake = commands
        .iter()
        .filter_map(|c| match c {
            Command::WakeAt { ms } => Some(*ms),
            _ => None,
        })
        .chain(next_timeout_ms(state, dag, policy, f))
        .min();
    commands.retain(|c| !matches!(c, Command::WakeAt { .. }));
    commands.extend(wake.map(|ms| Command::WakeAt { ms }));
    commands
}

/// Steps left running or compensating by a dead scheduler, attempts past their timeout,
/// and waiting steps whose timer is due (a timer due before the deadline fires first).
fn interrupted_and_timed_out(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    now: Now<'_>,
    f: &Frontier,
) -> Vec<Command> {
    let mut commands = Vec::new();
    for &(_, n) in &f.busy {
        let name = dag.name(n);
        let step = state.step(name);
        let executing = now.executing.contains(name);
        let attempt = step.attempt;
        let step_name = || StepName(name.to_owned());
        if let Some(fire) = fired(step, name, policy, n, now.ms) {
            commands.push(fire);
            continue;
        }
        match step.status {
            StepStatus::Running if !executing && !waits(policy, n) => {
                commands.push(Command::Fail {
                    step: step_name(),
                    attempt,
                    reason: FailReason::Interrupted,
                })
            }
            StepStatus::Running if timeout_at(step, policy, n).is_some_and(|t| t <= now.ms) => {
                commands.push(Command::Fail {
                    step: step_name(),
                    attempt,
                    reason: FailReason::Timeout,
                })
            }
            StepStatus::Compensating if !executing => commands.push(Command::FailCompensation {
                step: step_name(),
                attempt,
            }),
            _ => {}
        }
    }
    commands
}

fn timeout_at(step: &StepState, policy: &Policy, node: NodeId) -> Option<u64> {
    let timeout = policy.step(node).timeout_ms?;
    Some(step.started_ms?.saturating_add(timeout))
}

fn next_timeout_ms(state: &RunState, dag: &Dag, policy: &Policy, f: &Frontier) -> Option<u64> {
    f.busy
        .iter()
        .filter_map(|&(_, n)| {
            let step = state.step(dag.name(n));
            let running = step.status == StepStatus::Running;
            let deadline = running.then(|| timeout_at(step, policy, n)).flatten();
            let timer = running.then(|| timer_due_ms(step, policy, n)).flatten();
            deadline.into_iter().chain(timer).min()
        })
        .min()
}

/// Normal forward progress: start ready steps up to the concurrency limit, skip those
/// whose trigger rule can never hold, retry failed ones after their backoff, compensate
/// failed `compensate`-class steps before their rerun.
fn progress(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    now: Now<'_>,
    f: &Frontier,
) -> Vec<Command> {
    let mut slots =
        (policy.max_concurrency() as usize).saturating_sub(holding_slots(state, dag, policy, f));
    f.candidates
        .iter()
        .filter_map(|&(_, n)| advance(state, dag, policy, now, n, false, &mut slots))
        .collect()
}

/// Progress in a run where a step failed for good: only the handlers (`all_done`,
/// `one_failed`) with something to do; see `trigger.rs`.
fn handle_failure(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    now: Now<'_>,
    f: &Frontier,
    rolling_back: bool,
) -> Vec<Command> {
    let mut slots =
        (policy.max_concurrency() as usize).saturating_sub(holding_slots(state, dag, policy, f));
    handlers_due(state, dag, policy, f, rolling_back)
        .filter_map(|n| advance(state, dag, policy, now, n, true, &mut slots))
        .collect()
}

/// What to do with one step that may start, be retried, compensated or skipped: `failing`
/// when a step of the run has failed for good (see [`verdict`]).
fn advance(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    now: Now<'_>,
    n: NodeId,
    failing: bool,
    slots: &mut usize,
) -> Option<Command> {
    let name = dag.name(n);
    let step = state.step(name);
    let due_ms = match step.status {
        StepStatus::Pending => 0,
        StepStatus::Failed if policy.step(n).idempotency == Idempotency::Compensate => {
            return Some(Command::Compensate {
                step: StepName(name.into()),
                attempt: step.attempt,
            });
        }
        StepStatus::CompensationFailed => {
            return Some(compensation_retry(state, dag, policy, now, n));
        }
        StepStatus::Failed | StepStatus::Compensated => retry_due_ms(state, dag, policy, n),
        // The frontier only lists the four states above; a stale one is not trusted.
        StepStatus::Running
        | StepStatus::Succeeded
        | StepStatus::Compensating
        | StepStatus::Skipped
        | StepStatus::Anomalous => return None,
    };
    // The rule is asked again before every try, not only the first: a handler whose rule no
    // longer holds (an override took its failure away) is skipped at once, not rerun.
    let verdict = verdict(state, dag, policy, n, failing);
    if let Verdict::Never(reason) = verdict {
        return Some(Command::Skip {
            step: StepName(name.into()),
            attempt: step.attempt,
            reason,
        });
    }
    if due_ms > now.ms {
        return Some(Command::WakeAt { ms: due_ms });
    }
    (verdict == Verdict::Holds && *slots > 0).then(|| {
        *slots -= 1;
        Command::Start {
            step: StepName(name.into()),
            attempt: step.attempt + 1,
        }
    })
}

/// When a step that failed (or was compensated after failing) may start again; a step
/// compensated after succeeding may rerun at once.
fn retry_due_ms(state: &RunState, dag: &Dag, policy: &Policy, node: NodeId) -> u64 {
    let name = dag.name(node);
    let step = state.step(name);
    step.last_error.as_ref().map_or(0, |failure| {
        let retry = &policy.step(node).retry;
        let delay = delay_ms(failure, retry, state.run_id.as_str(), name, step.attempt);
        failure.at_ms.saturating_add(delay)
    })
}

/// The next try of a compensation that failed: `Compensate` once the delay the failed try
/// asked for (within its policy's `max_ms`), else the step's backoff, has passed from it;
/// else `WakeAt` that time.
fn compensation_retry(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    now: Now<'_>,
    node: NodeId,
) -> Command {
    let name = dag.name(node);
    let step = state.step(name);
    let due_ms = step.compensation_error.as_ref().map_or(0, |failure| {
        let delay = compensation_delay_ms(
            failure,
            &policy.step(node).retry,
            state.run_id.as_str(),
            name,
            step.compensation_tries,
        );
        failure.at_ms.saturating_add(delay)
    });
    if due_ms > now.ms {
        Command::WakeAt { ms: due_ms }
    } else {
        Command::Compensate {
            step: StepName(name.into()),
            attempt: step.attempt,
        }
    }
}

/// The next wave of a rollback: wait for running attempts to end, then compensate every
/// step none of whose dependents still needs compensating (a failed try is retried after
/// its backoff, and the steps it depends on wait for it).
fn rollback_wave(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    now: Now<'_>,
    f: &Frontier,
) -> Vec<Command> {
    undo_wave(state, dag, policy, now, f, &to_undo(state, dag, policy))
}

/// The next wave of compensations of `undo` (a rollback's, or a rerun's before its steps
/// run again), in reverse topological order, once no attempt is at work.
fn undo_wave(
    state: &RunState,
    dag: &Dag,
    policy: &Policy,
    now: Now<'_>,
    f: &Frontier,
    undo: &[NodeId],
) -> Vec<Command> {
    if f.running > 0 {
        return Vec::new();
    }
    let Some(wave) = dag.compensation_plan(undo).into_iter().next() else {
        return Vec::new();
    };
    wave.into_iter()
        .filter_map(|n| {
            let step = state.step(dag.name(n));
            match step.status {
                StepStatus::Compensating => None,
                StepStatus::CompensationFailed => {
                    Some(compensation_retry(state, dag, policy, now, n))
                }
                StepStatus::Succeeded | StepStatus::Failed => Some(Command::Compensate {
                    step: StepName(dag.name(n).into()),
                    attempt: step.attempt,
                }),
                // Neither a rollback nor a rerun undoes any of these.
                StepStatus::Pending
                | StepStatus::Running
                | StepStatus::Compensated
                | StepStatus::Skipped
                | StepStatus::Anomalous => None,
            }
        })
        .collect()
}
