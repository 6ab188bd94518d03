//! What an attempt reads besides its own payload: the scope its templates, conditions and
//! code see. The driver fills it before the attempt's `Started` is appended (the run's
//! arguments and id, the step's item and wave, and the outputs and statuses of the steps it
//! may read, each output read from the store, its blob fetched and checked); the secrets are
//! read from their sources when the attempt begins, and never written anywhere.

use super::Driver;
use crate::engine::Store;
use crate::{EngineError, StepError, Try};
use apollo11_author::Scope;
use apollo11_core::{ParamSpec, SecretSource, Seq, StepName, WorkflowSpec};
use apollo11_dag::{Dag, NodeId};
use apollo11_machine::StepStatus;
use apollo11_store::StoreError;
use std::collections::BTreeMap;

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

    /// The scope of an attempt (or compensation) of `step`, but its secrets; the outputs
    /// it reads are taken from `read` or read into it. The items of a template do not read
    /// the template's output (their list of items: each has its own `item`).
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
        let template = origin.map(|o| o.declaration.as_str());
        for (name, actual) in readable(spec, dag, node) {
            let state = self.state().step(&actual);
            scope
                .statuses
                .insert(name.clone(), state.status.to_string());
            let Some(seq) = state.payload_seq else {
                continue;
            };
            if state.status != StepStatus::Succeeded || template == Some(actual.as_str()) {
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

/// The steps an attempt of `node` may read, by the name it reads each with, and the step
/// that name stands for: each step it depends on, directly or not, by its own name; for a
/// step a `for_each` made, each upstream step made from the same key also by its
/// declaration's name (`drain` in `upgrade[host-01]` is `drain[host-01]`). Steps made from
/// other items are read only when depended on directly (a fan-in reads each of its items):
/// a wave depends on every step of the waves before it, and reading all of them at each
/// attempt would cost the square of the items. No template can name them (a template names
/// declarations).
fn readable(spec: &WorkflowSpec, dag: &Dag, node: NodeId) -> BTreeMap<String, String> {
    let key = spec.steps[node.index()].origin.as_ref().map(|o| &o.key);
    let mut direct = vec![false; dag.len()];
    for d in dag.dependencies(node) {
        direct[d.index()] = true;
    }
    let mut readable = BTreeMap::new();
    let mut by_declaration = BTreeMap::new();
    let mut stack = vec![node];
    let mut seen = vec![false; dag.len()];
    while let Some(at) = stack.pop() {
        for &d in dag.dependencies(at) {
            if std::mem::replace(&mut seen[d.index()], true) {
                continue;
            }
            stack.push(d);
            let upstream = &spec.steps[d.index()];
            let paired = upstream.origin.as_ref().filter(|o| Some(&o.key) == key);
            if upstream.origin.is_none() || paired.is_some() || direct[d.index()] {
                readable.insert(upstream.name.clone(), upstream.name.clone());
            }
            if let Some(origin) = paired {
                by_declaration.insert(origin.declaration.clone(), upstream.name.clone());
            }
        }
    }
    // A declaration's name reads the step of the same item, not the template step of a
    // `for_each` made at run time, which bears that name too.
    readable.extend(by_declaration);
    readable
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
