//! Template steps: a `for_each` over the output of a step it depends on, made into its
//! steps once that output is known. When `decide` starts a template, the driver reads the
//! output and appends, in one batch, `Started` and either `Expanded { items }` (the JSON
//! list of items as payload, offloaded to the blob store when large) or a `Failed` no retry
//! can cure, naming what is wrong (no list there, too many items, items that name no step).
//! A template whose source was skipped is skipped too (its dependents go on as after a
//! success). A crash before that batch is durable leaves the template not started, or
//! started and then found interrupted: it expands once, when started again. Each
//! `Expanded` folded grows the driver's definition (the same way
//! [`grown_spec`](crate::grown::grown_spec) grows it on resume) and recompiles the run's
//! graph before the next decision, so no event of an item step is folded into a graph that
//! lacks the step. A template's condition is its items' to evaluate (each carries it); its
//! compensation is theirs too: compensating the template itself undoes nothing.

use super::{clip, Driver};
use crate::engine::{Shared, Store};
use crate::grown::{grow, grown_spec};
use crate::{EngineError, WorkflowError};
use apollo11_author::output_items;
use apollo11_core::{
    AttemptFailure, EventKind, FailureClass, ItemSource, Payload, RunId, StepName, Timeout, Value,
    WorkflowSpec,
};
use apollo11_machine::{Expansion, Policy, RunState, StepStatus};
use apollo11_store::{NewEvent, StoreError};
use std::collections::BTreeMap;

/// What starting a template comes to.
enum Expanding {
    /// Its items.
    Items(Vec<Value>),
    /// Nothing to expand: its source was skipped, so it is skipped too, for this reason.
    Skip(String),
    /// No items to grow the definition by, for this reason.
    Fail(String),
}

impl<S: Store> Driver<S> {
    /// Whether `step` is a template: a `for_each` over an output, expanded at run time.
    pub(super) fn is_template(&self, step: &StepName) -> bool {
        crate::condition::is_template(self.step_spec(step))
    }

    /// The events that start attempt `attempt` of template `step` and end it: expanded into
    /// its items, or failed for good; or that skip it when its source was skipped.
    pub(super) async fn expansion(
        &mut self,
        step: &StepName,
        attempt: u32,
    ) -> Result<Vec<NewEvent>, EngineError> {
        let started = self.event(step, EventKind::Started, attempt, Payload::Empty);
        let ended = match self.items(step).await? {
            Expanding::Skip(reason) => {
                let skipped = EventKind::Skipped {
                    reason: clip(&reason),
                };
                return Ok(vec![self.event(step, skipped, attempt - 1, Payload::Empty)]);
            }
            Expanding::Items(items) => {
                tracing::info!(step = %step, items = items.len(), "expanding the template step");
                let kind = EventKind::Expanded {
                    items: items.len() as u32,
                };
                let list = serde_json::to_vec(&items).expect("JSON values serialize");
                let payload = self.offload_patiently(Payload::inline(list)).await?;
                self.fresh.insert(step.clone(), items);
                self.event(step, kind, attempt, payload)
            }
            Expanding::Fail(error) => {
                tracing::warn!(step = %step, error = %error, "the template step cannot expand");
                let failure = AttemptFailure::new(FailureClass::Error, clip(&error), false);
                let kind = EventKind::AttemptFailed(failure);
                self.event(step, kind, attempt, Payload::Empty)
            }
        };
        Ok(vec![started, ended])
    }

    /// The items of template `step`, from its source's output; or why it has none to grow
    /// the run's definition by.
    async fn items(&self, step: &StepName) -> Result<Expanding, StoreError> {
        if self.state().expansions.iter().any(|e| e.step == *step) {
            return Ok(Expanding::Fail(format!(
                "step `{step}` expanded into its items already: a template expands once"
            )));
        }
        let spec = self.step_spec(step);
        let Some(ItemSource::Output { step: source, path }) =
            spec.for_each.as_ref().map(|f| &f.items)
        else {
            unreachable!("a template's items come from an output");
        };
        let recorded = self.state().step(source);
        let pending = self.state().step(step.as_str()).status == StepStatus::Pending;
        if recorded.status == StepStatus::Skipped && pending {
            return Ok(Expanding::Skip(format!(
                "step `{source}`, whose output it takes its items from, was skipped"
            )));
        }
        if recorded.status != StepStatus::Succeeded {
            return Ok(Expanding::Fail(format!(
                "step `{step}`: for_each over the output of step `{source}`, which did not succeed ({})",
                recorded.status
            )));
        }
        let output = self.payload_at(recorded.payload_seq).await?;
        let items = output_items(step.as_str(), source, path, &output.unwrap_or_default());
        let grown = items.and_then(|items| {
            apollo11_author::grow(&self.spec, step.as_str(), &items).map(|spec| (items, spec))
        });
        Ok(match grown {
            Ok((items, spec)) => match Policy::compile(&spec, |_, fallback| fallback) {
                Ok(_) => Expanding::Items(items),
                Err(e) => Expanding::Fail(format!(
                    "step `{step}`: its items make an invalid graph: {e}"
                )),
            },
            Err(e) => Expanding::Fail(e.to_string()),
        })
    }

    /// The events that end a compensation of template `step`'s attempt `attempt`: it is
    /// compensated at once, having nothing of its own to undo.
    pub(super) fn compensated_template(&self, step: &StepName, attempt: u32) -> Vec<NewEvent> {
        [EventKind::Compensating, EventKind::Compensated]
            .map(|kind| self.event(step, kind, attempt, Payload::Empty))
            .into()
    }

    /// Grows the run's definition by the expansions folded since it last grew (their items
    /// kept from the expansion that appended them, or read from their events), and
    /// recompiles the graph.
    pub(super) async fn regrow(&mut self) -> Result<(), EngineError> {
        let expansions: Vec<Expansion> = self.state().expansions[self.grown..].to_vec();
        if expansions.is_empty() {
            // Items of an expansion whose append did not land: it is decided again.
            self.fresh.clear();
            return Ok(());
        }
        let run_id = self.run_id().clone();
        let mut spec = self.spec.clone();
        for expansion in &expansions {
            spec = match self.fresh.remove(&expansion.step) {
                Some(items) => grow(&run_id, &spec, expansion, &items)?,
                None => {
                    let store = self.shared.store.as_ref();
                    grown_spec(store, &run_id, spec, std::slice::from_ref(expansion)).await?
                }
            };
        }
        self.fresh.clear();
        self.recompile(spec).await?;
        self.grown += expansions.len();
        Ok(())
    }

    /// Takes `spec`, the run's definition grown, as the graph decisions read.
    async fn recompile(&mut self, spec: WorkflowSpec) -> Result<(), EngineError> {
        learn_auto(&self.shared, &spec, &mut self.auto).await;
        let auto = &self.auto;
        (self.machine)
            .regraph(&spec, |name, fallback| {
                auto.get(name).copied().unwrap_or(fallback)
            })
            .map_err(WorkflowError::Invalid)?;
        self.spec = spec;
        Ok(())
    }
}

/// A run's state and its definition as it stands: `pinned` grown by the expansions the
/// state records.
pub(super) async fn load<S: Store>(
    shared: &Shared<S>,
    run_id: &RunId,
    pinned: &WorkflowSpec,
) -> Result<(RunState, WorkflowSpec), EngineError> {
    let state = shared.run_state(run_id).await?;
    let store = shared.store.as_ref();
    let spec = grown_spec(store, run_id, pinned.clone(), &state.expansions).await?;
    Ok((state, spec))
}

/// Adds to `auto` the learned timeout of each step of `spec` with `timeout = "auto"` that
/// it lacks.
pub(super) async fn learn_auto<S: Store>(
    shared: &Shared<S>,
    spec: &WorkflowSpec,
    auto: &mut BTreeMap<String, u64>,
) {
    for step in &spec.steps {
        if let (Timeout::Auto { fallback_ms }, false) =
            (step.timeout, auto.contains_key(&step.name))
        {
            let ms = shared
                .auto_timeout_ms(&spec.name, &step.name, fallback_ms)
                .await;
            auto.insert(step.name.clone(), ms);
        }
    }
}
