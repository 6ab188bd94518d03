//! The templates of each step (its commands, `env` values, `cwd`) and its condition checked
//! against the definition by `apollo11_author::validate`, the shell's own `${VAR}` left out
//! and each error's offset given in the text as written.

use super::{CWD, ENV};
use crate::definition::{COMPENSATE, RUN};
use crate::shell::{shell_text, source_offset};
use crate::shell::{COMPENSATE_ON, ON};
use apollo11_author::{AuthorError, TemplateField};
use apollo11_core::{StepSpec, WorkflowSpec};
use std::collections::BTreeMap;

/// The first thing of the declared definition that cannot hold when it runs.
pub(super) fn check(spec: &WorkflowSpec) -> Result<(), AuthorError> {
    let written: Vec<TemplateField> = spec.steps.iter().flat_map(fields).collect();
    let escaped: Vec<TemplateField> = written
        .iter()
        .map(|f| TemplateField {
            text: shell_text(&f.text),
            ..f.clone()
        })
        .collect();
    apollo11_author::validate(spec, &escaped).map_err(|mut e| {
        if let Some((step, field, at)) = offset(&mut e) {
            if let Some(f) = written.iter().find(|f| f.step == step && f.field == field) {
                *at = source_offset(&f.text, *at);
            }
        }
        e
    })
}

/// The step, field and offset of an error within a template, to be mapped back.
fn offset(e: &mut AuthorError) -> Option<(String, String, &mut usize)> {
    match e {
        AuthorError::Template { step, field, error } => {
            Some((step.clone(), field.clone(), &mut error.at))
        }
        AuthorError::NotUpstream {
            step, field, at, ..
        }
        | AuthorError::UndeclaredParam {
            step, field, at, ..
        }
        | AuthorError::NoItemHere {
            step, field, at, ..
        } => Some((step.clone(), field.clone(), at)),
        _ => None,
    }
}

/// A step's texts that hold templates: `run`, `compensate`, `cwd`, `env.NAME`,
/// `on.LABEL`, `compensate_on.LABEL`.
fn fields(step: &StepSpec) -> Vec<TemplateField> {
    let field = |name: String, text: &String| TemplateField {
        step: step.name.clone(),
        field: name,
        text: text.clone(),
    };
    let mut fields: Vec<TemplateField> = [RUN, COMPENSATE, CWD]
        .into_iter()
        .filter_map(|f| Some(field(f.to_owned(), step.attributes.get(f)?)))
        .collect();
    for key in [ENV, ON, COMPENSATE_ON] {
        let map: BTreeMap<String, String> = step
            .attributes
            .get(key)
            .and_then(|e| serde_json::from_str(e).ok())
            .unwrap_or_default();
        fields.extend(map.iter().map(|(k, v)| field(format!("{key}.{k}"), v)));
    }
    fields
}
