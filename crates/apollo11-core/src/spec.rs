//! The declarative part of a workflow, pinned by `RunCreated` so that a run always resumes
//! with the definition it started with. Code (Rust closures, shell commands) lives with
//! the front end; this is what the scheduler needs to decide.

use crate::{FailureClass, Wait};
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
    /// The parameters the workflow declares, in declaration order. Omitted when empty, like
    /// every field added after the first logs were written, so old definitions read the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<ParamSpec>,
    /// The values a run was started with, by parameter name, defaults filled in: set in the
    /// definition a run pins, empty in a declared workflow. A secret parameter is never here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub arguments: BTreeMap<String, Value>,
}

/// A parameter a workflow declares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSpec {
    /// Its name (`${params.NAME}`).
    pub name: String,
    /// The type a value must have.
    #[serde(rename = "type")]
    pub kind: ParamKind,
    /// The value when none is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Whether a run must be given a value (a parameter with a default never is).
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    /// What it is for, shown by `validate`, the API and the UI's start form.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Where a secret's value is read at each attempt; `None` for an ordinary parameter.
    /// A secret is never given at start and never written anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretSource>,
}

/// The type of a parameter's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    /// A UTF-8 string.
    String,
    /// A signed 64-bit integer.
    Integer,
    /// A number (integer or floating point).
    Number,
    /// `true` or `false`.
    Boolean,
    /// A JSON array.
    List,
    /// A JSON object.
    Object,
}

/// Where a secret parameter's value is read, at each attempt, by the engine running it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretSource {
    /// The engine's environment variable of this name.
    Env(String),
    /// The file at this path (read whole, one trailing newline removed).
    File(String),
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
    /// When the step runs, given how its dependencies ended.
    #[serde(default, skip_serializing_if = "TriggerRule::is_default")]
    pub trigger: TriggerRule,
    /// An expression over parameters and dependency outputs; when it is false the step is
    /// skipped, with the reason recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// A declaration that becomes one step per item. In a run's pinned definition only the
    /// lists known at run time are left ([`ItemSource::Output`]): the rest were expanded when
    /// the run was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<ForEach>,
    /// For a step a `for_each` made: its declaration and item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// For a waiting step: what it waits for. It runs no code and holds no slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
}

/// When a step runs, given how its dependencies ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerRule {
    /// Every dependency succeeded or was skipped (the default).
    #[default]
    AllSucceeded,
    /// Every dependency is done, whatever its outcome.
    AllDone,
    /// At least one dependency failed for good (cleanup, notification).
    OneFailed,
}

impl TriggerRule {
    /// Whether this is the default rule (omitted from the encoding).
    pub fn is_default(&self) -> bool {
        *self == TriggerRule::AllSucceeded
    }
}

/// One declaration, many steps: one per item.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForEach {
    /// Where the items come from.
    pub items: ItemSource,
    /// Items go in waves of this many: a wave's steps start once every step of the
    /// previous wave is done. `None`: all at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave_size: Option<u32>,
    /// A declaration run once after each wave, whose failure stops the following waves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    /// The field of an item (a JSON object) that names its step; `None`: the item itself
    /// (a string or a number) or, failing that, its position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// Where a `for_each` takes its items.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemSource {
    /// A list written in the definition (an inventory file is read into one).
    List(Vec<Value>),
    /// A list parameter.
    Param(String),
    /// The JSON output of a dependency, at a path (`""`: the whole output), known only
    /// when that dependency succeeds.
    Output {
        /// The dependency.
        step: String,
        /// A dotted path into its JSON output.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        path: String,
    },
}

/// Which declaration and item a step was made from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The declaration's name.
    pub declaration: String,
    /// The item (`${item}`).
    pub item: Value,
    /// The key shown in the step's name (`declaration[key]`).
    pub key: String,
    /// Its wave, from 1, when the declaration goes in waves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<u32>,
}

fn is_false(b: &bool) -> bool {
    !*b
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
    /// What differs for a failure of a class, by the class's name (`exit:75`), its family
    /// (`exit`, `signal`) or an author's class (`transient`); looked up in that order.
    /// Classes without an entry take the fields above, but for the defaults
    /// [`RetryPolicy::class`] documents. Omitted when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_class: BTreeMap<String, ClassRetry>,
    /// The same failure (same class, same fingerprint) this many times in a row stops the
    /// retries: the failure is deterministic, and the run pauses or rolls back per
    /// `on_failure`. 0 turns the rule off. Omitted when 2, the default.
    #[serde(
        default = "same_failure_default",
        skip_serializing_if = "is_same_failure_default"
    )]
    pub same_failure_max: u32,
}

/// The default of [`RetryPolicy::same_failure_max`].
pub const SAME_FAILURE_MAX_DEFAULT: u32 = 2;

fn same_failure_default() -> u32 {
    SAME_FAILURE_MAX_DEFAULT
}

fn is_same_failure_default(n: &u32) -> bool {
    *n == SAME_FAILURE_MAX_DEFAULT
}

/// The retry policy of one class of failure, over its step's: each field left `None` is
/// the step's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassRetry {
    /// Never try again after a failure of this class.
    #[serde(default, skip_serializing_if = "is_false")]
    pub never: bool,
    /// Most attempts in all while failures are of this class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Shape of the delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
    /// Delay before the first retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_ms: Option<u64>,
    /// Upper bound of any delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<u64>,
    /// Up to this percentage of a delay is removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_pct: Option<u8>,
    /// The same failure this many times in a row stops the retries (0: never); a class
    /// whose failures repeat themselves by nature (a service refusing connections until
    /// it is up) sets 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_failure_max: Option<u32>,
    /// After a failure of this class, the next attempt's memory limit is the last one's
    /// times this many hundredths (200: doubled), up to [`ClassRetry::memory_max`]; for
    /// `oom` above all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_factor_pct: Option<u32>,
    /// The most memory a grown limit reaches, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max: Option<u64>,
}

impl ClassRetry {
    /// A class never retried.
    pub fn never() -> ClassRetry {
        ClassRetry {
            never: true,
            ..ClassRetry::default()
        }
    }
}

/// What a retry policy says of one class of failure: stop, or retry with this policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClassPolicy {
    /// Never retried; the text says why (`class spawn is never retried`).
    Never(String),
    /// Retried under this policy (the step's, with the class's fields over it).
    Retry(RetryPolicy),
}

impl RetryPolicy {
    /// The policy for a failure of `class`: its entry in [`RetryPolicy::by_class`] (by
    /// name, then by family) over this policy; with no entry, `spawn` and
    /// `output_too_large` are never retried (the same command fails the same way), and
    /// every other class takes this policy.
    pub fn class(&self, class: &FailureClass) -> ClassPolicy {
        let name = class.name();
        let entry = self
            .by_class
            .get(&name)
            .or_else(|| self.by_class.get(class.family()));
        match entry {
            Some(c) if c.never => ClassPolicy::Never(format!("class {name} is never retried")),
            Some(c) => ClassPolicy::Retry(RetryPolicy {
                max_attempts: c.max_attempts.unwrap_or(self.max_attempts),
                backoff: c.backoff.unwrap_or(self.backoff),
                initial_ms: c.initial_ms.unwrap_or(self.initial_ms),
                max_ms: c.max_ms.unwrap_or(self.max_ms),
                jitter_pct: c.jitter_pct.unwrap_or(self.jitter_pct),
                by_class: BTreeMap::new(),
                same_failure_max: c.same_failure_max.unwrap_or(self.same_failure_max),
            }),
            None if matches!(class, FailureClass::Spawn | FailureClass::OutputTooLarge) => {
                ClassPolicy::Never(format!("class {name} is never retried by default"))
            }
            None => ClassPolicy::Retry(self.clone()),
        }
    }
}

impl RetryPolicy {
    /// The memory limit of the attempt after one that ran with `limit` bytes and failed
    /// with `class`: grown by the class's `memory_factor_pct`, up to its `memory_max` (a
    /// ceiling below `limit` keeps `limit`); `limit` itself when the class grows nothing.
    pub fn memory_after(&self, class: &FailureClass, limit: u64) -> u64 {
        let entry =
            (self.by_class.get(&class.name())).or_else(|| self.by_class.get(class.family()));
        let Some(pct) = entry.and_then(|c| c.memory_factor_pct) else {
            return limit;
        };
        let grown = u64::try_from(u128::from(limit) * u128::from(pct) / 100).unwrap_or(u64::MAX);
        let ceiling = entry.and_then(|c| c.memory_max).unwrap_or(u64::MAX);
        grown.min(ceiling).max(limit)
    }
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
            by_class: BTreeMap::new(),
            same_failure_max: SAME_FAILURE_MAX_DEFAULT,
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
            params: Vec::new(),
            arguments: BTreeMap::new(),
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
            trigger: TriggerRule::AllSucceeded,
            condition: None,
            for_each: None,
            origin: None,
            wait: None,
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

    /// The step waiting for `wait` instead of running code.
    pub fn with_wait(mut self, wait: Wait) -> StepSpec {
        self.wait = Some(wait);
        self
    }

    /// The step with this timeout per attempt.
    pub fn with_timeout(mut self, timeout: Timeout) -> StepSpec {
        self.timeout = timeout;
        self
    }
}
