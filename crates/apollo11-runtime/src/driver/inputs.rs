//! What an attempt reads besides its own payload: the scope its templates, conditions and
//! code see. The driver fills it before the attempt's `Started` is appended (the run's
//! arguments and id, the step's item and wave, and the outputs and statuses of the steps it
//! may read, each output read from the store, its blob fetched and checked); the secrets are
//! read from their sources when the attempt begins, and never written anywhere.

use super::Driver;
use crate::engine::Store;
use crate::{EngineError, StepError, Try};
use apollo11_author::{item_name, Condition, Ref, Scope};
use apollo11_core::{ParamSpec, SecretSource, Seq, StepName, StepSpec, WorkflowSpec};
use apollo11_dag::{Dag, NodeId};
use apollo11_machine::StepStatus;
use apollo11_store::StoreError;
use std::collections::{BTreeMap, BTreeSet};

/// Payloads read for one decision's launches, by the seq of the event that holds each: the
/// items of a template all read the same outputs, and read them once.
pub(super) type Read = BTreeMap<Seq, Vec<u8>>;

/// What a launch hands its try, read before its `Started` or `Compensating` is appended.
pub(super) struct Prepared {
    /// The step's checkpoint marker, or for a compensation its output.
    pub payload: Option<Vec<u8>>,
    /// What it reads, but the secrets.
    pub scope: Scope,
}

impl<S: Store> Driver<S> {
    /// What each launch hands its step (its checkpoint marker, or for a compensation its
    /// output, and the outputs it may read), read before its `Started` or `Compensating` is
    /// appended. A payload that cannot be read (a damaged or missing blob) stops the run with
    /// the store's error before that append: a step must never run with nothing in place of
    /// what it was promised. Outcomes already known are appended first: they are facts worth
    /// keeping.
    pub(super) async fn prepare(&mut self, launches: &[Try]) -> Result<Vec<Prepared>, EngineError> {
        let mut prepared = Vec::with_capacity(launches.len());
        let mut outputs = Read::new();
        for tried in launches {
            let read = async {
                let payload = self.recorded_payload(&tried.step, tried.kind).await?;
                let scope = self.scope_of(&tried.step, &mut outputs).await?;
                Ok::<_, StoreError>(Prepared { payload, scope })
            };
            match read.await {
                Ok(p) => prepared.push(p),
                Err(e) => {
                    self.commit(Vec::new()).await?;
                    return Err(e.into());
                }
            }
        }
        Ok(prepared)
    }

    /// The scope of an attempt (or compensation) of `step`, but its secrets: what it reads
    /// ([`readable`]), the outputs taken from `read` or read into it.
    pub(super) async fn scope_of(
        &self,
        step: &StepName,
        read: &mut Read,
    ) -> Result<Scope, StoreError> {
        let spec = &self.spec;
        let dag = self.machine.dag();
        let node = dag
            .node(step.as_str())
            .expect("decide only names steps of the run");
        let origin = spec.steps[node.index()].origin.as_ref();
        let mut scope = Scope {
            arguments: spec.arguments.clone(),
            run_id: self.run_id().to_string(),
            item: origin.map(|o| o.item.clone()),
            wave: origin.and_then(|o| o.wave),
            ..Scope::default()
        };
        for (name, actual) in readable(spec, dag, node) {
            let state = self.state().step(&actual);
            scope
                .statuses
                .insert(name.clone(), state.status.to_string());
            let Some(seq) = state.payload_seq else {
                continue;
            };
            if state.status != StepStatus::Succeeded {
                continue;
            }
            let bytes = match read.get(&seq) {
                Some(bytes) => bytes.clone(),
                None => {
                    let bytes = self.payload_at(Some(seq)).await?.unwrap_or_default();
                    read.insert(seq, bytes.clone());
                    bytes
                }
            };
            scope.outputs.insert(name, bytes);
        }
        Ok(scope)
    }
}

/// The steps an attempt of `node` reads, by the name it reads each with, and the step that
/// name stands for: each step it depends on directly, by its own name, and each step its
/// condition or texts (`${steps.NAME.…}` in an attribute: a shell step's command, env,
/// folder) name, however far upstream. A step a template made reads its item, not the
/// template's source (the whole list) unless it names it: ten thousand items would copy
/// the list ten thousand times. For a step a `for_each` made, a declaration's name
/// stands for the step made from the same item (`drain` in `upgrade[host-01]` is
/// `drain[host-01]`). A template step is never read: its output is its list of items, each
/// of which is a step's own `item`. Reading every step upstream instead would cost the
/// square of a chain's length, in reads and in the files of a shell step's inputs.
fn readable(spec: &WorkflowSpec, dag: &Dag, node: NodeId) -> BTreeMap<String, String> {
    let step = &spec.steps[node.index()];
    let key = step.origin.as_ref().map(|o| o.key.as_str());
    let mut readable = BTreeMap::new();
    let mut add = |name: &str, actual: &str| {
        let known = dag.node(actual).map(|n| &spec.steps[n.index()]);
        if known.is_some_and(|s| s.for_each.is_none()) {
            readable.insert(name.to_owned(), actual.to_owned());
        }
    };
    let paired = |d: NodeId| {
        let origin = spec.steps[d.index()].origin.as_ref();
        origin.filter(|o| Some(o.key.as_str()) == key)
    };
    for &d in dag.dependencies(node) {
        let upstream = &spec.steps[d.index()];
        if upstream.for_each.is_some() {
            // Made by this template: through it, the steps of the same item it waits for.
            for &t in dag.dependencies(d) {
                if let Some(origin) = paired(t) {
                    add(&spec.steps[t.index()].name, &spec.steps[t.index()].name);
                    add(&origin.declaration, &spec.steps[t.index()].name);
                }
            }
            continue;
        }
        add(&upstream.name, &upstream.name);
        if let Some(origin) = paired(d) {
            add(&origin.declaration, &upstream.name);
        }
    }
    for name in named_steps(step) {
        // A declaration's name: expanded when the run was created (no step bears it), or at
        // run time (its template does).
        let declaration = dag
            .node(&name)
            .is_none_or(|n| spec.steps[n.index()].for_each.is_some());
        match key {
            Some(key) if declaration => add(&name, &item_name(&name, key)),
            _ => add(&name, &name),
        }
    }
    readable
}

/// The steps `step`'s condition and the `${...}` of its attributes name.
fn named_steps(step: &StepSpec) -> BTreeSet<String> {
    let condition = step
        .condition
        .as_deref()
        .and_then(|c| Condition::parse(c).ok());
    let in_condition = condition
        .iter()
        .flat_map(|c| c.references().map(|(_, r)| r.clone()));
    let in_texts = step.attributes.values().flat_map(|text| {
        let spans = text.split("${").skip(1);
        spans.filter_map(|span| Ref::parse(span.split('}').next()?))
    });
    in_condition
        .chain(in_texts)
        .filter_map(|r| match r {
            Ref::Output { step, .. } | Ref::Status { step } => Some(step),
            _ => None,
        })
        .collect()
}

/// The secret parameters of `params` with their values, read now from their sources (an
/// environment variable of the engine, or a file, one trailing newline removed).
///
/// # Errors
///
/// A fatal [`StepError`] naming the parameter and where it was looked for; never the value.
pub(super) fn read_secrets(params: &[ParamSpec]) -> Result<BTreeMap<String, String>, StepError> {
    let mut secrets = BTreeMap::new();
    for param in params {
        let Some(source) = &param.secret else {
            continue;
        };
        let missing = |why: String| {
            StepError::fatal(format!(
                "the secret parameter `{}` has no value: {why}",
                param.name
            ))
        };
        let value = match source {
            SecretSource::Env(var) => std::env::var(var).map_err(|e| {
                missing(match e {
                    std::env::VarError::NotPresent => {
                        format!("the environment variable `{var}` is not set")
                    }
                    std::env::VarError::NotUnicode(_) => {
                        format!("the environment variable `{var}` is not UTF-8")
                    }
                })
            })?,
            SecretSource::File(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| missing(format!("the file `{path}` cannot be read: {e}")))?;
                let text = text.strip_suffix('\n').unwrap_or(&text);
                text.strip_suffix('\r').unwrap_or(text).to_owned()
            }
        };
        secrets.insert(param.name.clone(), value);
    }
    Ok(secrets)
}
