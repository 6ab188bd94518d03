//! The declarative part of a workflow, pinned by `RunCreated` so that a run always resumes
//! with the definition it started with. Code (Rust closures, shell commands) lives with
//! the front end; this is what the scheduler needs to decide.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A workflow definition as the scheduler sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowSpec {
    /// Workflow name.
    pub name: String,
    /// What to do when a step fails for good.
    pub on_failure: OnFailure,
    /// Most steps running at once in one run.
    pub max_concurrency: u32,
    /// The steps, in declaration order.
    pub steps: Vec<StepSpec>,
    /// What a front end pins with the run besides the schedule (the CLI keeps the workflow
    /// file's folder here). Omitted from the encoding when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// One step of a workflow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepSpec {
    /// Unique name within the workflow.
    pub name: String,
    /// Steps that must be succeeded or skipped before this one starts.
    pub depends_on: Vec<String>,
    /// How the step is made safe to rerun.
    pub idempotency: Idempotency,
    /// Whether the step has a compensation (required for `Idempotency::Compensate`).
    pub has_compensation: bool,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// Timeout of one attempt.
    pub timeout: Timeout,
    /// What a front end pins with the step (the CLI keeps its shell commands here). Omitted
    /// from the encoding when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// What a run does when a step fails and has no retry left.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Wait for an operator.
    Pause,
    /// Compensate every succeeded step that has a compensation, in reverse topological order.
    Rollback,
}

/// How a step is made safe to run again after a crash or a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Idempotency {
    /// Safe to rerun as is.
    Natural,
    /// The engine passes the stable key `run_id/step`; the step dedupes on it.
    Keyed,
    /// The step resumes from its own marker; the engine passes the previous attempt's payload.
    Checkpoint,
    /// Not idempotent: its compensation runs before any rerun.
    Compensate,
}

/// Retry policy of a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Most attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Shape of the delay between attempts.
    pub backoff: Backoff,
    /// Delay before the second attempt.
    pub initial_ms: u64,
    /// Upper bound of any delay.
    pub max_ms: u64,
    /// Up to this percentage of a delay is removed, deterministically per run/step/attempt.
    pub jitter_pct: u8,
}

/// Backoff shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backoff {
    /// Always `initial_ms`.
    Fixed,
    /// `initial_ms * 2^(attempt-1)`, capped at `max_ms`.
    Exponential,
}

/// Timeout of one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Timeout {
    /// No timeout.
    None,
    /// A fixed number of milliseconds.
    Fixed(u64),
    /// 2× the p99 of the step's past successful durations, or `fallback_ms` until enough
    /// samples exist.
    Auto {
        /// Used until `limits::AUTO_TIMEOUT_SAMPLES_MIN` samples exist.
        fallback_ms: u64,
    },
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::Exponential,
            initial_ms: 1_000,
            max_ms: 60_000,
            jitter_pct: 0,
        }
    }
}

impl WorkflowSpec {
    /// A workflow of `steps` (in declaration order) running at most 8 steps at once, with
    /// no attributes.
    pub fn new(name: &str, on_failure: OnFailure, steps: Vec<StepSpec>) -> WorkflowSpec {
        WorkflowSpec {
            name: name.to_owned(),
            on_failure,
            max_concurrency: 8,
            steps,
            attributes: BTreeMap::new(),
        }
    }

    /// The workflow running at most `n` steps at once.
    pub fn with_max_concurrency(mut self, n: u32) -> WorkflowSpec {
        self.max_concurrency = n;
        self
    }
}

impl StepSpec {
    /// A step with default retry policy, no timeout and no compensation.
    pub fn new(name: &str, depends_on: &[&str], idempotency: Idempotency) -> StepSpec {
        StepSpec {
            name: name.to_owned(),
            depends_on: depends_on.iter().map(|d| (*d).to_owned()).collect(),
            idempotency,
            has_compensation: false,
            retry: RetryPolicy::default(),
            timeout: Timeout::None,
            attributes: BTreeMap::new(),
        }
    }

    /// The step, declared with a compensation.
    pub fn with_compensation(mut self) -> StepSpec {
        self.has_compensation = true;
        self
    }

    /// The step with this retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> StepSpec {
        self.retry = retry;
        self
    }

    /// The step with this timeout per attempt.
    pub fn with_timeout(mut self, timeout: Timeout) -> StepSpec {
        self.timeout = timeout;
        self
    }
}
