//! The ops runbook's six declarations make the graph its 102 steps were written out as:
//! the same steps (by name, `drain[host-00]` for `drain-host-00`), the same commands and
//! policies, and the same order between them (the same edges, less those implied by others).
//! Its variant on workers is the same runbook, its host steps placed on their hosts' workers.
//! Here rather than in the shell crate: it reads the examples, which no package holds.

use apollo11_author::{Mode, Scope};
use apollo11_core::{StepSpec, WorkflowSpec};
use apollo11_shell::definition::{CWD, RUN};
use apollo11_shell::shell::{render, ON, QUEUE_TIMEOUT};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Edges `(dependency, step)` none of which another path implies.
fn reduced(spec: &WorkflowSpec, name: impl Fn(&str) -> String) -> BTreeSet<(String, String)> {
    let deps: BTreeMap<String, Vec<String>> = spec
        .steps
        .iter()
        .map(|s| {
            (
                name(&s.name),
                s.depends_on.iter().map(|d| name(d)).collect(),
            )
        })
        .collect();
    let reaches = |from: &str, to: &str, skip: &str| {
        let mut stack: Vec<&str> = deps[from]
            .iter()
            .map(String::as_str)
            .filter(|d| *d != skip)
            .collect();
        let mut seen = BTreeSet::new();
        while let Some(s) = stack.pop() {
            if s == to {
                return true;
            }
            if seen.insert(s) {
                stack.extend(deps[s].iter().map(String::as_str));
            }
        }
        false
    };
    deps.iter()
        .flat_map(|(step, ds)| ds.iter().map(move |d| (d.clone(), step.clone())))
        .filter(|(d, step)| !reaches(step, d, d))
        .collect()
}

/// A step's command as it runs (quotes aside), and its policies.
fn shape(step: &StepSpec) -> (String, String) {
    let origin = step.origin.as_ref();
    let scope = Scope {
        item: origin.map(|o| o.item.clone()),
        wave: origin.and_then(|o| o.wave),
        ..Scope::default()
    };
    let command = render(&step.attributes[RUN], &scope, Mode::Shell).unwrap();
    let policy = format!(
        "{:?} {} {:?} {:?}",
        step.idempotency, step.has_compensation, step.retry, step.timeout
    );
    (command.replace('\'', ""), policy)
}

#[test]
fn the_declarations_make_the_unrolled_graph() {
    let declared =
        apollo11_shell::load(&root().join("../../examples/ops-runbook/workflow.toml")).unwrap();
    let made = apollo11_author::instantiate(&declared, &BTreeMap::new()).unwrap();
    let fixture = root().join("../apollo11-shell/tests/it/fixtures/ops-runbook-unrolled.toml");
    let unrolled = apollo11_shell::load(&fixture).unwrap();
    let name = |n: &str| n.replace('[', "-").replace(']', "");
    assert_eq!(made.steps.len(), 102);
    assert_eq!(
        reduced(&made, name),
        reduced(&unrolled, |n: &str| n.to_owned())
    );
    let shapes = |spec: &WorkflowSpec,
                  rename: &dyn Fn(&str) -> String|
     -> BTreeMap<String, (String, String)> {
        spec.steps
            .iter()
            .map(|s| (rename(&s.name), shape(s)))
            .collect()
    };
    assert_eq!(
        shapes(&made, &name),
        shapes(&unrolled, &|n: &str| n.to_owned())
    );
    assert_eq!(
        (made.on_failure, made.max_concurrency),
        (unrolled.on_failure, unrolled.max_concurrency)
    );
}

#[test]
fn the_runbook_on_workers_is_the_runbook_with_its_host_steps_placed() {
    let load = |name: &str| {
        let file = root().join(format!("../../examples/{name}/workflow.toml"));
        apollo11_shell::load(&file).unwrap()
    };
    let (plain, placed) = (load("ops-runbook"), load("ops-runbook-workers"));
    let host_steps = ["drain", "upgrade", "undrain"];
    let placement = |step: &StepSpec| {
        let on = step.attributes.get(ON).map(String::as_str);
        assert_eq!(
            on,
            host_steps
                .contains(&step.name.as_str())
                .then_some(r#"{"host":"${item}"}"#),
            "{}",
            step.name
        );
        assert_eq!(step.attributes[CWD], "../ops-runbook");
        assert_eq!(step.attributes[QUEUE_TIMEOUT], "60000");
        let mut unplaced = step.clone();
        for key in [ON, CWD, QUEUE_TIMEOUT] {
            unplaced.attributes.remove(key);
        }
        unplaced
    };
    let unplaced: Vec<StepSpec> = placed.steps.iter().map(placement).collect();
    assert_eq!(unplaced, plain.steps);
    assert_eq!(
        (placed.on_failure, placed.max_concurrency),
        (plain.on_failure, plain.max_concurrency)
    );
}
