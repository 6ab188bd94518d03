use crate::spec::{closure, edges, for_each, list, list_param, spec, step, waves};
use apollo11_author::{grow, instantiate, output_items, readable_steps, AuthorError};
use apollo11_core::limits::FOR_EACH_ITEMS_MAX;
use apollo11_core::{ItemSource, Origin, Value, WorkflowSpec};
use serde_json::json;
use std::collections::BTreeMap;

fn none() -> BTreeMap<String, Value> {
    BTreeMap::new()
}

fn deps<'s>(spec: &'s WorkflowSpec, name: &str) -> Vec<&'s str> {
    let s = spec.steps.iter().find(|s| s.name == name).unwrap();
    s.depends_on.iter().map(String::as_str).collect()
}

fn names(spec: &WorkflowSpec) -> Vec<&str> {
    spec.steps.iter().map(|s| s.name.as_str()).collect()
}

/// The rolling upgrade of examples/ops-runbook, declared: 32 hosts, waves of 8, a gate.
fn runbook() -> WorkflowSpec {
    let hosts: Vec<Value> = (0..32).map(|i| json!(format!("host-{i:02}"))).collect();
    let hosts_param = || ItemSource::Param("hosts".into());
    let mut upgrade = for_each("upgrade", &["drain"], hosts_param());
    upgrade.has_compensation = true;
    let mut s = spec(vec![
        step("precheck", &[]),
        waves(
            for_each("drain", &["precheck"], hosts_param()),
            8,
            Some("gate"),
        ),
        upgrade,
        for_each("undrain", &["upgrade"], hosts_param()),
        step("gate", &["undrain"]),
        step("report", &["gate"]),
    ]);
    s.params = vec![list_param("hosts", Value::Array(hosts))];
    s
}

/// The rolling upgrade as it was written by hand before `for_each` (102 steps), named as
/// expansion names them (`drain-host-00` is `drain[host-00]`, `gate-wave-1` `gate[wave-1]`):
/// precheck; per host drain, upgrade, undrain; a gate after each wave's undrains, which the
/// next wave's drains wait for; a report after the last gate.
fn runbook_unrolled() -> BTreeMap<String, Vec<String>> {
    let mut graph = BTreeMap::from([("precheck".to_owned(), Vec::new())]);
    let host = |i: usize| format!("host-{i:02}");
    for wave in 1..=4 {
        let hosts: Vec<usize> = ((wave - 1) * 8..wave * 8).collect();
        for &i in &hosts {
            let before = match wave {
                1 => "precheck".to_owned(),
                w => format!("gate[wave-{}]", w - 1),
            };
            graph.insert(format!("drain[{}]", host(i)), vec![before]);
            graph.insert(
                format!("upgrade[{}]", host(i)),
                vec![format!("drain[{}]", host(i))],
            );
            graph.insert(
                format!("undrain[{}]", host(i)),
                vec![format!("upgrade[{}]", host(i))],
            );
        }
        let undrains = hosts.iter().map(|&i| format!("undrain[{}]", host(i)));
        graph.insert(format!("gate[wave-{wave}]"), undrains.collect());
    }
    graph.insert("report".to_owned(), vec!["gate[wave-4]".to_owned()]);
    graph
}

#[test]
fn the_runbook_expands_to_the_graph_written_by_hand() {
    let inst = instantiate(&runbook(), &none()).unwrap();
    assert_eq!(inst.steps.len(), 102);
    let written = runbook_unrolled();
    assert_eq!(written.len(), 102);
    let made = edges(&inst);
    assert_eq!(
        made.keys().collect::<Vec<_>>(),
        written.keys().collect::<Vec<_>>()
    );
    assert_eq!(closure(&made), closure(&written));
    assert_eq!(deps(&inst, "drain[host-08]"), ["precheck", "gate[wave-1]"]);
    assert_eq!(deps(&inst, "upgrade[host-08]"), ["drain[host-08]"]);
    assert_eq!(
        deps(&inst, "gate[wave-2]"),
        (8..16)
            .map(|i| format!("undrain[host-{i:02}]"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        deps(&inst, "report"),
        [
            "gate[wave-1]",
            "gate[wave-2]",
            "gate[wave-3]",
            "gate[wave-4]"
        ]
    );
    let upgrade = inst
        .steps
        .iter()
        .find(|s| s.name == "upgrade[host-21]")
        .unwrap();
    assert!(upgrade.has_compensation && upgrade.for_each.is_none());
    assert_eq!(
        upgrade.origin,
        Some(Origin {
            declaration: "upgrade".into(),
            item: json!("host-21"),
            key: "host-21".into(),
            wave: Some(3),
        })
    );
    let gate = inst
        .steps
        .iter()
        .find(|s| s.name == "gate[wave-4]")
        .unwrap();
    assert_eq!(gate.origin.as_ref().unwrap().wave, Some(4));
    assert_eq!(inst.arguments["hosts"].as_array().unwrap().len(), 32);
    assert_eq!(instantiate(&inst, &inst.arguments).unwrap(), inst);
}

#[test]
fn no_items_leave_the_order_around_them() {
    let given = BTreeMap::from([("hosts".to_owned(), json!([]))]);
    let inst = instantiate(&runbook(), &given).unwrap();
    assert_eq!(names(&inst), ["precheck", "report"]);
    assert_eq!(deps(&inst, "report"), ["precheck"]);
}

#[test]
fn waves_without_a_gate_wait_for_the_last_steps_paired() {
    let s = spec(vec![
        waves(for_each("a", &[], list(&["x", "y", "z"])), 2, None),
        for_each("b", &["a"], list(&["z", "y", "x"])),
        step("done", &["b"]),
    ]);
    let inst = instantiate(&s, &none()).unwrap();
    assert_eq!(
        names(&inst),
        ["a[x]", "a[y]", "a[z]", "b[z]", "b[y]", "b[x]", "done"]
    );
    assert_eq!(deps(&inst, "a[z]"), ["b[x]", "b[y]"]);
    assert_eq!(deps(&inst, "b[z]"), ["a[z]"]);
    assert_eq!(deps(&inst, "done"), ["b[z]", "b[y]", "b[x]"]);
    let waves: Vec<_> = inst
        .steps
        .iter()
        .map(|s| s.origin.as_ref().and_then(|o| o.wave))
        .collect();
    assert_eq!(
        waves,
        [Some(1), Some(1), Some(2), Some(2), Some(1), Some(1), None]
    );
}

#[test]
fn a_wave_waiting_on_its_own_fan_in_is_a_cycle() {
    let s = spec(vec![
        waves(for_each("a", &[], list(&["x", "y"])), 1, None),
        step("all", &["a"]),
        for_each("c", &["a", "all"], list(&["x", "y"])),
    ]);
    let e = instantiate(&s, &none()).unwrap_err();
    assert!(
        matches!(&e, AuthorError::Graph(apollo11_dag::DagError::Cycle { .. })),
        "{e}"
    );
}

#[test]
fn keys_come_from_a_field_the_item_or_its_position() {
    let mut keyed = for_each(
        "k",
        &[],
        ItemSource::List(vec![json!({"id": "a", "n": 1}), json!({"id": 7})]),
    );
    keyed.for_each.as_mut().unwrap().key = Some("id".into());
    let s = spec(vec![
        keyed,
        for_each("n", &[], ItemSource::List(vec![json!(3), json!(1.5)])),
        for_each(
            "p",
            &[],
            ItemSource::List(vec![json!({"x": 1}), json!([2])]),
        ),
        step("fan-out", &[]),
        for_each("f", &["fan-out"], list(&["q"])),
    ]);
    let inst = instantiate(&s, &none()).unwrap();
    assert_eq!(
        names(&inst),
        ["k[a]", "k[7]", "n[3]", "n[1.5]", "p[1]", "p[2]", "fan-out", "f[q]"]
    );
    assert_eq!(deps(&inst, "f[q]"), ["fan-out"]);
    assert_eq!(
        inst.steps[0].origin.as_ref().unwrap().item,
        json!({"id": "a", "n": 1})
    );
}

#[test]
fn bad_items_are_refused_naming_them() {
    let cases: Vec<(WorkflowSpec, &str)> = vec![
        (
            spec(vec![for_each("d", &[], list(&["a", "b", "a"]))]),
            "items 1 (\"a\") and 3 (\"a\") would both make step `d[a]`",
        ),
        (
            spec(vec![for_each("d", &[], list(&["ok", "../x"]))]),
            "step `d`: the step name `d[../x]` contains `/` or `\\`; names cannot be paths",
        ),
        (
            spec(vec![
                for_each("a", &[], list(&["x", "y"])),
                for_each("b", &["a"], list(&["x"])),
            ]),
            "step `b` depends on `a`, and both are for_each: their items pair by key, but \
             `a` has key `y` and `b` has not",
        ),
        (
            spec(vec![for_each("d", &[], ItemSource::Param("nope".into()))]),
            "step `d`: for_each over `params.nope`, which is not declared",
        ),
        (
            spec(vec![waves(for_each("d", &[], list(&["x"])), 1, Some("g"))]),
            "step `d`: gate `g` is not a step of the workflow",
        ),
        (
            spec(vec![
                waves(for_each("d", &[], list(&["x"])), 1, Some("g")),
                step("g", &[]),
            ]),
            "step `d`: gate `g` depends on no step of `d`'s items",
        ),
        (
            spec(vec![waves(for_each("d", &[], list(&["x"])), 0, None)]),
            "step `d`: a wave_size of 0 makes no wave",
        ),
        (
            spec(vec![
                step("s", &[]),
                waves(
                    for_each(
                        "d",
                        &["s"],
                        ItemSource::Output {
                            step: "s".into(),
                            path: String::new(),
                        },
                    ),
                    1,
                    Some("g"),
                ),
                step("g", &["d"]),
            ]),
            "step `d`: gate `g` is on a list known only at run time",
        ),
    ];
    for (s, text) in cases {
        assert_eq!(instantiate(&s, &none()).unwrap_err().to_string(), text);
    }
    let long = "g".repeat(195);
    let s = spec(vec![
        waves(for_each("d", &[], list(&["x"])), 1, Some(&long)),
        step(&long, &["d"]),
    ]);
    let e = instantiate(&s, &none()).unwrap_err();
    assert!(
        matches!(&e, AuthorError::BadName { step, .. } if *step == long),
        "{e}"
    );
    let mut s = spec(vec![for_each("d", &[], ItemSource::Param("n".into()))]);
    s.params = vec![list_param("n", json!(3))];
    s.params[0].kind = apollo11_core::ParamKind::Integer;
    assert_eq!(
        instantiate(&s, &none()).unwrap_err().to_string(),
        "step `d`: for_each over `params.n`, which is integer, not a list"
    );
}

#[test]
fn ten_thousand_items_expand_and_one_more_is_refused() {
    let max = FOR_EACH_ITEMS_MAX as usize;
    let items: Vec<Value> = (0..max).map(Value::from).collect();
    let mut s = spec(vec![
        waves(
            for_each("a", &[], ItemSource::Param("xs".into())),
            1_000,
            Some("g"),
        ),
        for_each("b", &["a"], ItemSource::Param("xs".into())),
        step("g", &["b"]),
        step("end", &["g", "b"]),
    ]);
    s.params = vec![list_param("xs", Value::Array(items.clone()))];
    let inst = instantiate(&s, &none()).unwrap();
    assert_eq!(inst.steps.len(), 2 * max + 10 + 1);
    assert_eq!(deps(&inst, "a[9999]"), ["g[wave-9]"]);
    assert_eq!(deps(&inst, "end").len(), 10 + max);
    let mut more = items;
    more.push(json!("one more"));
    let e = instantiate(&s, &BTreeMap::from([("xs".to_owned(), Value::Array(more))]));
    assert_eq!(
        e.unwrap_err(),
        AuthorError::TooManyItems {
            step: "a".into(),
            count: max + 1,
            max
        }
    );
}

fn with_template() -> WorkflowSpec {
    let source = ItemSource::Output {
        step: "discover".into(),
        path: "parts".into(),
    };
    instantiate(
        &spec(vec![
            step("discover", &[]),
            waves(for_each("load", &["discover"], source), 2, None),
            step("merge", &["load"]),
        ]),
        &none(),
    )
    .unwrap()
}

#[test]
fn a_template_grows_its_items_at_run_time() {
    let inst = with_template();
    assert_eq!(names(&inst), ["discover", "load", "merge"]);
    let grown = grow(&inst, "load", &[json!("p0"), json!("p1"), json!("p2")]).unwrap();
    assert_eq!(
        names(&grown),
        ["discover", "load", "load[p0]", "load[p1]", "load[p2]", "merge"]
    );
    assert_eq!(deps(&grown, "load[p0]"), ["load"]);
    assert_eq!(deps(&grown, "load[p2]"), ["load", "load[p0]", "load[p1]"]);
    assert_eq!(deps(&grown, "merge"), ["load[p0]", "load[p1]", "load[p2]"]);
    assert!(grown.steps[1].for_each.is_some());
    assert_eq!(grown.steps[4].origin.as_ref().unwrap().wave, Some(2));
    assert_eq!(
        grow(&grown, "load", &[]).unwrap_err().to_string(),
        "step `load` has already grown its steps"
    );
    assert_eq!(
        grow(&inst, "merge", &[]).unwrap_err().to_string(),
        "step `merge` is not a for_each over an output"
    );
    let empty = grow(&inst, "load", &[]).unwrap();
    assert_eq!(empty, inst);
}

#[test]
fn output_items_read_a_list_at_a_path() {
    let out = br#"{"parts": ["a", "b"], "n": 2}"#;
    assert_eq!(
        output_items("load", "discover", "parts", out).unwrap(),
        [json!("a"), json!("b")]
    );
    assert_eq!(
        output_items("load", "discover", "n", out)
            .unwrap_err()
            .to_string(),
        "step `load`: for_each over `steps.discover.output.n`, which is integer, not a list"
    );
    assert_eq!(
        output_items("load", "discover", "rows", out)
            .unwrap_err()
            .to_string(),
        "step `load`: for_each: `steps.discover.output.rows` has no field `rows`"
    );
    assert!(output_items("load", "discover", "", b"[1, 2]").is_ok());
}

#[test]
fn a_made_step_reads_its_paired_upstream_by_declaration() {
    let inst = instantiate(&runbook(), &none()).unwrap();
    let readable = readable_steps(&inst, "undrain[host-09]").unwrap();
    assert_eq!(readable["upgrade"], "upgrade[host-09]");
    assert_eq!(readable["drain"], "drain[host-09]");
    assert_eq!(readable["precheck"], "precheck");
    assert_eq!(readable["undrain[host-00]"], "undrain[host-00]");
    assert_eq!(readable["gate[wave-1]"], "gate[wave-1]");
    assert!(!readable.contains_key("undrain[host-09]"));
    assert!(!readable.contains_key("drain[host-10]"));
    assert!(!readable.contains_key("undrain"));
    let report = readable_steps(&inst, "report").unwrap();
    assert_eq!(report.len(), 101);
    assert!(!report.contains_key("drain"));
    assert_eq!(
        readable_steps(&inst, "nope").unwrap_err(),
        AuthorError::UnknownStep {
            step: "nope".into()
        }
    );
}
