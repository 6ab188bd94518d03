//! The templates of each step (its commands, `env` values, `cwd`) and its condition checked
//! against the definition: each parameter declared, each step read upstream of the reader,
//! `item` and `wave` only where a `for_each` sets them.

use super::{CWD, ENV};
use crate::definition::{COMPENSATE, RUN};
use crate::shell::{shell_text, source_offset};
use apollo11_author::{AuthorError, Ref, Template};
use apollo11_core::{ItemSource, ParamKind, StepSpec, WorkflowSpec};
use std::collections::{BTreeMap, BTreeSet};

/// The first reference of a step that cannot have a value when it runs.
pub(super) fn check(spec: &WorkflowSpec) -> Result<(), AuthorError> {
    let upstream = upstream(spec);
    let gates: BTreeSet<&str> = spec
        .steps
        .iter()
        .filter_map(|s| s.for_each.as_ref()?.gate.as_deref())
        .collect();
    for step in &spec.steps {
        if let Some(each) = &step.for_each {
            source(spec, step, &each.items)?;
        }
        let sees = Sees {
            spec,
            step,
            upstream: &upstream[step.name.as_str()],
            items: step.for_each.is_some() || gates.contains(step.name.as_str()),
        };
        for (field, text) in fields(step) {
            let template = Template::parse(&shell_text(&text)).map_err(|mut error| {
                error.at = source_offset(&text, error.at);
                AuthorError::Template {
                    step: step.name.clone(),
                    field: field.clone(),
                    error,
                }
            })?;
            for (at, reference) in template.references() {
                sees.check(&field, source_offset(&text, at), reference)?;
            }
        }
        if let Some(condition) = &step.condition {
            let references =
                apollo11_author::check(condition).map_err(|error| AuthorError::Condition {
                    step: step.name.clone(),
                    error,
                })?;
            for (at, reference) in &references {
                sees.check("condition", *at, reference)?;
            }
        }
    }
    Ok(())
}

/// A `for_each` source that cannot give a list: a parameter not declared or not a list, an
/// output of a step that is not a dependency.
fn source(spec: &WorkflowSpec, step: &StepSpec, items: &ItemSource) -> Result<(), AuthorError> {
    let name = || step.name.clone();
    match items {
        ItemSource::Param(param) => match spec.params.iter().find(|p| &p.name == param) {
            None => Err(AuthorError::UnknownParam {
                step: name(),
                param: param.clone(),
            }),
            Some(p) if p.kind != ParamKind::List => Err(AuthorError::NotAList {
                step: name(),
                source: format!("params.{param}"),
                found: apollo11_author::kind_label(p.kind),
            }),
            Some(_) => Ok(()),
        },
        ItemSource::Output { step: source, .. } if !step.depends_on.contains(source) => {
            Err(AuthorError::SourceNotDependency {
                step: name(),
                source: source.clone(),
            })
        }
        ItemSource::List(_) | ItemSource::Output { .. } => Ok(()),
    }
}

/// A step's texts that hold templates, by field: `run`, `compensate`, `cwd`, `env.NAME`.
fn fields(step: &StepSpec) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = [RUN, COMPENSATE, CWD]
        .into_iter()
        .filter_map(|f| Some((f.to_owned(), step.attributes.get(f)?.clone())))
        .collect();
    let env: BTreeMap<String, String> = step
        .attributes
        .get(ENV)
        .and_then(|e| serde_json::from_str(e).ok())
        .unwrap_or_default();
    fields.extend(env.into_iter().map(|(k, v)| (format!("env.{k}"), v)));
    fields
}

/// What one step can read.
struct Sees<'a> {
    spec: &'a WorkflowSpec,
    step: &'a StepSpec,
    upstream: &'a BTreeSet<&'a str>,
    items: bool,
}

impl Sees<'_> {
    fn check(&self, field: &str, at: usize, reference: &Ref) -> Result<(), AuthorError> {
        let (step, field) = (self.step.name.clone(), field.to_owned());
        match reference {
            Ref::Param(param) if !self.spec.params.iter().any(|p| &p.name == param) => {
                Err(AuthorError::UndeclaredParam {
                    step,
                    field,
                    at,
                    param: param.clone(),
                })
            }
            Ref::Output { step: target, .. } | Ref::Status { step: target }
                if !self.upstream.contains(target.as_str()) =>
            {
                Err(AuthorError::NotUpstream {
                    step,
                    field,
                    at,
                    target: target.clone(),
                })
            }
            Ref::Item(_) | Ref::Wave if !self.items => Err(AuthorError::NoItemHere {
                step,
                field,
                at,
                what: if matches!(reference, Ref::Wave) {
                    "wave"
                } else {
                    "item"
                },
            }),
            _ => Ok(()),
        }
    }
}

/// Each step's transitive dependencies, by name.
fn upstream(spec: &WorkflowSpec) -> BTreeMap<&str, BTreeSet<&str>> {
    let deps: BTreeMap<&str, Vec<&str>> = spec
        .steps
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.depends_on.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    deps.keys()
        .map(|&name| {
            let mut seen = BTreeSet::new();
            let mut stack = deps[name].clone();
            while let Some(d) = stack.pop() {
                if seen.insert(d) {
                    stack.extend(deps.get(d).into_iter().flatten());
                }
            }
            (name, seen)
        })
        .collect()
}
