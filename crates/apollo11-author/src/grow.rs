//! A `for_each` over an output made into its steps once the output is known.

use crate::expand::{check_graph, made};
use crate::items::Items;
use crate::scope::walk;
use crate::{value_type, AuthorError, Missing, Ref};
use apollo11_core::{ItemSource, StepSpec, Value, WorkflowSpec};

/// The definition with the template step `template` (a `for_each` over an output) made into
/// one step per item of `items`, each depending on the template (and, in waves, on the
/// previous wave's), inserted after it; every step that depended on the template now
/// depends on all of them (on the template still when there are none). The template stays.
/// Such a `for_each` has no gate ([`instantiate`](crate::instantiate) refuses one).
///
/// # Errors
///
/// [`AuthorError`]: `template` is no such step, not a `for_each` over an output, or already
/// grew; too many items, an item with no key, two with one name, or a name already taken.
pub fn grow(
    spec: &WorkflowSpec,
    template: &str,
    items: &[Value],
) -> Result<WorkflowSpec, AuthorError> {
    let not = |problem| AuthorError::NotATemplate {
        step: template.to_owned(),
        problem,
    };
    let t = spec
        .steps
        .iter()
        .position(|s| s.name == template)
        .ok_or_else(|| AuthorError::UnknownStep {
            step: template.to_owned(),
        })?;
    let step = &spec.steps[t];
    let for_each = match &step.for_each {
        Some(f) if matches!(f.items, ItemSource::Output { .. }) => f,
        _ => return Err(not("is not a for_each over an output")),
    };
    if spec
        .steps
        .iter()
        .any(|s| s.origin.as_ref().is_some_and(|o| o.declaration == template))
    {
        return Err(not("has already grown its steps"));
    }
    let items = Items::new(template, for_each, items.to_vec())?;
    let grown: Vec<StepSpec> = (0..items.keys.len())
        .map(|j| {
            let mut deps = vec![template.to_owned()];
            if let Some(w) = items.waves[j].filter(|&w| w > 1) {
                deps.extend(items.names[items.wave(w - 1)].iter().cloned());
            }
            made(
                step,
                items.names[j].clone(),
                deps,
                items.origin(template, j),
            )
        })
        .collect();
    let mut steps = Vec::with_capacity(spec.steps.len() + grown.len());
    for (i, s) in spec.steps.iter().enumerate() {
        let mut s = s.clone();
        if !grown.is_empty() && s.depends_on.iter().any(|d| d == template) {
            s.depends_on = s
                .depends_on
                .iter()
                .flat_map(|d| match d == template {
                    true => items.names.clone(),
                    false => vec![d.clone()],
                })
                .collect();
        }
        steps.push(s);
        if i == t {
            steps.extend(grown.iter().cloned());
        }
    }
    let spec = WorkflowSpec {
        steps,
        ..spec.clone()
    };
    check_graph(&spec)?;
    Ok(spec)
}

/// The items a `for_each` over `source`'s output at `path` (dotted; `""`: the whole
/// output) gets from the output's bytes: a JSON list.
///
/// # Errors
///
/// [`AuthorError::Output`] when the output is not JSON text or has no such path;
/// [`AuthorError::NotAList`] when the value there is not a list.
pub fn output_items(
    declaration: &str,
    source: &str,
    path: &str,
    output: &[u8],
) -> Result<Vec<Value>, AuthorError> {
    let fields: Vec<String> = match path {
        "" => Vec::new(),
        path => path.split('.').map(str::to_owned).collect(),
    };
    let reference = Ref::Output {
        step: source.to_owned(),
        path: fields.clone(),
    };
    let failed = |missing| AuthorError::Output {
        step: declaration.to_owned(),
        missing,
    };
    let json: Value = serde_json::from_slice(output)
        .map_err(|e| failed(Missing::NotJson(source.to_owned(), e.to_string())))?;
    match walk(&reference, &json, &fields).map_err(failed)? {
        Value::Array(items) => Ok(items.clone()),
        other => Err(AuthorError::NotAList {
            step: declaration.to_owned(),
            source: reference.to_string(),
            found: value_type(other),
        }),
    }
}
