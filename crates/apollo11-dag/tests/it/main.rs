//! Integration tests of the workflow graph.

use apollo11_dag::strategies::{arb_cyclic_graph, arb_dag_edges, Edges};
use apollo11_dag::{Dag, DagError, NodeId};
use proptest::prelude::*;

fn dag(edges: &[(&str, &[&str])]) -> Result<Dag, DagError> {
    let owned: Vec<(&str, Vec<&str>)> = edges.iter().map(|(n, d)| (*n, d.to_vec())).collect();
    Dag::build(&owned, 10_000)
}

fn names(dag: &Dag, nodes: &[NodeId]) -> Vec<String> {
    nodes.iter().map(|&n| dag.name(n).to_owned()).collect()
}

fn diamond() -> Dag {
    dag(&[("d", &["b", "c"]), ("b", &["a"]), ("c", &["a"]), ("a", &[])]).unwrap()
}

#[test]
fn errors_name_the_culprits() {
    assert_eq!(dag(&[]), Err(DagError::Empty));
    assert_eq!(
        dag(&[("a", &[]), ("a", &[])]),
        Err(DagError::DuplicateStep { step: "a".into() })
    );
    assert_eq!(
        dag(&[("a", &[]), ("b", &["a", "zz"])]),
        Err(DagError::UnknownDependency {
            step: "b".into(),
            dependency: "zz".into()
        })
    );
    let err = dag(&[("a", &["c"]), ("b", &["a"]), ("c", &["b"]), ("d", &[])]).unwrap_err();
    assert_eq!(
        err,
        DagError::Cycle {
            path: vec!["a".into(), "c".into(), "b".into(), "a".into()]
        }
    );
    assert_eq!(err.to_string(), "dependency cycle: a -> c -> b -> a");
    assert_eq!(
        dag(&[("self", &["self"])]),
        Err(DagError::Cycle {
            path: vec!["self".into(), "self".into()]
        })
    );
    let steps: Vec<(String, Vec<String>)> = (0..11).map(|i| (format!("s{i}"), vec![])).collect();
    assert_eq!(
        Dag::build(&steps, 10),
        Err(DagError::TooManyNodes { count: 11, max: 10 })
    );
    assert!(Dag::build(&steps, 11).is_ok());
}

#[test]
fn a_long_cycle_is_named_by_its_ends_and_its_length_not_listed_whole() {
    let n = 10_000;
    let steps: Vec<(String, Vec<String>)> = (0..n)
        .map(|i| {
            (
                format!("step-{i:05}"),
                vec![format!("step-{:05}", (i + 1) % n)],
            )
        })
        .collect();
    let err = Dag::build(&steps, n).unwrap_err();
    let DagError::Cycle { path } = &err else {
        panic!("expected a cycle, got {err:?}")
    };
    assert_eq!(path.len(), n + 1, "the error keeps the whole cycle");
    let message = err.to_string();
    assert_eq!(
        message,
        "dependency cycle of 10000 steps: step-00000 -> step-00001 -> step-00002 -> step-00003 \
         -> step-00004 -> … (9990 more) … -> step-09995 -> step-09996 -> step-09997 -> \
         step-09998 -> step-09999 -> step-00000"
    );
    // Up to 12 steps are all shown.
    let twelve: Vec<(String, Vec<String>)> = (0..12)
        .map(|i| (format!("s{i:02}"), vec![format!("s{:02}", (i + 1) % 12)]))
        .collect();
    let shown = Dag::build(&twelve, 100).unwrap_err().to_string();
    assert_eq!(shown.matches(" -> ").count(), 12, "{shown}");
    assert!(!shown.contains('…'), "{shown}");
    let thirteen: Vec<(String, Vec<String>)> = (0..13)
        .map(|i| (format!("s{i:02}"), vec![format!("s{:02}", (i + 1) % 13)]))
        .collect();
    let cut = Dag::build(&thirteen, 100).unwrap_err().to_string();
    assert!(
        cut.contains("cycle of 13 steps") && cut.contains("(3 more)"),
        "{cut}"
    );
}

#[test]
fn topological_order_breaks_ties_by_name() {
    let d = dag(&[
        ("zeta", &[]),
        ("alpha", &["zeta"]),
        ("mid", &[]),
        ("beta", &[]),
    ])
    .unwrap();
    assert_eq!(
        names(&d, d.topological_order()),
        ["beta", "mid", "zeta", "alpha"]
    );
}

#[test]
fn a_graph_knows_its_size_its_edges_and_its_names() {
    let d = diamond();
    assert_eq!((d.len(), d.is_empty()), (4, false));
    let node = |n: &str| d.node(n).unwrap();
    assert_eq!(names(&d, d.dependencies(node("d"))), ["b", "c"]);
    assert!(d.dependencies(node("a")).is_empty());
    assert_eq!(names(&d, d.dependents(node("a"))), ["b", "c"]);
    assert_eq!(d.node("nope"), None);
    let declared: Vec<String> = d.nodes().map(|n| d.name(n).to_owned()).collect();
    assert_eq!(declared, ["d", "b", "c", "a"], "nodes in declaration order");
    assert_eq!(d.nodes().len(), 4);
}

#[test]
fn ready_set_follows_dependency_states() {
    let d = diamond();
    let a = d.node("a").unwrap();
    let b = d.node("b").unwrap();
    let ready = d.ready(|n| n != a, |n| n == a);
    assert_eq!(names(&d, &ready), ["b", "c"]);
    let ready = d.ready(|n| n != a && n != b, |n| n == a || n == b);
    assert_eq!(names(&d, &ready), ["c"]);
}

#[test]
fn downstream_closure_is_transitive_and_excludes_the_step() {
    let d = diamond();
    assert_eq!(
        names(&d, &d.downstream(d.node("a").unwrap())),
        ["b", "c", "d"]
    );
    assert_eq!(names(&d, &d.downstream(d.node("c").unwrap())), ["d"]);
    assert!(d.downstream(d.node("d").unwrap()).is_empty());
}

#[test]
fn diamond_compensates_d_then_b_and_c_then_a() {
    let d = diamond();
    let all: Vec<NodeId> = d.nodes().collect();
    let waves: Vec<Vec<String>> = d
        .compensation_plan(&all)
        .iter()
        .map(|w| names(&d, w))
        .collect();
    assert_eq!(waves, [vec!["d"], vec!["b", "c"], vec!["a"]]);
}

#[test]
fn compensation_order_goes_through_steps_outside_the_set() {
    // a <- b <- c: b has no compensation, but a still waits for c.
    let d = dag(&[("a", &[]), ("b", &["a"]), ("c", &["b"]), ("x", &[])]).unwrap();
    let set = [
        d.node("a").unwrap(),
        d.node("c").unwrap(),
        d.node("x").unwrap(),
    ];
    let waves: Vec<Vec<String>> = d
        .compensation_plan(&set)
        .iter()
        .map(|w| names(&d, w))
        .collect();
    assert_eq!(waves, [vec!["c", "x"], vec!["a"]]);
    assert!(d.compensation_plan(&[]).is_empty());
}

fn build(edges: &Edges) -> Result<Dag, DagError> {
    Dag::build(edges, 10_000)
}

/// True when `from` reaches `to` by following dependency edges.
fn depends_transitively(dag: &Dag, from: NodeId, to: NodeId) -> bool {
    dag.downstream(to).contains(&from)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, ..ProptestConfig::default() })]

    #[test]
    fn depends_on_is_the_downstream_closure_read_the_other_way(edges in arb_dag_edges(40)) {
        let d = build(&edges).unwrap();
        for a in d.nodes() {
            for b in d.nodes() {
                prop_assert_eq!(d.depends_on(a, b), depends_transitively(&d, a, b));
            }
        }
    }

    #[test]
    fn topological_order_respects_every_edge(edges in arb_dag_edges(40)) {
        let d = build(&edges).unwrap();
        let order = d.topological_order();
        prop_assert_eq!(order.len(), edges.len());
        for n in d.nodes() {
            for &dep in d.dependencies(n) {
                prop_assert!(d.rank(dep) < d.rank(n), "{} before {}", d.name(dep), d.name(n));
            }
        }
        // Same input, same order: nothing depends on hashing or addresses.
        let again = build(&edges).unwrap();
        prop_assert_eq!(again.topological_order(), order);
    }

    #[test]
    fn compensation_waves_respect_every_reverse_edge(
        edges in arb_dag_edges(40),
        pick in proptest::collection::vec(any::<bool>(), 40),
    ) {
        let d = build(&edges).unwrap();
        let set: Vec<NodeId> = d.nodes().filter(|n| pick[n.index()]).collect();
        let waves = d.compensation_plan(&set);
        let mut wave_of = vec![usize::MAX; d.len()];
        for (i, wave) in waves.iter().enumerate() {
            prop_assert!(!wave.is_empty());
            for &n in wave {
                prop_assert_eq!(wave_of[n.index()], usize::MAX, "{} planned twice", d.name(n));
                wave_of[n.index()] = i;
            }
        }
        for &a in &set {
            prop_assert!(wave_of[a.index()] != usize::MAX, "{} not planned", d.name(a));
            for &b in &set {
                if a != b && depends_transitively(&d, b, a) {
                    // b depends on a: b must be undone in an earlier wave.
                    prop_assert!(wave_of[b.index()] < wave_of[a.index()]);
                }
            }
        }
    }

    #[test]
    fn graphs_with_a_cycle_are_rejected_with_a_real_cycle(edges in arb_cyclic_graph(30)) {
        match build(&edges) {
            Err(DagError::Cycle { path }) => {
                prop_assert!(path.len() >= 2);
                prop_assert_eq!(path.first(), path.last());
                for pair in path.windows(2) {
                    let deps = &edges.iter().find(|(n, _)| *n == pair[0]).unwrap().1;
                    prop_assert!(deps.contains(&pair[1]), "{} does not depend on {}", pair[0], pair[1]);
                }
            }
            other => prop_assert!(false, "expected a cycle, got {:?}", other),
        }
    }
}
