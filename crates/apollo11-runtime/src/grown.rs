//! A run's definition as it stands: the pinned one grown by each template step's expansion,
//! in the order the run's `Expanded` events recorded them (their payloads hold the items).
//! The driver, the inspector and operators' actions all read a run's graph from here, so a
//! run resumed, replayed to any event or acted on has the graph it had then.

use crate::EngineError;
use apollo11_core::{RunId, Value, WorkflowSpec};
use apollo11_machine::Expansion;
use apollo11_store::{resolve, BlobStore, EventStore};

/// `spec` grown by `expansions` of run `run_id`, each one's items read from the payload of
/// its `Expanded` event.
///
/// # Errors
///
/// [`EngineError::Store`] when a payload cannot be read; [`EngineError::BadDefinition`] when
/// it holds no list of items, or the items do not grow the definition.
pub(crate) async fn grown_spec<S: EventStore + BlobStore>(
    store: &S,
    run_id: &RunId,
    mut spec: WorkflowSpec,
    expansions: &[Expansion],
) -> Result<WorkflowSpec, EngineError> {
    for expansion in expansions {
        let payload = crate::inspect::recorded_payload(store, run_id, Some(expansion.seq)).await?;
        let bytes = resolve(store, &payload).await?;
        let items: Vec<Value> = serde_json::from_slice(&bytes)
            .map_err(|e| bad_expansion(run_id, expansion, &format!("no list of items: {e}")))?;
        spec = grow(run_id, &spec, expansion, &items)?;
    }
    Ok(spec)
}

/// `spec` grown by one expansion of `items`.
///
/// # Errors
///
/// [`EngineError::BadDefinition`] naming the expansion when the items do not grow `spec`.
pub(crate) fn grow(
    run_id: &RunId,
    spec: &WorkflowSpec,
    expansion: &Expansion,
    items: &[Value],
) -> Result<WorkflowSpec, EngineError> {
    apollo11_author::grow(spec, expansion.step.as_str(), items)
        .map_err(|e| bad_expansion(run_id, expansion, &e.to_string()))
}

fn bad_expansion(run_id: &RunId, expansion: &Expansion, why: &str) -> EngineError {
    EngineError::BadDefinition {
        run_id: run_id.clone(),
        reason: format!(
            "the expansion of step `{}` at event {}: {why}",
            expansion.step, expansion.seq
        ),
    }
}
