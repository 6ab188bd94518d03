//! Integration tests of the pure state machine.

mod classes;
mod decide;
mod expand;
mod fold;
mod golden;
mod interrupt;
mod memory;
mod operator;
mod operator_table;
mod policy;
mod rerun;
mod sim;
mod table;
mod trigger;
mod wait;

use apollo11_core::{Idempotency, OnFailure, Payload, StepSpec, Timeout, WorkflowSpec};

/// A workflow spec from `(name, deps, idempotency, has_compensation)`.
pub fn spec(on_failure: OnFailure, steps: &[(&str, &[&str], Idempotency, bool)]) -> WorkflowSpec {
    WorkflowSpec {
        name: "test".into(),
        on_failure,
        max_concurrency: 8,
        steps: steps
            .iter()
            .map(|(name, deps, idem, comp)| StepSpec {
                has_compensation: *comp,
                timeout: Timeout::None,
                ..StepSpec::new(name, deps, *idem)
            })
            .collect(),
        ..WorkflowSpec::new("test", on_failure, Vec::new())
    }
}

/// The spec as the `RunCreated` payload that pins it.
pub fn pinned(spec: &WorkflowSpec) -> Payload {
    Payload::inline(serde_json::to_vec(spec).unwrap())
}
