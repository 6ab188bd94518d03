//! Errors found on the whole definition (the graph, the policies) put back on the file's
//! text, at the step they name.

use super::raw::{RawFile, RawStep};
use super::toml_text::value_offset;
use super::{DefinitionError, Locator, COMPENSATE, CWD, RUN};
use apollo11_author::{AuthorError, ExprError, ParamError};
use apollo11_core::limits;
use apollo11_dag::DagError;
use apollo11_machine::PolicyError;
use toml::Spanned;

/// The steps of this name (the second one is where a duplicate is reported).
fn steps<'a>(raw: &'a RawFile, name: &str) -> Vec<&'a Spanned<RawStep>> {
    raw.steps
        .iter()
        .filter(|s| s.get_ref().name.get_ref() == name)
        .collect()
}

/// Places a graph or policy error on the step it names.
pub(super) fn policy_error(at: &Locator<'_>, raw: &RawFile, e: PolicyError) -> DefinitionError {
    let step = |name: &str| steps(raw, name);
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

/// Places an authoring error (a `for_each` that cannot expand, a template or condition
/// naming what it cannot see) on the declaration and field it names; within the field's
/// text when that is a plain one-line string, so the column is the reference's.
pub(super) fn author_error(at: &Locator<'_>, raw: &RawFile, e: &AuthorError) -> DefinitionError {
    if let Some((step, field, within)) = in_field(e) {
        return match field_offset(at, raw, step, field, within) {
            // The column says where: the message need not say at which byte.
            Some((offset, true)) => at.error(offset, &format!("{e:#}")),
            placed => at.error(placed.map_or(0, |(offset, _)| offset), &e.to_string()),
        };
    }
    let offset = match e {
        AuthorError::Param(p) => param_name(p)
            .and_then(|name| raw.params.get(name))
            .map(|p| p.span().start),
        AuthorError::Graph(g) => graph_offset(raw, g),
        AuthorError::UnknownParam { step, .. }
        | AuthorError::NotAList { step, .. }
        | AuthorError::TooManyItems { step, .. }
        | AuthorError::NoKey { step, .. }
        | AuthorError::BadName { step, .. }
        | AuthorError::SourceNotDependency { step, .. } => for_each_offset(raw, step),
        AuthorError::DuplicateKey { name, .. } => for_each_offset(raw, declaration(name)),
        AuthorError::Unpaired {
            step, dependency, ..
        } => dependency_offset(raw, step, dependency),
        AuthorError::UnknownGate { step, .. } | AuthorError::BadGate { step, .. } => {
            first(raw, step).and_then(|s| s.get_ref().gate.as_ref().map(|g| g.span().start))
        }
        _ => None,
    };
    at.error(offset.unwrap_or(0), &e.to_string())
}

/// The step and field an error is in, and its byte offset in the field's text when known.
fn in_field(e: &AuthorError) -> Option<(&str, &str, Option<usize>)> {
    Some(match e {
        AuthorError::Template { step, field, error } => (step, field, Some(error.at)),
        AuthorError::Condition { step, error } => (step, "condition", expr_offset(error)),
        AuthorError::SecretInCondition { step, at, .. } => (step, "condition", Some(*at)),
        AuthorError::NotUpstream {
            step, field, at, ..
        }
        | AuthorError::ManySteps {
            step, field, at, ..
        }
        | AuthorError::UndeclaredParam {
            step, field, at, ..
        }
        | AuthorError::NoItemHere {
            step, field, at, ..
        } => (step, field, Some(*at)),
        _ => return None,
    })
}

/// The declaration a step name was made from: `drain` of `drain[host-1]`.
fn declaration(name: &str) -> &str {
    match name
        .strip_suffix(']')
        .and_then(|n| n.rfind('[').map(|i| &name[..i]))
    {
        Some(declared) => declared,
        None => name,
    }
}

fn first<'a>(raw: &'a RawFile, name: &str) -> Option<&'a Spanned<RawStep>> {
    steps(raw, declaration(name)).into_iter().next()
}

fn for_each_offset(raw: &RawFile, step: &str) -> Option<usize> {
    let s = first(raw, step)?;
    Some(
        s.get_ref()
            .for_each
            .as_ref()
            .map_or(s.span().start, |f| f.span().start),
    )
}

fn dependency_offset(raw: &RawFile, step: &str, dependency: &str) -> Option<usize> {
    let s = first(raw, step)?.get_ref();
    s.depends_on
        .iter()
        .find(|d| d.get_ref() == declaration(dependency))
        .map_or(Some(s.name.span().start), |d| Some(d.span().start))
}

fn graph_offset(raw: &RawFile, e: &DagError) -> Option<usize> {
    match e {
        DagError::DuplicateStep { step } => for_each_offset(raw, step),
        DagError::UnknownDependency { step, dependency } => {
            dependency_offset(raw, step, dependency)
        }
        DagError::Cycle { path } => first(raw, &path[0]).map(|s| s.get_ref().name.span().start),
        DagError::TooManyNodes { .. } | DagError::Empty => None,
    }
}

fn param_name(e: &ParamError) -> Option<&str> {
    match e {
        ParamError::Unknown { name }
        | ParamError::Missing { name }
        | ParamError::WrongType { name, .. }
        | ParamError::TooLarge { name, .. }
        | ParamError::SecretGiven { name }
        | ParamError::Unreadable { name, .. } => Some(name),
    }
}

fn expr_offset(e: &ExprError) -> Option<usize> {
    match e {
        ExprError::UnknownName { at, .. }
        | ExprError::Missing { at, .. }
        | ExprError::Parse { at, .. } => Some(*at),
        ExprError::Mismatch { at, .. } => *at,
        _ => None,
    }
}

/// Where `field` of step `step` is written (`condition` is `when`; `env.NAME` a value of
/// `env`), and `at` bytes into its value, put back on the string as written (see
/// [`value_offset`]): with `true` then.
fn field_offset(
    at: &Locator<'_>,
    raw: &RawFile,
    step: &str,
    field: &str,
    within: Option<usize>,
) -> Option<(usize, bool)> {
    let s = first(raw, step)?.get_ref();
    let spanned = match field {
        "condition" => s.when.as_ref(),
        RUN => s.run.as_ref(),
        COMPENSATE => s.compensate.as_ref(),
        CWD => s.cwd.as_ref().or(raw.defaults.cwd.as_ref()),
        _ => field
            .strip_prefix("env.")
            .and_then(|var| env_value(raw, s, var)),
    };
    let Some(spanned) = spanned else {
        return Some((s.name.span().start, false));
    };
    let start = spanned.span().start;
    let written = &at.text[spanned.span()];
    let offset = within.and_then(|i| value_offset(written, spanned.get_ref(), i));
    Some(offset.map_or((start, false), |o| (start + o, true)))
}

fn env_value<'a>(raw: &'a RawFile, s: &'a RawStep, var: &str) -> Option<&'a Spanned<String>> {
    [&s.env, &raw.defaults.env]
        .into_iter()
        .flatten()
        .find_map(|table| table.get_ref().get(var))
}
