//! Workflow files: TOML in, a validated, *declared* `WorkflowSpec` out (parameters declared,
//! `for_each` not expanded: `apollo11_author::instantiate` makes a run's definition of it).
//! Every error names the file, the line and the column of what is wrong. Shell commands,
//! environments and the file's folder are pinned in the spec's attributes, so `resume` needs
//! nothing but the run id.

mod classes;
mod env;
mod items;
mod limits;
mod locate;
mod params;
mod placement;
mod raw;
mod schedules;
mod step;
mod templates;
mod toml_text;
mod wait;

pub use env::{CWD, ENV, ENV_PASS};
pub use items::INVENTORY_BYTES_MAX;
pub use params::read_params_file;
pub use placement::is_label;
pub use schedules::{Schedule, CATCH_UP_MAX, SCHEDULE_NAME_BYTES_MAX};

use crate::classify::{ClassRule, CLASSIFY};
use apollo11_core::{check_name, NameKind, OnFailure, RetryPolicy, Timeout, Value, WorkflowSpec};
use apollo11_machine::Policy;
use raw::RawFile;
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

/// Reads and validates a workflow file.
///
/// # Errors
///
/// A [`DefinitionError`] naming the file, and the line and column for an error in its text:
/// the file or its folder cannot be read, or what [`parse`] refuses.
pub fn load(path: &Path) -> Result<WorkflowSpec, DefinitionError> {
    load_all(path).map(|d| d.spec)
}

/// A workflow file read whole: its definition, and its schedules (which are not part of
/// the definition a run pins).
#[derive(Clone, Debug)]
pub struct Definition {
    /// What a run of it pins, declared.
    pub spec: WorkflowSpec,
    /// Its `[schedules.NAME]`, in file order.
    pub schedules: Vec<Schedule>,
}

/// [`load`], with the file's schedules.
///
/// # Errors
///
/// As [`load`], and what [`parse_all`] refuses of a schedule.
pub fn load_all(path: &Path) -> Result<Definition, DefinitionError> {
    let whole_file = |message: String| DefinitionError {
        file: path.display().to_string(),
        line: 0,
        column: 0,
        message,
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| whole_file(format!("cannot read the workflow file: {e}")))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // Steps run in this folder whatever folder `run` or `resume` is started from.
    let dir = std::fs::canonicalize(dir)
        .map_err(|e| whole_file(format!("cannot find the workflow file's folder: {e}")))?;
    parse_all(&text, &path.display().to_string(), &dir)
}

/// What is allowed in the workflow file `text` (named `file`) but likely wrong, each
/// located: a `limits.memory` over this machine's memory. Nothing for a file that does not
/// parse ([`parse`] says why).
pub fn warnings(text: &str, file: &str) -> Vec<DefinitionError> {
    let at = Locator { text, file };
    toml::from_str::<RawFile>(text).map_or_else(|_| Vec::new(), |raw| limits::warnings(&at, &raw))
}

/// The definition a run pins: `declared` (what [`load`] or [`parse`] read) instantiated
/// with the values `given` for its parameters, defaults filled in, each `for_each` over a
/// list known now made into its steps (`apollo11_author::instantiate`).
///
/// # Errors
///
/// What is wrong, in words naming the parameter or the declaration: a value undeclared,
/// missing or of another type, items that cannot make steps.
pub fn instantiate(
    declared: &WorkflowSpec,
    given: &BTreeMap<String, Value>,
) -> Result<WorkflowSpec, String> {
    apollo11_author::instantiate(declared, given).map_err(|e| e.to_string())
}

/// Parses and validates workflow text; `dir` is where its steps run, and where the
/// inventory files of its `for_each` are read.
///
/// # Errors
///
/// A [`DefinitionError`] at the line and column of the first problem: TOML syntax, a bad
/// name, parameter, duration or retry setting, an unknown dependency, a cycle, a template
/// or condition naming what it cannot see.
pub fn parse(text: &str, file: &str, dir: &Path) -> Result<WorkflowSpec, DefinitionError> {
    parse_all(text, file, dir).map(|d| d.spec)
}

/// [`parse`], with the file's schedules.
///
/// # Errors
///
/// As [`parse`], and a schedule's bad cron expression, zone, policy, jitter or parameter
/// (one a sample fire's values cannot give a run), at its line and column.
pub fn parse_all(text: &str, file: &str, dir: &Path) -> Result<Definition, DefinitionError> {
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
    let params = params::params(&at, &raw.params)?;
    let rules = classes::rules(&at, &raw.classify)?;
    let base = base(&at, &raw, dir, &rules)?;
    if raw.steps.is_empty() {
        return Err(at.error(raw.workflow.span().start, "the workflow has no [[steps]]"));
    }
    let steps = raw
        .steps
        .iter()
        .map(|s| step::step_spec(&at, s, &base))
        .collect::<Result<Vec<_>, _>>()?;
    let mut attributes = BTreeMap::from([(DIR.to_owned(), dir.display().to_string())]);
    env::env_pass(&at, &raw.defaults, &mut attributes)?;
    if !rules.is_empty() {
        attributes.insert(CLASSIFY.to_owned(), rules_json(&rules));
    }
    let spec = WorkflowSpec {
        name: workflow.name.get_ref().clone(),
        on_failure,
        max_concurrency: workflow
            .max_concurrency
            .as_ref()
            .map_or(8, |m| *m.get_ref()),
        steps,
        attributes,
        params,
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
        .map_err(|e| locate::policy_error(&at, &raw, e))?;
    let authoring = |e| locate::author_error(&at, &raw, &e);
    templates::check(&spec).map_err(authoring)?;
    // With every parameter's value known (each has a default or is optional), the steps
    // the file makes are checked now: names made twice, too many items, keys that do not pair.
    if spec.params.iter().all(|p| !p.required) {
        apollo11_author::instantiate(&spec, &BTreeMap::new()).map_err(authoring)?;
    }
    let schedules = schedules::schedules(&at, &raw, &spec)?;
    Ok(Definition { spec, schedules })
}

/// `[defaults]` read once: what every step starts from.
fn base<'a>(
    at: &Locator<'_>,
    raw: &'a RawFile,
    dir: &'a Path,
    classes: &'a [ClassRule],
) -> Result<step::Base<'a>, DefinitionError> {
    let default = RetryPolicy::default();
    let retry = step::retry(at, raw.defaults.retry.as_ref(), &default, classes)?;
    let timeout = match &raw.defaults.timeout {
        Some(t) => step::timeout(at, t, DEFAULT_TIMEOUT_MS)?,
        None => Timeout::Fixed(DEFAULT_TIMEOUT_MS),
    };
    let fallback_ms = match timeout {
        Timeout::Fixed(ms) => ms,
        Timeout::None | Timeout::Auto { .. } => DEFAULT_TIMEOUT_MS,
    };
    Ok(step::Base {
        defaults: &raw.defaults,
        retry,
        timeout,
        fallback_ms,
        dir,
        classes,
    })
}

/// The names rule every store applies (`check_name`), applied where the name is written, so a
/// workflow that validates can run: names become a run's and a step's folders and the
/// idempotency key `run_id/step`.
/// The `[[classify]]` rules as the workflow attribute holds them.
fn rules_json(rules: &[ClassRule]) -> String {
    serde_json::to_string(rules).expect("class rules are strings and integers: they serialize")
}

fn name(at: &Locator<'_>, kind: NameKind, raw: &Spanned<String>) -> Result<(), DefinitionError> {
    check_name(kind, raw.get_ref()).map_err(|e| at.error(raw.span().start, &e.to_string()))
}

/// A TOML file's syntax or shape error at its line and column, on one line (the `toml`
/// crate's own rendering spans several, with the source quoted): for every TOML file the
/// front ends read, workflows and the data dir's config.
pub fn toml_error(text: &str, file: &str, error: &toml::de::Error) -> DefinitionError {
    let offset = error.span().map_or(0, |s| s.start);
    Locator { text, file }.error(offset, error.message().trim_end())
}

/// Turns byte offsets into line and column numbers.
struct Locator<'a> {
    text: &'a str,
    file: &'a str,
}

impl Locator<'_> {
    fn error(&self, offset: usize, message: &str) -> DefinitionError {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.text[..offset];
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
