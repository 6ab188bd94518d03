//! The table of operator actions (docs/operator-actions.md): pause, resume, rollback and each
//! override target, in every kind of run state. Each cell is checked twice: the answer
//! (accepted, or refused with its reason), and, when accepted, the promise it makes, kept when
//! the run is driven on (an operator's pause lifted whenever it is the only thing in the way).

use crate::sim::{failing, Outcome, Sim};
use crate::spec;
use apollo11_core::{EventKind, Idempotency as I, OnFailure, OverrideTarget, WorkflowSpec};
use apollo11_machine::{
    check_override, OverrideEffect as E, PauseCause, Refusal, RunAction, RunStatus, StepStatus,
};
use std::cell::Cell;

/// `a` and `b` in parallel, then `c`; every step has a compensation.
fn fork(on_failure: OnFailure) -> WorkflowSpec {
    spec(
        on_failure,
        &[
            ("a", &[], I::Keyed, true),
            ("b", &[], I::Keyed, true),
            ("c", &["a", "b"], I::Keyed, true),
        ],
    )
}

/// A run of `fork` where `a` takes 100 ms, the rest 10 ms, and `c` fails for good when
/// `c_fails`.
fn sim(on_failure: OnFailure, c_fails: bool) -> Sim {
    Sim::new(&fork(on_failure), move |step, attempt| match step {
        "a" => Outcome::Ok(100),
        "c" if c_fails => failing("c", u32::MAX, false, 10)(step, attempt),
        _ => Outcome::Ok(10),
    })
}

fn until(sim: &mut Sim, step: &str, status: StepStatus) {
    while sim.state().status(step) != status {
        assert!(
            sim.round().is_none(),
            "the run ended before {step} was {status}"
        );
    }
}

/// Every kind of run state, by name, built by driving a run there.
fn build(name: &str) -> Sim {
    let mut s = match name {
        "running" | "pausing" | "paused" | "paused, then rollback asked" => {
            sim(OnFailure::Pause, false)
        }
        "paused for a failure" => sim(OnFailure::Pause, true),
        "rolling back (on_failure)" | "rolling back, paused" | "compensation failed" => {
            sim(OnFailure::Rollback, true)
        }
        "rolling back (operator)" | "succeeded" | "rolled back" | "failed (anomalous)" => {
            sim(OnFailure::Pause, false)
        }
        other => panic!("no run state {other}"),
    };
    match name {
        "running" => s.run_until_started("a", 1),
        "pausing" | "paused" | "paused, then rollback asked" => {
            s.run_until_started("a", 1);
            s.operator(RunAction::Pause, "hold");
            if name != "pausing" {
                assert_eq!(s.run(), RunStatus::Paused);
            }
            if name == "paused, then rollback asked" {
                s.operator(RunAction::Rollback, "abandon");
            }
        }
        "paused for a failure" => assert_eq!(s.run(), RunStatus::Paused),
        "rolling back (on_failure)" | "rolling back, paused" => {
            s = s.compensations(|step, _| Outcome::Ok(if step == "a" { 100 } else { 5 }));
            until(&mut s, "b", StepStatus::Compensated);
            if name == "rolling back, paused" {
                s.operator(RunAction::Pause, "look first");
            }
        }
        "compensation failed" => {
            // `a`'s compensation fails for good once, then works.
            let calls = Cell::new(0);
            s = s.compensations(move |step, _| {
                calls.set(calls.get() + u32::from(step == "a"));
                if step == "a" && calls.get() == 1 {
                    Outcome::Err {
                        after_ms: 5,
                        retryable: false,
                    }
                } else {
                    Outcome::Ok(5)
                }
            });
            assert_eq!(s.run(), RunStatus::Paused);
        }
        "rolling back (operator)" => {
            s.run_until_started("c", 1);
            s.operator(RunAction::Rollback, "abandon");
        }
        "succeeded" => assert_eq!(s.run(), RunStatus::Succeeded),
        "rolled back" => {
            s.run_until_started("c", 1);
            s.operator(RunAction::Rollback, "abandon");
            assert_eq!(s.run(), RunStatus::RolledBack);
        }
        "failed (anomalous)" => {
            s.run_until_started("a", 1);
            s.inject("c", EventKind::Succeeded);
        }
        _ => unreachable!(),
    }
    s
}

type Answer = Result<(), Refusal>;

/// One row: a run state, the answer to pause, resume and rollback, and for a step, the effect
/// of each override target (succeeded, skipped, pending, failed) or the refusal of all four.
struct Row {
    state: &'static str,
    status: RunStatus,
    actions: [Answer; 3],
    step: &'static str,
    overrides: Result<[E; 4], Refusal>,
}

fn rows() -> Vec<Row> {
    use Refusal::{AlreadyPaused, AlreadyRollingBack, Anomalous, Finished, NotPaused};
    let by = || AlreadyPaused {
        by: "operator".into(),
    };
    let forward = Ok([E::Done, E::Done, E::Rerun, E::Pause]);
    let finished = |status| Finished { status };
    vec![
        Row {
            state: "running",
            status: RunStatus::Running,
            actions: [Ok(()), Err(NotPaused), Ok(())],
            step: "a",
            overrides: forward.clone(),
        },
        Row {
            state: "pausing",
            status: RunStatus::Running,
            actions: [Err(by()), Ok(()), Ok(())],
            step: "a",
            overrides: forward.clone(),
        },
        Row {
            state: "paused",
            status: RunStatus::Paused,
            actions: [Err(by()), Ok(()), Ok(())],
            step: "a",
            overrides: forward.clone(),
        },
        Row {
            state: "paused, then rollback asked",
            status: RunStatus::Paused,
            actions: [Err(by()), Ok(()), Err(AlreadyRollingBack)],
            step: "a",
            overrides: Ok([E::Compensate, E::LeftAsIs, E::LeftAsIs, E::LeftAsIs]),
        },
        Row {
            state: "paused for a failure",
            status: RunStatus::Paused,
            actions: [Ok(()), Err(NotPaused), Ok(())],
            step: "c",
            overrides: forward,
        },
        Row {
            state: "rolling back (on_failure)",
            status: RunStatus::Running,
            actions: [Ok(()), Err(NotPaused), Err(AlreadyRollingBack)],
            step: "c",
            overrides: Ok([
                E::EndsRollback,
                E::EndsRollback,
                E::EndsRollback,
                E::LeftAsIs,
            ]),
        },
        Row {
            state: "rolling back, paused",
            status: RunStatus::Running,
            actions: [Err(by()), Ok(()), Err(AlreadyRollingBack)],
            step: "b",
            overrides: Ok([E::Compensate, E::LeftAsIs, E::LeftAsIs, E::LeftAsIs]),
        },
        Row {
            state: "rolling back (operator)",
            status: RunStatus::Running,
            actions: [Ok(()), Err(NotPaused), Err(AlreadyRollingBack)],
            step: "c",
            overrides: Ok([E::Compensate, E::LeftAsIs, E::LeftAsIs, E::LeftAsIs]),
        },
        Row {
            state: "compensation failed",
            status: RunStatus::Paused,
            actions: [Ok(()), Err(NotPaused), Err(AlreadyRollingBack)],
            step: "a",
            overrides: Ok([E::Compensate, E::LeftAsIs, E::LeftAsIs, E::LeftAsIs]),
        },
        Row {
            state: "failed (anomalous)",
            status: RunStatus::Running,
            actions: [Err(Anomalous), Err(Anomalous), Err(Anomalous)],
            step: "c",
            overrides: Ok([E::Done, E::Done, E::Rerun, E::Pause]),
        },
        Row {
            state: "succeeded",
            status: RunStatus::Succeeded,
            actions: [0, 1, 2].map(|_| Err(finished(RunStatus::Succeeded))),
            step: "c",
            overrides: Err(finished(RunStatus::Succeeded)),
        },
        Row {
            state: "rolled back",
            status: RunStatus::RolledBack,
            actions: [0, 1, 2].map(|_| Err(finished(RunStatus::RolledBack))),
            step: "c",
            overrides: Err(finished(RunStatus::RolledBack)),
        },
    ]
}

#[test]
fn every_action_in_every_run_state_is_answered_as_the_table_says() {
    for row in rows() {
        let s = build(row.state);
        let at = row.state;
        assert_eq!(s.machine.status(), row.status, "{at}: status");
        for (action, expected) in RunAction::ALL.into_iter().zip(&row.actions) {
            assert_eq!(&s.machine.check_action(action), expected, "{at}: {action}");
        }
        let effects = s.machine.override_choices(row.step).map(|choices| {
            let effects: Vec<E> = choices.into_iter().map(|(_, e)| e).collect();
            <[E; 4]>::try_from(effects).unwrap()
        });
        assert_eq!(effects, row.overrides, "{at}: overrides of {}", row.step);
        let one_by_one: Result<Vec<E>, Refusal> = OverrideTarget::ALL
            .into_iter()
            .map(|to| check_override(s.state(), s.dag(), s.policy(), row.step, to))
            .collect();
        assert_eq!(
            one_by_one.map(|e| <[E; 4]>::try_from(e).unwrap()),
            row.overrides,
            "{at}: check_override agrees"
        );
    }
}

#[test]
fn every_accepted_action_keeps_its_promise_when_the_run_goes_on() {
    for row in rows() {
        for (action, answer) in RunAction::ALL.into_iter().zip(&row.actions) {
            if answer.is_ok() {
                let mut s = build(row.state);
                s.operator(action, "table");
                let from = s.events.len();
                let status = drive_on(&mut s, action != RunAction::Pause);
                action_kept(&s, from, action, status, row.state);
            }
        }
        let Ok(effects) = &row.overrides else {
            continue;
        };
        for (to, effect) in OverrideTarget::ALL.into_iter().zip(effects) {
            let mut s = build(row.state);
            s.override_step(row.step, to, "table");
            let from = s.events.len();
            let status = drive_on(&mut s, true);
            let at = format!("{}: {} to {to:?} ({effect:?})", row.state, row.step);
            override_kept(&s, from, row.step, *effect, status, &at);
        }
    }
}

/// Every step of every row, in whatever state the row leaves it, and a step skipped by an
/// operator: an override is accepted in every step state, unless the run is finished.
#[test]
fn an_override_is_answered_by_the_run_state_whatever_the_step_state() {
    let mut skipped = build("running");
    skipped.override_step("b", OverrideTarget::Skipped, "not needed");
    let runs = rows().into_iter().map(|row| (row.state, build(row.state)));
    let mut seen = std::collections::BTreeSet::new();
    for (at, s) in runs.chain([("running, b skipped", skipped)]) {
        let status = s.machine.status();
        for step in ["a", "b", "c"] {
            let state = s.state().status(step);
            seen.insert(state);
            for to in OverrideTarget::ALL {
                let answer = check_override(s.state(), s.dag(), s.policy(), step, to);
                match answer {
                    Err(refusal) => assert_eq!(
                        (refusal, status.is_finished()),
                        (Refusal::Finished { status }, true),
                        "{at}: {step} ({state}) to {to:?}"
                    ),
                    Ok(_) => assert!(!status.is_finished(), "{at}: {step} ({state}) to {to:?}"),
                }
            }
        }
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        StepStatus::ALL,
        "every step state met"
    );
}

#[test]
fn an_override_on_a_finished_run_is_refused_and_an_unknown_step_named() {
    let s = build("rolled back");
    assert_eq!(
        check_override(s.state(), s.dag(), s.policy(), "c", OverrideTarget::Pending),
        Err(Refusal::Finished {
            status: RunStatus::RolledBack
        })
    );
    let s = build("running");
    let unknown = check_override(
        s.state(),
        s.dag(),
        s.policy(),
        "zz",
        OverrideTarget::Pending,
    );
    assert_eq!(
        unknown.unwrap_err().to_string(),
        "the workflow has no step `zz`"
    );
}

/// Runs to the end; an operator's pause in the way is lifted when `resume` says so.
fn drive_on(s: &mut Sim, resume: bool) -> RunStatus {
    loop {
        let status = s.run();
        let by_operator = matches!(s.machine.pause_cause(), Some(PauseCause::Operator { .. }));
        if !(resume && by_operator) {
            return status;
        }
        s.operator(RunAction::Resume, "go on");
    }
}

/// Steps named by events of `kind` from the `from`th event on.
fn after(s: &Sim, from: usize, kind: &str) -> Vec<String> {
    s.events[from..]
        .iter()
        .filter(|e| e.kind.name() == kind)
        .filter_map(|e| e.step.as_ref().map(|n| n.to_string()))
        .collect()
}

fn action_kept(s: &Sim, from: usize, action: RunAction, status: RunStatus, at: &str) {
    let started = after(s, from, "started");
    match action {
        RunAction::Pause => {
            assert!(
                started.is_empty(),
                "{at}: started {started:?} under a pause"
            );
            let undo = after(s, from, "compensating");
            assert!(undo.is_empty(), "{at}: compensated {undo:?} under a pause");
            assert!(
                matches!(status, RunStatus::Paused | RunStatus::RolledBack),
                "{at}: {status} after a pause"
            );
        }
        RunAction::Resume => assert_ne!(
            s.machine
                .pause_cause()
                .map(|c| matches!(c, PauseCause::Operator { .. })),
            Some(true),
            "{at}: still paused by an operator after a resume"
        ),
        RunAction::Rollback => {
            assert!(
                started.is_empty(),
                "{at}: started {started:?} in a rollback"
            );
            assert_eq!(status, RunStatus::RolledBack, "{at}: after a rollback");
        }
    }
}

fn override_kept(s: &Sim, from: usize, step: &str, effect: E, status: RunStatus, at: &str) {
    let mine = |kind| after(s, from, kind).contains(&step.to_owned());
    match effect {
        E::Rerun => assert!(mine("started"), "{at}: not run again"),
        E::Done => {
            assert!(!mine("started") && !mine("compensating"), "{at}: touched");
            assert!(s.state().status(step).satisfies_dependents(), "{at}");
        }
        E::Pause => assert_eq!(
            s.machine.pause_cause(),
            Some(PauseCause::StepFailed { step: step.into() }),
            "{at}"
        ),
        E::RollBack => {
            assert_eq!(status, RunStatus::RolledBack, "{at}");
            assert!(after(s, from, "started").is_empty(), "{at}: started work");
        }
        E::Compensate => {
            assert!(mine("compensating"), "{at}: not compensated");
            assert_eq!(status, RunStatus::RolledBack, "{at}");
        }
        E::LeftAsIs => {
            assert!(!mine("compensating") && !mine("started"), "{at}: touched");
            assert_eq!(status, RunStatus::RolledBack, "{at}");
        }
        E::EndsRollback => {
            assert!(
                !after(s, from, "started").is_empty(),
                "{at}: nothing started"
            );
        }
    }
}
