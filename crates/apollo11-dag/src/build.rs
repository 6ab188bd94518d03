//! Building and validating a [`Dag`]: names, dependencies, acyclicity, and the
//! deterministic topological order computed once here.

use crate::{Dag, DagError, NodeId};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};

impl Dag {
    /// Builds a graph from `(step, dependencies)` pairs in declaration order.
    ///
    /// Checks run in a fixed order so the same bad input always gives the same error: empty,
    /// too many nodes, duplicates, unknown dependencies, then cycles.
    ///
    /// # Errors
    ///
    /// [`DagError`] naming the culprit: no steps, more than `max_nodes`, a step defined
    /// twice, a dependency that is not a step, or one real cycle (its path).
    pub fn build<S, D>(steps: &[(S, Vec<D>)], max_nodes: usize) -> Result<Dag, DagError>
    where
        S: AsRef<str>,
        D: AsRef<str>,
    {
        if steps.is_empty() {
            return Err(DagError::Empty);
        }
        if steps.len() > max_nodes {
            return Err(DagError::TooManyNodes {
                count: steps.len(),
                max: max_nodes,
            });
        }
        let mut index = HashMap::with_capacity(steps.len());
        for (i, (name, _)) in steps.iter().enumerate() {
            match index.entry(name.as_ref().to_owned()) {
                Entry::Occupied(_) => {
                    return Err(DagError::DuplicateStep {
                        step: name.as_ref().to_owned(),
                    })
                }
                Entry::Vacant(slot) => {
                    slot.insert(NodeId(i as u32));
                }
            }
        }
        let names: Vec<String> = steps.iter().map(|(n, _)| n.as_ref().to_owned()).collect();
        let deps = resolve_dependencies(steps, &index, &names)?;
        let mut dependents = vec![Vec::new(); names.len()];
        for (i, ds) in deps.iter().enumerate() {
            for d in ds {
                dependents[d.index()].push(NodeId(i as u32));
            }
        }
        for list in &mut dependents {
            list.sort_by(|a, b| names[a.index()].cmp(&names[b.index()]));
        }
        let topo = topological_order(&names, &deps, &dependents)?;
        let mut rank = vec![0; names.len()];
        for (position, node) in topo.iter().enumerate() {
            rank[node.index()] = position as u32;
        }
        Ok(Dag {
            names,
            index,
            deps,
            dependents,
            topo,
            rank,
        })
    }
}

/// Maps dependency names to ids, sorted by name with repeats removed.
fn resolve_dependencies<S: AsRef<str>, D: AsRef<str>>(
    steps: &[(S, Vec<D>)],
    index: &HashMap<String, NodeId>,
    names: &[String],
) -> Result<Vec<Vec<NodeId>>, DagError> {
    steps
        .iter()
        .map(|(name, ds)| {
            let mut out = Vec::with_capacity(ds.len());
            for d in ds {
                match index.get(d.as_ref()) {
                    Some(&id) => out.push(id),
                    None => {
                        return Err(DagError::UnknownDependency {
                            step: name.as_ref().to_owned(),
                            dependency: d.as_ref().to_owned(),
                        })
                    }
                }
            }
            out.sort_by(|a, b| names[a.index()].cmp(&names[b.index()]));
            out.dedup();
            Ok(out)
        })
        .collect()
}

/// Kahn's algorithm with a name-ordered ready set; on a cycle, reports one real cycle.
fn topological_order(
    names: &[String],
    deps: &[Vec<NodeId>],
    dependents: &[Vec<NodeId>],
) -> Result<Vec<NodeId>, DagError> {
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut ready: BTreeSet<(&str, NodeId)> = (0..names.len())
        .filter(|&i| waiting[i] == 0)
        .map(|i| (names[i].as_str(), NodeId(i as u32)))
        .collect();
    let mut order = Vec::with_capacity(names.len());
    while let Some((_, node)) = ready.pop_first() {
        order.push(node);
        for &d in &dependents[node.index()] {
            waiting[d.index()] -= 1;
            if waiting[d.index()] == 0 {
                ready.insert((names[d.index()].as_str(), d));
            }
        }
    }
    if order.len() == names.len() {
        return Ok(order);
    }
    Err(DagError::Cycle {
        path: find_cycle(names, deps, &waiting),
    })
}

/// Every node left with `waiting > 0` after Kahn's algorithm has a dependency that is also
/// left, so walking "first unfinished dependency" from the smallest-named such node must
/// revisit a node: the walk from that node's first visit is a cycle.
fn find_cycle(names: &[String], deps: &[Vec<NodeId>], waiting: &[usize]) -> Vec<String> {
    let stuck = |n: NodeId| waiting[n.index()] > 0;
    let start = (0..names.len() as u32)
        .map(NodeId)
        .filter(|&n| stuck(n))
        .min_by(|a, b| names[a.index()].cmp(&names[b.index()]))
        .expect("Kahn's algorithm left nodes, so one is stuck");
    let mut walk = vec![start];
    let mut position = BTreeMap::from([(start, 0usize)]);
    let mut node = start;
    loop {
        node = *deps[node.index()]
            .iter()
            .find(|&&d| stuck(d))
            .expect("a stuck node has a stuck dependency");
        if let Some(&first) = position.get(&node) {
            let mut path: Vec<String> = walk[first..]
                .iter()
                .map(|n| names[n.index()].clone())
                .collect();
            path.push(names[node.index()].clone());
            return path;
        }
        position.insert(node, walk.len());
        walk.push(node);
    }
}
