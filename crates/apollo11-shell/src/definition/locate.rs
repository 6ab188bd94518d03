//! Errors found on the whole definition (the graph, the policies) put back on the file's
//! text, at the step they name.

use super::raw::{RawFile, RawStep};
use super::{DefinitionError, Locator};
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
