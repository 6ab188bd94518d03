//! What an attempt of a step reads of its run, but its own payload and secrets: the run's
//! arguments and id, its item and wave, and the statuses and outputs of the steps it may
//! read. The driver fills a scope from it before a `Started` is appended; the inspector's
//! plan fills one the same way to judge a condition.

use apollo11_author::{item_name, Condition, Ref, Scope};
use apollo11_core::{Seq, StepName, StepSpec, WorkflowSpec};
use apollo11_dag::{Dag, NodeId};
use apollo11_machine::{RunState, StepStatus};
use std::collections::{BTreeMap, BTreeSet};

/// A step's scope but its outputs, and the outputs to read into it: the name each is read
/// with and the seq of the event that holds it.
pub(crate) struct Frame {
    /// The arguments, run id, item, wave and statuses.
    pub scope: Scope,
    /// The outputs of the readable steps that succeeded.
    pub outputs: Vec<(String, Seq)>,
}

/// What an attempt of `step` (one of the run's) reads ([`readable`]), as the state says.
pub(crate) fn frame(spec: &WorkflowSpec, dag: &Dag, state: &RunState, step: &StepName) -> Frame {
    let node = dag
        .node(step.as_str())
        .expect("decide only names steps of the run");
    let origin = spec.steps[node.index()].origin.as_ref();
    let mut scope = Scope {
        arguments: spec.arguments.clone(),
        run_id: state.run_id.to_string(),
        item: origin.map(|o| o.item.clone()),
        wave: origin.and_then(|o| o.wave),
        ..Scope::default()
    };
    let mut outputs = Vec::new();
    for (name, actual) in readable(spec, dag, node) {
        let recorded = state.step(&actual);
        scope
            .statuses
            .insert(name.clone(), recorded.status.to_string());
        if recorded.status != StepStatus::Succeeded {
            continue;
        }
        if let Some(seq) = recorded.payload_seq {
            outputs.push((name, seq));
        }
    }
    Frame { scope, outputs }
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
