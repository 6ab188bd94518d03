//! What the runtime knows at an attempt, for templates and conditions to read.

use crate::{AuthorError, Ref};
use apollo11_core::{Value, WorkflowSpec};
use apollo11_dag::Dag;
use std::collections::BTreeMap;
use std::fmt;

/// The values an attempt of a step can see, filled by the runtime: the run's arguments and
/// secrets, its id, the outputs and statuses of the step's dependencies, and, for a step a
/// `for_each` made, its item and wave. Its `Debug` names the secrets but never shows
/// their values.
#[derive(Clone, Default, PartialEq)]
pub struct Scope {
    /// The run's arguments (never a secret).
    pub arguments: BTreeMap<String, Value>,
    /// Secret parameters by name, with their values as read from their sources for this
    /// attempt. A shell command only names them ([`Scope::secret_vars`]).
    pub secrets: BTreeMap<String, String>,
    /// The run's id.
    pub run_id: String,
    /// The recorded output bytes of each dependency that has one, by step name.
    pub outputs: BTreeMap<String, Vec<u8>>,
    /// How each dependency ended (`succeeded`, `skipped`, `failed`, ...), by step name.
    pub statuses: BTreeMap<String, String>,
    /// The item of a step a `for_each` made.
    pub item: Option<Value>,
    /// The wave of a step a `for_each` made in waves.
    pub wave: Option<u32>,
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secrets: BTreeMap<&str, &str> = self
            .secrets
            .keys()
            .map(|k| (k.as_str(), "<secret>"))
            .collect();
        f.debug_struct("Scope")
            .field("arguments", &self.arguments)
            .field("secrets", &secrets)
            .field("run_id", &self.run_id)
            .field("outputs", &self.outputs.keys().collect::<Vec<_>>())
            .field("statuses", &self.statuses)
            .field("item", &self.item)
            .field("wave", &self.wave)
            .finish()
    }
}

/// Why a reference has no value in a scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Missing {
    /// No argument or secret of this name.
    Param(String),
    /// A secret where only plain values may go.
    Secret(String),
    /// The step left no output, or is not a dependency.
    Output(String),
    /// The step has no status here (not a dependency).
    Status(String),
    /// The step's output is not UTF-8 text.
    NotText(String),
    /// The step's output is not JSON, with the parser's reason.
    NotJson(String, String),
    /// The path does not lead to a value: the reference and the first missing field.
    Field(String, String),
    /// `item` outside a step a `for_each` made.
    Item,
    /// `wave` outside a step made in waves.
    Wave,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::Param(name) => write!(f, "no parameter `{name}`"),
            Missing::Secret(name) => write!(
                f,
                "`params.{name}` is a secret, usable only in a command (as an environment \
                 variable) or an environment value"
            ),
            Missing::Output(step) => write!(f, "step `{step}` has no output here"),
            Missing::Status(step) => write!(f, "step `{step}` has no status here"),
            Missing::NotText(step) => write!(f, "the output of step `{step}` is not UTF-8 text"),
            Missing::NotJson(step, why) => {
                write!(f, "the output of step `{step}` is not JSON ({why})")
            }
            Missing::Field(reference, field) => {
                write!(f, "`{reference}` has no field `{field}`")
            }
            Missing::Item => write!(f, "`item` is only set in a step a for_each made"),
            Missing::Wave => write!(f, "`wave` is only set in a step made in waves"),
        }
    }
}

/// The environment variable a secret parameter is passed in: `APOLLO11_SECRET_` and its
/// name in upper case, every character but ASCII letters and digits made `_`.
pub fn secret_var(name: &str) -> String {
    let upper: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' => c.to_ascii_uppercase(),
            _ => '_',
        })
        .collect();
    format!("APOLLO11_SECRET_{upper}")
}

impl Scope {
    /// The environment variables a step's process must be given for the secrets a shell
    /// command names: `(variable, value)` for each secret, in name order.
    pub fn secret_vars(&self) -> Vec<(String, String)> {
        self.secrets
            .iter()
            .map(|(name, value)| (secret_var(name), value.clone()))
            .collect()
    }

    /// The value `reference` has here. A whole output is its text (trailing newlines
    /// removed, as a shell's `$(...)` does); a path into it reads it as JSON. Secrets are not
    /// values ([`Missing::Secret`]): their callers decide how they may appear.
    ///
    /// # Errors
    ///
    /// [`Missing`] saying what is not there.
    pub fn value(&self, reference: &Ref) -> Result<Value, Missing> {
        match reference {
            Ref::Param(name) if self.secrets.contains_key(name) => {
                Err(Missing::Secret(name.clone()))
            }
            Ref::Param(name) => self
                .arguments
                .get(name)
                .cloned()
                .ok_or_else(|| Missing::Param(name.clone())),
            Ref::RunId => Ok(Value::String(self.run_id.clone())),
            Ref::Output { step, path } => self.output(reference, step, path),
            Ref::Status { step } => self
                .statuses
                .get(step)
                .map(|s| Value::String(s.clone()))
                .ok_or_else(|| Missing::Status(step.clone())),
            Ref::Item(path) => {
                let item = self.item.as_ref().ok_or(Missing::Item)?;
                walk(reference, item, path).cloned()
            }
            Ref::Wave => self.wave.map(Value::from).ok_or(Missing::Wave),
        }
    }

    fn output(&self, reference: &Ref, step: &str, path: &[String]) -> Result<Value, Missing> {
        let bytes = self
            .outputs
            .get(step)
            .ok_or_else(|| Missing::Output(step.to_owned()))?;
        let text = std::str::from_utf8(bytes).map_err(|_| Missing::NotText(step.to_owned()))?;
        if path.is_empty() {
            return Ok(Value::String(text.trim_end_matches('\n').to_owned()));
        }
        let json: Value = serde_json::from_str(text)
            .map_err(|e| Missing::NotJson(step.to_owned(), e.to_string()))?;
        walk(reference, &json, path).cloned()
    }
}

/// Follows `path` into `value`: object fields by name, list elements by index.
///
/// # Errors
///
/// [`Missing::Field`] naming the reference and the first field not found.
pub fn walk<'v>(reference: &Ref, value: &'v Value, path: &[String]) -> Result<&'v Value, Missing> {
    path.iter().try_fold(value, |at, field| {
        let next = match at {
            Value::Object(map) => map.get(field),
            Value::Array(list) => field.parse::<usize>().ok().and_then(|i| list.get(i)),
            _ => None,
        };
        next.ok_or_else(|| Missing::Field(reference.to_string(), field.clone()))
    })
}

/// The steps whose outputs and statuses an attempt of `step` may read, by the name a
/// template or condition uses: every step it depends on, directly or not, by its own name;
/// and for a step a `for_each` made, each upstream step made from the same key by its
/// declaration's name (`${steps.drain.output}` in `upgrade[host-01]` reads
/// `drain[host-01]`). The runtime fills [`Scope::outputs`] and [`Scope::statuses`] from it.
///
/// # Errors
///
/// [`AuthorError::UnknownStep`] when `step` is not in `spec`; [`AuthorError::Graph`] when
/// its dependencies are not a graph.
pub fn readable_steps(
    spec: &WorkflowSpec,
    step: &str,
) -> Result<BTreeMap<String, String>, AuthorError> {
    let steps: Vec<(&str, Vec<&str>)> = spec
        .steps
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.depends_on.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    let dag = Dag::build(&steps, usize::MAX)?;
    let me = dag.node(step).ok_or_else(|| AuthorError::UnknownStep {
        step: step.to_owned(),
    })?;
    let key = spec.steps[me.index()].origin.as_ref().map(|o| &o.key);
    let mut readable = BTreeMap::new();
    let mut stack = vec![me];
    let mut seen = vec![false; dag.len()];
    while let Some(node) = stack.pop() {
        for &d in dag.dependencies(node) {
            if std::mem::replace(&mut seen[d.index()], true) {
                continue;
            }
            stack.push(d);
            let upstream = &spec.steps[d.index()];
            readable.insert(upstream.name.clone(), upstream.name.clone());
            if let Some(origin) = upstream.origin.as_ref().filter(|o| Some(&o.key) == key) {
                readable.insert(origin.declaration.clone(), upstream.name.clone());
            }
        }
    }
    Ok(readable)
}
