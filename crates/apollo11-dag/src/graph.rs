//! The validated graph and its queries. Edges point from a step to what it depends on;
//! "dependents" are the reverse edges.

use std::collections::{BTreeSet, HashMap};

/// Index of a step in its [`Dag`], stable for the life of the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The index as a `usize`, for indexing per-step vectors.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A validated, acyclic workflow graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dag {
    pub(crate) names: Vec<String>,
    pub(crate) index: HashMap<String, NodeId>,
    pub(crate) deps: Vec<Vec<NodeId>>,
    pub(crate) dependents: Vec<Vec<NodeId>>,
    pub(crate) topo: Vec<NodeId>,
    /// Position of each node in `topo`.
    pub(crate) rank: Vec<u32>,
}

impl Dag {
    /// Number of steps.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Always false: a `Dag` has at least one step.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Name of a step.
    ///
    /// # Panics
    ///
    /// When `node` is not a step of this graph (an id from another `Dag`): ids index the
    /// graph they came from, and a foreign one is a bug of the caller.
    pub fn name(&self, node: NodeId) -> &str {
        &self.names[node.index()]
    }

    /// Looks a step up by name.
    pub fn node(&self, name: &str) -> Option<NodeId> {
        self.index.get(name).copied()
    }

    /// All steps in declaration order.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = NodeId> + '_ {
        (0..self.names.len() as u32).map(NodeId)
    }

    /// What `node` depends on, sorted by name.
    ///
    /// # Panics
    ///
    /// When `node` is not a step of this graph.
    pub fn dependencies(&self, node: NodeId) -> &[NodeId] {
        &self.deps[node.index()]
    }

    /// What depends directly on `node`, sorted by name.
    ///
    /// # Panics
    ///
    /// When `node` is not a step of this graph.
    pub fn dependents(&self, node: NodeId) -> &[NodeId] {
        &self.dependents[node.index()]
    }

    /// Every step once, each after all of its dependencies; ties are broken by name, so the
    /// order is the same on every machine and every run.
    pub fn topological_order(&self) -> &[NodeId] {
        &self.topo
    }

    /// Position of `node` in [`Dag::topological_order`].
    ///
    /// # Panics
    ///
    /// When `node` is not a step of this graph.
    pub fn rank(&self, node: NodeId) -> u32 {
        self.rank[node.index()]
    }

    /// Steps for which `is_candidate` holds and whose dependencies all satisfy `is_done`,
    /// in topological order.
    pub fn ready(
        &self,
        is_candidate: impl Fn(NodeId) -> bool,
        is_done: impl Fn(NodeId) -> bool,
    ) -> Vec<NodeId> {
        self.topo
            .iter()
            .copied()
            .filter(|&n| is_candidate(n) && self.deps[n.index()].iter().all(|&d| is_done(d)))
            .collect()
    }

    /// Whether `node` depends on `dependency`, directly or transitively: a walk up from
    /// `node` that never climbs below `dependency`'s rank, so that a query costs the steps
    /// between them, not the graph's closure.
    ///
    /// # Panics
    ///
    /// When either is not a step of this graph.
    pub fn depends_on(&self, node: NodeId, dependency: NodeId) -> bool {
        let floor = self.rank(dependency);
        let mut seen = vec![false; self.len()];
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            for &d in &self.deps[n.index()] {
                if d == dependency {
                    return true;
                }
                if self.rank(d) > floor && !std::mem::replace(&mut seen[d.index()], true) {
                    stack.push(d);
                }
            }
        }
        false
    }

    /// Every step that depends on `node` directly or transitively (not `node` itself), in
    /// topological order.
    ///
    /// # Panics
    ///
    /// When `node` is not a step of this graph.
    pub fn downstream(&self, node: NodeId) -> Vec<NodeId> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            for &d in &self.dependents[n.index()] {
                if seen.insert(d) {
                    stack.push(d);
                }
            }
        }
        let mut out: Vec<NodeId> = seen.into_iter().collect();
        out.sort_by_key(|&n| self.rank(n));
        out
    }
}
