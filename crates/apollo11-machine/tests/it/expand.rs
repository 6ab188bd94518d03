//! Run-time expansion: a template step starts like any step and ends with `Expanded`, the
//! run records the expansion, and a machine given the grown definition schedules and rolls
//! back the items like any steps.

use crate::{pinned, spec};
use apollo11_core::{
    ForEach, Idempotency as I, ItemSource, OnFailure, Origin, OverrideTarget, Seq, StepName,
    StepSpec, Value, WorkflowSpec,
};
use apollo11_machine::{fold, Command, Expansion, History, Now, RunMachine, RunStatus, StepStatus};
use std::collections::BTreeSet;

/// discover → shards (a template over discover's `shards`) → report.
fn template() -> WorkflowSpec {
    let mut w = spec(
        OnFailure::Rollback,
        &[
            ("discover", &[], I::Natural, true),
            ("shards", &["discover"], I::Natural, false),
            ("report", &["shards"], I::Natural, false),
        ],
    );
    w.steps[1].for_each = Some(ForEach {
        items: ItemSource::Output {
            step: "discover".into(),
            path: "shards".into(),
        },
        wave_size: None,
        gate: None,
        key: None,
    });
    w
}

/// `template()` grown by `shards[a]` and `shards[b]` (each with a compensation, after the
/// template), `report` rewired to wait for both: what the author crate's `grow` makes.
fn grown() -> WorkflowSpec {
    let mut w = template();
    for key in ["a", "b"] {
        w.steps.push(StepSpec {
            has_compensation: true,
            origin: Some(Origin {
                declaration: "shards".into(),
                item: Value::from(key),
                key: key.into(),
                wave: None,
            }),
            ..StepSpec::new(&format!("shards[{key}]"), &["shards"], I::Natural)
        });
    }
    w.steps[2].depends_on = vec!["shards[a]".into(), "shards[b]".into()];
    w
}

/// Folds the events of `h` that `m` has not seen yet.
fn catch_up(m: &mut RunMachine, h: &History) {
    let seen = m.state().last_seq.0 as usize;
    for event in &h.events()[seen..] {
        m.apply(event);
    }
}

fn decide(m: &RunMachine, executing: &[&str]) -> Vec<Command> {
    let executing: BTreeSet<StepName> = executing.iter().map(|s| StepName::from(*s)).collect();
    m.decide(Now {
        ms: 1_000_000,
        executing: &executing,
    })
}

fn start(step: &str) -> Command {
    Command::Start {
        step: StepName::from(step),
        attempt: 1,
    }
}

fn compensate(step: &str) -> Command {
    Command::Compensate {
        step: StepName::from(step),
        attempt: 1,
    }
}

/// The run up to the expansion of `shards` into `a` and `b`, folded by a machine of the
/// declared (not yet grown) definition.
fn expanded() -> (RunMachine, History) {
    let w = template();
    let h = History::new("run-x")
        .created("test", pinned(&w))
        .started("discover")
        .succeeded("discover", r#"{"shards": ["a", "b"]}"#);
    let mut m = RunMachine::compile(&w, fold(h.run_id(), h.events()), |_, f| f).unwrap();
    assert_eq!(
        decide(&m, &[]),
        [start("shards")],
        "a template starts as any step"
    );
    let h = h.started("shards").expanded("shards", &["a", "b"]);
    catch_up(&mut m, &h);
    (m, h)
}

#[test]
fn an_expansion_ends_the_template_as_a_success_and_is_recorded_in_order() {
    let (m, _) = expanded();
    let shards = m.state().step("shards");
    assert_eq!(shards.status, StepStatus::Succeeded);
    assert_eq!(shards.payload_seq, Some(Seq(5)), "the items are the output");
    assert_eq!(
        m.state().expansions,
        [Expansion {
            step: StepName::from("shards"),
            seq: Seq(5),
            items: 2,
        }]
    );
    // Before the machine knows the grown graph, the template is a success for `report`.
    assert_eq!(decide(&m, &[]), [start("report")]);
}

#[test]
fn a_grown_graph_schedules_the_items_and_equals_a_machine_compiled_from_it() {
    let (mut m, _) = expanded();
    m.regraph(&grown(), |_, f| f).unwrap();
    let fresh = RunMachine::compile(&grown(), m.state().clone(), |_, f| f).unwrap();
    assert_eq!(m, fresh);
    assert_eq!(decide(&m, &[]), [start("shards[a]"), start("shards[b]")]);
}

#[test]
fn a_definition_that_does_not_compile_leaves_the_machine_as_it_was() {
    let (mut m, _) = expanded();
    let before = m.clone();
    let mut bad = grown();
    bad.steps[3].depends_on = vec!["report".into()];
    bad.steps[2].depends_on = vec!["shards[a]".into()];
    assert!(m.regraph(&bad, |_, f| f).is_err(), "a cycle");
    assert_eq!(m, before);
}

#[test]
fn a_rollback_compensates_the_expanded_steps_in_reverse_topological_order() {
    let (mut m, h) = expanded();
    m.regraph(&grown(), |_, f| f).unwrap();
    let h = h
        .started("shards[a]")
        .started("shards[b]")
        .succeeded("shards[a]", "1")
        .succeeded("shards[b]", "2")
        .started("report")
        .failed("report", "boom", false);
    catch_up(&mut m, &h);
    assert_eq!(
        decide(&m, &[]),
        [compensate("shards[a]"), compensate("shards[b]")],
        "the items first, the template has nothing to undo"
    );
    let h = h
        .compensating("shards[a]")
        .compensating("shards[b]")
        .compensated("shards[a]")
        .compensated("shards[b]");
    catch_up(&mut m, &h);
    assert_eq!(decide(&m, &[]), [compensate("discover")]);
    let h = h.compensating("discover").compensated("discover");
    catch_up(&mut m, &h);
    assert_eq!(m.status(), RunStatus::RolledBack);
}

#[test]
fn a_template_that_expanded_is_not_undone_nor_started_again_once_the_rollback_is_called_off() {
    // The template carries the compensation its items run: it has none of its own to run.
    let undoable = |mut w: WorkflowSpec| {
        w.steps[1].has_compensation = true;
        w
    };
    let h = History::new("run-x")
        .created("test", pinned(&undoable(template())))
        .started("discover")
        .succeeded("discover", r#"{"shards": ["a", "b"]}"#)
        .started("shards")
        .expanded("shards", &["a", "b"]);
    let mut m = RunMachine::compile(
        &undoable(template()),
        fold(h.run_id(), h.events()),
        |_, f| f,
    )
    .unwrap();
    m.regraph(&undoable(grown()), |_, f| f).unwrap();
    let h = h
        .started("shards[a]")
        .started("shards[b]")
        .succeeded("shards[a]", "1")
        .failed("shards[b]", "boom", false);
    catch_up(&mut m, &h);
    assert_eq!(decide(&m, &[]), [compensate("shards[a]")]);
    let h = h.compensating("shards[a]").compensated("shards[a]");
    catch_up(&mut m, &h);
    assert_eq!(
        decide(&m, &[]),
        [compensate("discover")],
        "the template is passed over"
    );
    // An override clears the failure: the rollback of `on_failure` is called off, and what it
    // undid runs again; the template, which expanded, stays as it was.
    let h = h.overridden("shards[b]", OverrideTarget::Succeeded, "op", "done by hand");
    catch_up(&mut m, &h);
    assert_eq!(m.state().step("shards").status, StepStatus::Succeeded);
    assert_eq!(
        decide(&m, &[]),
        [Command::Start {
            step: StepName::from("shards[a]"),
            attempt: 2
        }]
    );
}
