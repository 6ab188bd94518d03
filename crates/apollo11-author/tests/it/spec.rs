//! Building declared definitions, and comparing graphs.

use apollo11_core::{
    ForEach, Idempotency, ItemSource, OnFailure, ParamKind, ParamSpec, StepSpec, Value,
    WorkflowSpec,
};
use std::collections::{BTreeMap, BTreeSet};

pub fn step(name: &str, deps: &[&str]) -> StepSpec {
    StepSpec::new(name, deps, Idempotency::Natural)
}

pub fn for_each(name: &str, deps: &[&str], items: ItemSource) -> StepSpec {
    let mut s = step(name, deps);
    s.for_each = Some(ForEach {
        items,
        wave_size: None,
        gate: None,
        key: None,
    });
    s
}

pub fn waves(mut s: StepSpec, size: u32, gate: Option<&str>) -> StepSpec {
    let f = s.for_each.as_mut().unwrap();
    f.wave_size = Some(size);
    f.gate = gate.map(str::to_owned);
    s
}

pub fn list(items: &[&str]) -> ItemSource {
    ItemSource::List(items.iter().map(|s| Value::from(*s)).collect())
}

pub fn spec(steps: Vec<StepSpec>) -> WorkflowSpec {
    WorkflowSpec::new("w", OnFailure::Pause, steps)
}

pub fn list_param(name: &str, default: Value) -> ParamSpec {
    ParamSpec {
        name: name.to_owned(),
        kind: ParamKind::List,
        default: Some(default),
        required: false,
        description: String::new(),
        secret: None,
    }
}

/// Each step's dependencies, by name.
pub fn edges(spec: &WorkflowSpec) -> BTreeMap<String, Vec<String>> {
    spec.steps
        .iter()
        .map(|s| (s.name.clone(), s.depends_on.clone()))
        .collect()
}

/// Everything each step depends on, directly or not.
pub fn closure(graph: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, BTreeSet<String>> {
    fn reach(
        graph: &BTreeMap<String, Vec<String>>,
        node: &str,
        memo: &mut BTreeMap<String, BTreeSet<String>>,
    ) -> BTreeSet<String> {
        if let Some(done) = memo.get(node) {
            return done.clone();
        }
        let mut all = BTreeSet::new();
        for d in &graph[node] {
            all.insert(d.clone());
            all.extend(reach(graph, d, memo));
        }
        memo.insert(node.to_owned(), all.clone());
        all
    }
    let mut memo = BTreeMap::new();
    for node in graph.keys() {
        reach(graph, node, &mut memo);
    }
    memo
}
