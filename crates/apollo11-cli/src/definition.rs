//! Workflow files at the command line: `validate`, `graph`, and the definition a run pins,
//! instantiated with the arguments of `--param NAME=VALUE` and `--params-file FILE`.

use crate::{out, Exit};
use apollo11_core::{Value, WorkflowSpec};
use apollo11_shell::definition;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A run's parameter values, as the command line gives them.
#[derive(clap::Args, Clone, Default)]
pub struct ParamArgs {
    /// A parameter's value, read by its declared type (a string as is; an integer, number or
    /// boolean parsed; a list or object as JSON). Repeatable; wins over --params-file.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    pub params: Vec<String>,
    /// A file of parameter values: a JSON object or a TOML table (by its extension).
    #[arg(long, value_name = "FILE")]
    pub params_file: Option<PathBuf>,
}

/// A workflow file read, and the values given for its parameters (not yet checked
/// together: [`instantiate`] does).
pub struct Given {
    /// The declared definition.
    pub declared: WorkflowSpec,
    /// The values given, by name.
    pub values: BTreeMap<String, Value>,
    /// The file's schedules (`serve` fires them; a run started here ignores them).
    pub schedules: Vec<definition::Schedule>,
}

/// Reads the workflow file and the values given for its parameters; exit 2 on any error,
/// naming the file's line and column or the parameter.
pub fn given(file: &Path, args: &ParamArgs) -> Result<Given, Exit> {
    let definition::Definition {
        spec: declared,
        schedules,
    } = definition::load_all(file).map_err(|e| Exit::fail(2, e.to_string()))?;
    let text = std::fs::read_to_string(file).unwrap_or_default();
    for warning in definition::warnings(&text, &file.display().to_string()) {
        crate::warn(&format!("warning: {warning}"));
    }
    let mut values = match &args.params_file {
        Some(path) => {
            definition::read_params_file(path).map_err(|e| Exit::fail(2, e.to_string()))?
        }
        None => BTreeMap::new(),
    };
    for text in &args.params {
        let (name, value) = apollo11_author::parse_assignment(&declared.params, text)
            .map_err(|e| Exit::fail(2, format!("--param: {e}")))?;
        values.insert(name, value);
    }
    Ok(Given {
        declared,
        values,
        schedules,
    })
}

/// The definition a run pins: the declared one instantiated with the values given, defaults
/// filled in; exit 2 naming the parameter or what the expansion refused.
pub fn instantiate(file: &Path, given: &Given) -> Result<WorkflowSpec, Exit> {
    definition::instantiate(&given.declared, &given.values)
        .map_err(|e| Exit::fail(2, format!("{}: {e}", file.display())))
}

/// `validate`: the file checked, instantiated with the values given, and summed up.
pub fn validate(file: &Path, args: &ParamArgs) -> Result<Exit, Exit> {
    let given = given(file, args)?;
    let spec = instantiate(file, &given)?;
    out::line(format!(
        "{}: workflow `{}` with {} steps is valid",
        file.display(),
        spec.name,
        spec.steps.len()
    ))?;
    for (name, value) in &spec.arguments {
        out::line(format!("param {name} = {value}"))?;
    }
    if spec.steps.len() != given.declared.steps.len() || !spec.params.is_empty() {
        out::line(apollo11_author::graph_text(&spec))?;
    }
    let now_ms = apollo11_runtime::Clock::system().now_ms();
    for schedule in &given.schedules {
        schedule_lines(schedule, now_ms)?;
    }
    Ok(Exit::code(0))
}

/// How many fire times `validate` shows of each schedule.
const NEXT_FIRES_SHOWN: usize = 5;

/// A schedule summed up, and its next fire times after `now_ms`, in its zone and in UTC.
fn schedule_lines(schedule: &definition::Schedule, now_ms: u64) -> Result<(), Exit> {
    out::line(format!(
        "schedule {}: cron `{}` in {}, catch_up {}, overlap {}{}{}",
        schedule.name,
        out::shown(&schedule.cron_text, out::DETAIL_CHARS_MAX),
        schedule.cron.zone(),
        schedule.catch_up.as_str(),
        schedule.overlap.as_str(),
        match schedule.jitter_ms {
            0 => String::new(),
            ms => format!(", jitter up to {ms} ms"),
        },
        if schedule.enabled { "" } else { ", disabled" },
    ))?;
    for fire in schedule
        .cron
        .fires_between(now_ms, u64::MAX, NEXT_FIRES_SHOWN)
    {
        out::line(format!("  {}  ({})", fire.local_text(), fire.utc_text()))?;
    }
    Ok(())
}

/// How `graph` draws a definition.
#[derive(clap::ValueEnum, Clone, Copy, Default)]
pub enum GraphFormat {
    /// Graphviz.
    Dot,
    /// A Mermaid flowchart.
    Mermaid,
    /// Steps per declaration and wave, as `validate` sums them up.
    #[default]
    Text,
}

/// `graph`: the instantiated definition drawn.
pub fn graph(file: &Path, args: &ParamArgs, format: GraphFormat) -> Result<Exit, Exit> {
    let spec = instantiate(file, &given(file, args)?)?;
    out::line(match format {
        GraphFormat::Dot => apollo11_author::graph_dot(&spec),
        GraphFormat::Mermaid => apollo11_author::graph_mermaid(&spec),
        GraphFormat::Text => apollo11_author::graph_text(&spec),
    })?;
    Ok(Exit::code(0))
}
