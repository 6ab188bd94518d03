//! Workflow files: TOML in, a validated `WorkflowSpec` out. Every error names the file, the
//! line and the column of what is wrong. Shell commands and the file's folder are pinned
//! in the spec's attributes, so `resume` needs nothing but the run id.

use apollo11_core::{
    check_name, limits, Backoff, Idempotency, NameKind, OnFailure, RetryPolicy, StepSpec, Timeout,
    WorkflowSpec,
};
use apollo11_dag::DagError;
use apollo11_machine::{Policy, PolicyError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use toml::Spanned;

/// Step attribute: the step's shell command.
pub const RUN: &str = "run";
/// Step attribute: its compensation's shell command, if any.
pub const COMPENSATE: &str = "compensate";
/// Step attribute: exit codes no retry can fix, comma-separated.
pub const NON_RETRYABLE: &str = "non_retryable_exit_codes";
/// Workflow attribute: the workflow file's folder, where steps run.
pub const DIR: &str = "dir";

const DEFAULT_TIMEOUT_MS: u64 = 10 * 60 * 1000;

/// What is wrong with a workflow file, and where.
#[derive(Debug, PartialEq, Eq)]
pub struct DefinitionError {
    /// The file, as given.
    pub file: String,
    /// Line, from 1 (0 when the error is about the file as a whole).
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for DefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for DefinitionError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    workflow: Spanned<RawWorkflow>,
    #[serde(default)]
    defaults: RawDefaults,
    #[serde(default)]
    steps: Vec<Spanned<RawStep>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkflow {
    name: Spanned<String>,
    on_failure: Option<Spanned<String>>,
    max_concurrency: Option<Spanned<u32>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    timeout: Option<Spanned<String>>,
    retry: Option<RawRetry>,
    non_retryable_exit_codes: Option<Vec<i32>>,
}

#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetry {
    max_attempts: Option<Spanned<u32>>,
    backoff: Option<Spanned<String>>,
    initial: Option<Spanned<String>>,
    max: Option<Spanned<String>>,
    jitter_pct: Option<Spanned<u8>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    name: Spanned<String>,
    run: Spanned<String>,
    idempotency: Option<Spanned<String>>,
    compensate: Option<Spanned<String>>,
    #[serde(default)]
    depends_on: Vec<Spanned<String>>,
    timeout: Option<Spanned<String>>,
    retry: Option<RawRetry>,
    non_retryable_exit_codes: Option<Vec<i32>>,
}

/// Reads and validates a workflow file.
///
/// # Errors
///
/// A [`DefinitionError`] naming the file, and the line and column for an error in its text:
/// the file or its folder cannot be read, or what [`parse`] refuses.
pub fn load(path: &Path) -> Result<WorkflowSpec, DefinitionError> {
    let text = std::fs::read_to_string(path).map_err(|e| DefinitionError {
        file: path.display().to_string(),
        line: 0,
        column: 0,
        message: format!("cannot read the workflow file: {e}"),
    })?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // Steps run in this folder whatever folder `run` or `resume` is started from.
    let dir = std::fs::canonicalize(dir).map_err(|e| DefinitionError {
        file: path.display().to_string(),
        line: 0,
        column: 0,
        message: format!("cannot find the workflow file's folder: {e}"),
    })?;
    parse(&text, &path.display().to_string(), &dir)
}

/// Parses and validates workflow text; `dir` is where its steps run.
///
/// # Errors
///
/// A [`DefinitionError`] at the line and column of the first problem: TOML syntax, a bad
/// name, duration or retry setting, an unknown dependency, a cycle.
pub fn parse(text: &str, file: &str, dir: &Path) -> Result<WorkflowSpec, DefinitionError> {
    let at = Locator { text, file };
    let raw: RawFile = toml::from_str(text).map_err(|e| toml_error(text, file, &e))?;
    let workflow = raw.workflow.get_ref();
    name(&at, NameKind::Workflow, &workflow.name)?;
    for step in &raw.steps {
        name(&at, NameKind::Step, &step.get_ref().name)?;
    }
    let on_failure = match workflow
        .on_failure
        .as_ref()
        .map(|s| (s.get_ref().as_str(), s.span().start))
    {
        None | Some(("pause", _)) => OnFailure::Pause,
        Some(("rollback", _)) => OnFailure::Rollback,
        Some((other, offset)) => {
            return Err(at.error(
                offset,
                &format!("on_failure is `{other}`; expected `rollback` or `pause`"),
            ))
        }
    };
    let default_retry = retry(&at, raw.defaults.retry.as_ref(), &RetryPolicy::default())?;
    let default_timeout = match &raw.defaults.timeout {
        Some(t) => timeout(&at, t, DEFAULT_TIMEOUT_MS)?,
        None => Timeout::Fixed(DEFAULT_TIMEOUT_MS),
    };
    let fallback_ms = match default_timeout {
        Timeout::Fixed(ms) => ms,
        Timeout::None | Timeout::Auto { .. } => DEFAULT_TIMEOUT_MS,
    };
    if raw.steps.is_empty() {
        return Err(at.error(raw.workflow.span().start, "the workflow has no [[steps]]"));
    }
    let mut steps = Vec::with_capacity(raw.steps.len());
    for step in &raw.steps {
        steps.push(step_spec(
            &at,
            step,
            &raw.defaults,
            &default_retry,
            default_timeout,
            fallback_ms,
        )?);
    }
    let spec = WorkflowSpec {
        name: workflow.name.get_ref().clone(),
        on_failure,
        max_concurrency: workflow
            .max_concurrency
            .as_ref()
            .map_or(8, |m| *m.get_ref()),
        steps,
        attributes: BTreeMap::from([(DIR.to_owned(), dir.display().to_string())]),
        ..WorkflowSpec::new("", on_failure, Vec::new())
    };
    if spec.max_concurrency == 0 {
        let offset = workflow
            .max_concurrency
            .as_ref()
            .map_or(0, |m| m.span().start);
        return Err(at.error(offset, "max_concurrency must be at least 1"));
    }
    Policy::compile(&spec, |_, fallback| fallback)
        .map_err(|e| locate_policy_error(&at, &raw, e))?;
    Ok(spec)
}

fn step_spec(
    at: &Locator<'_>,
    step: &Spanned<RawStep>,
    defaults: &RawDefaults,
    default_retry: &RetryPolicy,
    default_timeout: Timeout,
    fallback_ms: u64,
) -> Result<StepSpec, DefinitionError> {
    let raw = step.get_ref();
    let name = raw.name.get_ref();
    for command in std::iter::once(&raw.run).chain(&raw.compensate) {
        if command.get_ref().contains('\0') {
            return Err(at.error(
                command.span().start,
                &format!("step `{name}`: a command cannot contain a NUL character"),
            ));
        }
    }
    let idempotency = match raw.idempotency.as_ref().map(|i| (i.get_ref().as_str(), i.span().start)) {
        Some(("natural", _)) => Idempotency::Natural,
        Some(("keyed", _)) => Idempotency::Keyed,
        Some(("checkpoint", _)) => Idempotency::Checkpoint,
        Some(("compensate", _)) => Idempotency::Compensate,
        Some((other, offset)) => {
            return Err(at.error(offset, &format!("step `{name}`: idempotency `{other}` is not one of natural, keyed, checkpoint, compensate")))
        }
        None => {
            let message = format!("step `{name}` has no `idempotency` (natural, keyed, checkpoint or compensate): say how it is made safe to rerun");
            return Err(at.error(step.span().start, &message));
        }
    };
    let mut attributes = BTreeMap::from([(RUN.to_owned(), raw.run.get_ref().clone())]);
    if let Some(c) = &raw.compensate {
        attributes.insert(COMPENSATE.to_owned(), c.get_ref().clone());
    }
    if let Some(codes) = raw
        .non_retryable_exit_codes
        .as_ref()
        .or(defaults.non_retryable_exit_codes.as_ref())
    {
        let codes: Vec<String> = codes.iter().map(i32::to_string).collect();
        attributes.insert(NON_RETRYABLE.to_owned(), codes.join(","));
    }
    Ok(StepSpec {
        name: name.clone(),
        depends_on: raw.depends_on.iter().map(|d| d.get_ref().clone()).collect(),
        idempotency,
        has_compensation: raw.compensate.is_some(),
        retry: retry(at, raw.retry.as_ref(), default_retry)?,
        timeout: match &raw.timeout {
            Some(t) => timeout(at, t, fallback_ms)?,
            None => default_timeout,
        },
        attributes,
        ..StepSpec::new(name, &[], idempotency)
    })
}

/// The names rule every store applies (`check_name`), applied where the name is written, so a
/// workflow that validates can run: names become a run's and a step's folders and the
/// idempotency key `run_id/step`.
fn name(at: &Locator<'_>, kind: NameKind, raw: &Spanned<String>) -> Result<(), DefinitionError> {
    check_name(kind, raw.get_ref()).map_err(|e| at.error(raw.span().start, &e.to_string()))
}

fn retry(
    at: &Locator<'_>,
    raw: Option<&RawRetry>,
    base: &RetryPolicy,
) -> Result<RetryPolicy, DefinitionError> {
    let Some(raw) = raw else {
        return Ok(base.clone());
    };
    let backoff = match raw
        .backoff
        .as_ref()
        .map(|b| (b.get_ref().as_str(), b.span().start))
    {
        None => base.backoff,
        Some(("fixed", _)) => Backoff::Fixed,
        Some(("exponential", _)) => Backoff::Exponential,
        Some((other, offset)) => {
            return Err(at.error(
                offset,
                &format!("backoff `{other}` is not `fixed` or `exponential`"),
            ))
        }
    };
    let ms = |d: &Option<Spanned<String>>, fallback: u64| {
        d.as_ref().map_or(Ok(fallback), |d| duration_ms(at, d))
    };
    Ok(RetryPolicy {
        max_attempts: raw
            .max_attempts
            .as_ref()
            .map_or(base.max_attempts, |m| *m.get_ref()),
        backoff,
        initial_ms: ms(&raw.initial, base.initial_ms)?,
        max_ms: ms(&raw.max, base.max_ms)?,
        jitter_pct: match &raw.jitter_pct {
            None => base.jitter_pct,
            Some(j) if *j.get_ref() <= 100 => *j.get_ref(),
            Some(j) => {
                return Err(at.error(
                    j.span().start,
                    &format!(
                        "jitter_pct is {}; at most 100 (percent of the delay)",
                        j.get_ref()
                    ),
                ))
            }
        },
    })
}

fn timeout(
    at: &Locator<'_>,
    raw: &Spanned<String>,
    fallback_ms: u64,
) -> Result<Timeout, DefinitionError> {
    match raw.get_ref().as_str() {
        "auto" => Ok(Timeout::Auto { fallback_ms }),
        "none" => Ok(Timeout::None),
        _ => match duration_ms(at, raw)? {
            0 => Err(at.error(
                raw.span().start,
                &format!(
                    "a timeout of `{}` would fail every attempt at once; write e.g. \"10m\", or \"none\"",
                    raw.get_ref()
                ),
            )),
            ms => Ok(Timeout::Fixed(ms)),
        },
    }
}

/// A duration in milliseconds, at most `DURATION_MS_MAX` (checked before any conversion
/// that could wrap).
fn duration_ms(at: &Locator<'_>, raw: &Spanned<String>) -> Result<u64, DefinitionError> {
    let text = raw.get_ref();
    let duration = humantime::parse_duration(text).map_err(|e| {
        at.error(
            raw.span().start,
            &format!("`{text}` is not a duration ({e}); write e.g. \"30s\", \"10m\", \"1h 30m\""),
        )
    })?;
    let max = limits::DURATION_MS_MAX;
    match u64::try_from(duration.as_millis()) {
        Ok(ms) if ms <= max => Ok(ms),
        _ => Err(at.error(
            raw.span().start,
            &format!(
                "`{text}` is longer than {} days, the longest duration allowed",
                max / 86_400_000
            ),
        )),
    }
}

/// Places a graph or policy error on the step it names.
fn locate_policy_error(at: &Locator<'_>, raw: &RawFile, e: PolicyError) -> DefinitionError {
    let step = |name: &str| -> Vec<&Spanned<RawStep>> {
        raw.steps
            .iter()
            .filter(|s| s.get_ref().name.get_ref() == name)
            .collect()
    };
    let offset = match &e {
        PolicyError::Dag(DagError::DuplicateStep { step: name }) => {
            step(name).get(1).map(|s| s.get_ref().name.span().start)
        }
        PolicyError::Dag(DagError::UnknownDependency {
            step: name,
            dependency,
        }) => step(name)
            .first()
            .and_then(|s| {
                s.get_ref()
                    .depends_on
                    .iter()
                    .find(|d| d.get_ref() == dependency)
            })
            .map(|d| d.span().start),
        PolicyError::Dag(DagError::Cycle { path }) => step(&path[0])
            .first()
            .map(|s| s.get_ref().name.span().start),
        PolicyError::CompensationMissing { step: name }
        | PolicyError::ZeroAttempts { step: name }
        | PolicyError::ZeroTimeout { step: name } => step(name).first().map(|s| s.span().start),
        PolicyError::Dag(DagError::TooManyNodes { .. } | DagError::Empty)
        | PolicyError::ZeroConcurrency => None,
    };
    let message = match &e {
        PolicyError::CompensationMissing { step } => {
            format!(
                "step `{step}` has idempotency `compensate` but no `compensate` command to undo it"
            )
        }
        PolicyError::Dag(DagError::TooManyNodes { count, .. }) => format!(
            "{count} steps; at most {} are allowed",
            limits::DAG_NODES_MAX
        ),
        other => other.to_string(),
    };
    at.error(offset.unwrap_or(0), &message)
}

/// Turns byte offsets into line and column numbers.
/// A TOML file's syntax or shape error at its line and column, on one line (the `toml`
/// crate's own rendering spans several, with the source quoted): for every TOML file the
/// front ends read, workflows and the data dir's config.
pub fn toml_error(text: &str, file: &str, error: &toml::de::Error) -> DefinitionError {
    let offset = error.span().map_or(0, |s| s.start);
    Locator { text, file }.error(offset, error.message().trim_end())
}

struct Locator<'a> {
    text: &'a str,
    file: &'a str,
}

impl Locator<'_> {
    fn error(&self, offset: usize, message: &str) -> DefinitionError {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before
            .rfind('\n')
            .map_or(before.len(), |nl| before.len() - nl - 1)
            + 1;
        DefinitionError {
            file: self.file.to_owned(),
            line,
            column,
            message: message.to_owned(),
        }
    }
}
