//! Proptest strategies for workflow graphs (the `proptest` feature): acyclic ones, and
//! ones with a planted cycle.

use proptest::prelude::*;

/// `(step, dependencies)` pairs, as [`Dag::build`](crate::Dag::build) takes them.
pub type Edges = Vec<(String, Vec<String>)>;

/// A random DAG of 1..=`max_nodes` steps. Step `i` may only depend on steps `< i` of a
/// hidden order, and names are assigned in a shuffled order, so name order, declaration
/// order and topological order all differ.
pub fn arb_dag_edges(max_nodes: usize) -> impl Strategy<Value = Edges> {
    (1..=max_nodes)
        .prop_flat_map(|n| {
            let deps = proptest::collection::vec(
                proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
                n,
            );
            (
                Just(n),
                deps,
                Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
            )
        })
        .prop_map(|(n, deps, names)| {
            let name = |i: usize| format!("n{:03}", names[i]);
            (0..n)
                .map(|i| {
                    let mut ds: Vec<String> = if i == 0 {
                        Vec::new()
                    } else {
                        deps[i].iter().map(|x| name(x.index(i))).collect()
                    };
                    ds.sort();
                    ds.dedup();
                    (name(i), ds)
                })
                .collect()
        })
}

/// A random DAG with one extra edge that closes a cycle (possibly a self-loop).
pub fn arb_cyclic_graph(max_nodes: usize) -> impl Strategy<Value = Edges> {
    (
        arb_dag_edges(max_nodes),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(mut edges, a, b)| {
            // Any path from `low` to `high` of the hidden order plus the edge low -> high
            // (low depends on high) is a cycle; low == high is a self-loop.
            let (x, y) = (a.index(edges.len()), b.index(edges.len()));
            let (low, high) = (x.min(y), x.max(y));
            let back = edges[high].0.clone();
            let target = &mut edges[low].1;
            if !target.contains(&back) {
                target.push(back);
            }
            // Make `high` depend on `low` too, so the cycle exists for sure.
            let low_name = edges[low].0.clone();
            if low != high && !edges[high].1.contains(&low_name) {
                edges[high].1.push(low_name);
            }
            edges
        })
}
