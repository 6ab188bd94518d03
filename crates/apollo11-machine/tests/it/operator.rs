//! Operator actions on a whole run: pause, resume, rollback, and which ones a run allows.

use crate::decide::decide_at;
use crate::sim::{failing, Outcome, Sim};
use crate::{pinned, spec};
use apollo11_core::{Idempotency as I, OnFailure, StepName, WorkflowSpec};
use apollo11_machine::History;
use apollo11_machine::{
    allowed_actions, check_action, fold, pause_cause, Command, PauseCause, Policy, Refusal,
    RunAction, RunStatus,
};

fn start(step: &str, attempt: u32) -> Command {
    Command::Start {
        step: StepName::from(step),
        attempt,
    }
}

/// `a` and `b` in parallel, then `c`; every step has a compensation.
fn fork() -> WorkflowSpec {
    spec(
        OnFailure::Pause,
        &[
            ("a", &[], I::Keyed, true),
            ("b", &[], I::Keyed, true),
            ("c", &["a", "b"], I::Keyed, true),
        ],
    )
}

#[test]
fn a_paused_run_lets_running_attempts_finish_and_starts_nothing_new_until_resumed() {
    let mut sim = Sim::new(&fork(), |step, _| match step {
        "a" => Outcome::Ok(100),
        _ => Outcome::Ok(10),
    });
    assert_eq!(sim.decide(), [start("a", 1), start("b", 1)]);
    sim.run_until_started("b", 1);
    sim.operator(RunAction::Pause, "database maintenance");
    assert_eq!(sim.decide(), [], "nothing new, wait for a and b");
    assert_eq!(sim.run(), RunStatus::Paused);
    assert_eq!(
        sim.summary(),
        "a=succeeded#1 b=succeeded#1 c=pending#0",
        "running attempts finished and were recorded"
    );
    assert_eq!(
        pause_cause(sim.state(), sim.dag(), sim.policy()),
        Some(PauseCause::Operator {
            by: "operator".into(),
            reason: "database maintenance".into()
        })
    );
    sim.operator(RunAction::Resume, "maintenance over");
    assert_eq!(sim.decide(), [start("c", 1)]);
    assert_eq!(sim.run(), RunStatus::Succeeded);
}

#[test]
fn a_rollback_request_waits_for_running_attempts_then_undoes_in_reverse_order() {
    let w = spec(
        OnFailure::Pause,
        &[
            ("a", &[], I::Keyed, true),
            ("b", &["a"], I::Keyed, true),
            ("c", &["a"], I::Keyed, true),
            ("d", &["b", "c"], I::Keyed, true),
            ("e", &["d"], I::Keyed, false),
        ],
    );
    let mut sim = Sim::new(&w, |_, _| Outcome::Ok(10));
    sim.run_until_started("d", 1);
    sim.operator(RunAction::Rollback, "bad release");
    assert_eq!(sim.decide(), [], "d is running: wait for it");
    assert_eq!(sim.run(), RunStatus::RolledBack);
    assert_eq!(sim.steps_with("compensating"), ["d", "b", "c", "a"]);
    assert_eq!(
        sim.summary(),
        "a=compensated#1 b=compensated#1 c=compensated#1 d=compensated#1 e=pending#0"
    );
}

#[test]
fn a_pause_during_a_rollback_holds_its_next_wave() {
    let w = spec(
        OnFailure::Rollback,
        &[
            ("a", &[], I::Keyed, true),
            ("b", &["a"], I::Keyed, true),
            ("c", &["b"], I::Natural, false),
        ],
    );
    let mut sim = Sim::new(&w, failing("c", u32::MAX, false, 10));
    while sim.state().status("b") != apollo11_machine::StepStatus::Compensating {
        assert!(sim.round().is_none());
    }
    sim.operator(RunAction::Pause, "look first");
    assert_eq!(sim.run(), RunStatus::Paused);
    assert_eq!(sim.summary(), "a=succeeded#1 b=compensated#1 c=failed#1");
    sim.operator(RunAction::Resume, "go on");
    assert_eq!(sim.run(), RunStatus::RolledBack);
    assert_eq!(sim.steps_with("compensating"), ["b", "a"]);
}

#[test]
fn a_rollback_asked_under_an_operators_pause_waits_for_the_resume() {
    let w = fork();
    let h = History::new("r")
        .created("test", pinned(&w))
        .started("a")
        .succeeded("a", "A")
        .paused("alice", "hold")
        .rollback_requested("bob", "abandon this run");
    assert_eq!(
        decide_at(&w, &h, 0, &[]),
        [Command::Finish {
            status: RunStatus::Paused
        }]
    );
    let (allowed, _) = actions(&w, &h);
    assert_eq!(allowed, [RunAction::Resume], "the pause holds the rollback");
    let resumed = h.resumed("alice", "go");
    assert_eq!(
        decide_at(&w, &resumed, 0, &[]),
        [Command::Compensate {
            step: StepName::from("a"),
            attempt: 1
        }]
    );
}

#[test]
fn a_rollback_asked_while_the_last_step_runs_undoes_it_once_it_succeeds() {
    let w = spec(
        OnFailure::Pause,
        &[("a", &[], I::Keyed, true), ("last", &["a"], I::Keyed, true)],
    );
    let mut sim = Sim::new(&w, |_, _| Outcome::Ok(10));
    sim.run_until_started("last", 1);
    sim.operator(RunAction::Rollback, "abandon");
    assert_eq!(sim.run(), RunStatus::RolledBack, "never succeeded");
    assert_eq!(sim.steps_with("compensating"), ["last", "a"]);
    assert_eq!(sim.summary(), "a=compensated#1 last=compensated#1");
    let no_undo = spec(OnFailure::Pause, &[("only", &[], I::Keyed, false)]);
    let mut sim = Sim::new(&no_undo, |_, _| Outcome::Ok(10));
    sim.run_until_started("only", 1);
    sim.operator(RunAction::Rollback, "abandon");
    assert_eq!(
        sim.run(),
        RunStatus::RolledBack,
        "nothing to undo: rolled back, not succeeded"
    );
}

/// The actions `h`'s run allows, and why a refused one is refused.
fn actions(w: &WorkflowSpec, h: &History) -> (Vec<RunAction>, Vec<(RunAction, Refusal)>) {
    let (dag, policy) = Policy::compile(w, |_, f| f).unwrap();
    let state = fold(h.run_id(), h.events());
    let refused = RunAction::ALL
        .into_iter()
        .filter_map(|a| check_action(&state, &dag, &policy, a).err().map(|r| (a, r)))
        .collect();
    (allowed_actions(&state, &dag, &policy), refused)
}

#[test]
fn which_actions_a_run_allows_follows_its_state() {
    use RunAction::{Pause, Resume, Rollback};
    let w = fork();
    let mut rollback_w = fork();
    rollback_w.on_failure = OnFailure::Rollback;
    let created = History::new("r").created("test", pinned(&w));
    let running = created.clone().started("a");
    let (allowed, refused) = actions(&w, &running);
    assert_eq!(allowed, [Pause, Rollback]);
    assert_eq!(refused, [(Resume, Refusal::NotPaused)]);
    let paused = running.clone().paused("alice", "hold");
    let (allowed, refused) = actions(&w, &paused);
    assert_eq!(allowed, [Resume, Rollback]);
    assert_eq!(
        refused,
        [(Pause, Refusal::AlreadyPaused { by: "alice".into() })]
    );
    let rolling = running.clone().rollback_requested("bob", "undo");
    assert_eq!(actions(&w, &rolling).0, [Pause]);
    let failed = running.clone().failed("a", "no", false);
    assert_eq!(
        actions(&w, &failed).0,
        [Pause, Rollback],
        "paused for a failure: an operator may roll back instead"
    );
    let failed_after_b = created
        .clone()
        .started("b")
        .succeeded("b", "B")
        .started("a")
        .failed("a", "no", false);
    assert_eq!(
        actions(&rollback_w, &failed_after_b).1,
        [
            (Resume, Refusal::NotPaused),
            (Rollback, Refusal::AlreadyRollingBack)
        ]
    );
    let done = created
        .clone()
        .started("a")
        .succeeded("a", "A")
        .started("b")
        .succeeded("b", "B")
        .started("c")
        .succeeded("c", "C");
    let finished = Refusal::Finished {
        status: RunStatus::Succeeded,
    };
    assert_eq!(
        actions(&w, &done).1,
        [
            (Pause, finished.clone()),
            (Resume, finished.clone()),
            (Rollback, finished)
        ]
    );
    let rolled_back = created
        .clone()
        .started("a")
        .failed("a", "no", false)
        .rollback_requested("bob", "undo");
    assert_eq!(actions(&w, &rolled_back).0, []);
    assert_eq!(
        check_action(
            &fold(rolled_back.run_id(), rolled_back.events()),
            &Policy::compile(&w, |_, f| f).unwrap().0,
            &Policy::compile(&w, |_, f| f).unwrap().1,
            Pause
        ),
        Err(Refusal::Finished {
            status: RunStatus::RolledBack
        })
    );
    let anomalous = created.succeeded("a", "no start");
    assert_eq!(
        actions(&w, &anomalous).1,
        [
            (Pause, Refusal::Anomalous),
            (Resume, Refusal::Anomalous),
            (Rollback, Refusal::Anomalous)
        ]
    );
    assert_eq!(
        Refusal::AlreadyPaused { by: "alice".into() }.to_string(),
        "the run is already paused by alice"
    );
}

#[test]
fn a_pause_holds_a_step_that_became_ready_while_another_still_runs() {
    let w = spec(
        OnFailure::Pause,
        &[
            ("a", &[], I::Keyed, false),
            ("slow", &[], I::Keyed, false),
            ("c", &["a"], I::Keyed, false),
        ],
    );
    let mut sim = Sim::new(&w, |step, _| match step {
        "slow" => Outcome::Ok(1_000),
        _ => Outcome::Ok(10),
    });
    while sim.state().status("a") != apollo11_machine::StepStatus::Succeeded {
        assert!(sim.round().is_none());
    }
    assert_eq!(sim.decide(), [start("c", 1)], "c is ready");
    sim.operator(RunAction::Pause, "hold");
    assert_eq!(sim.decide(), [], "paused: c waits, slow finishes");
    assert_eq!(sim.run(), RunStatus::Paused);
    assert_eq!(sim.summary(), "a=succeeded#1 slow=succeeded#1 c=pending#0");
}

#[test]
fn a_compensation_out_of_tries_holds_the_rollback_while_another_compensation_runs() {
    let w = spec(
        OnFailure::Rollback,
        &[
            ("x", &[], I::Keyed, true),
            ("y", &[], I::Keyed, true),
            ("bad", &["x", "y"], I::Natural, false),
        ],
    );
    let mut sim =
        Sim::new(&w, failing("bad", u32::MAX, false, 10)).compensations(|step, _| match step {
            "x" => Outcome::Err {
                after_ms: 5,
                retryable: false,
            },
            _ => Outcome::Ok(1_000),
        });
    while sim.state().status("x") != apollo11_machine::StepStatus::CompensationFailed {
        assert!(sim.round().is_none());
    }
    assert_eq!(
        sim.state().status("y"),
        apollo11_machine::StepStatus::Compensating
    );
    assert_eq!(
        sim.decide(),
        [],
        "no new try of x, while y's compensation runs"
    );
    assert_eq!(sim.run(), RunStatus::Paused);
}

#[test]
fn a_run_machine_answers_for_the_state_it_holds() {
    use apollo11_machine::{EventId, RunMachine};
    let w = fork();
    let running = History::new("r").created("test", pinned(&w)).started("a");
    let paused = running.clone().succeeded("a", "A").paused("alice", "hold");
    let state = |h: &History| fold(h.run_id(), h.events());
    let mut machine = RunMachine::compile(&w, state(&running), |_, f| f).unwrap();
    assert_eq!(
        machine.allowed_actions(),
        [RunAction::Pause, RunAction::Rollback]
    );
    assert_eq!(
        machine.check_action(RunAction::Resume),
        Err(Refusal::NotPaused)
    );
    assert_eq!(machine.pause_cause(), None);
    machine.reset(state(&paused));
    assert_eq!(machine.state(), &state(&paused));
    assert_eq!(
        machine.allowed_actions(),
        [RunAction::Resume, RunAction::Rollback]
    );
    assert_eq!(
        machine.pause_cause(),
        Some(PauseCause::Operator {
            by: "alice".into(),
            reason: "hold".into()
        })
    );
    assert_eq!(machine.status(), RunStatus::Paused);
    assert_eq!(machine.state().last_event_id, EventId(4));
    machine.acknowledge(EventId(9));
    assert_eq!(machine.state().last_event_id, EventId(9));
    machine.acknowledge(EventId(5));
    assert_eq!(
        machine.state().last_event_id,
        EventId(9),
        "a watermark never goes back"
    );
}

#[test]
fn actions_statuses_and_reasons_have_their_names() {
    use apollo11_machine::FailReason;
    let actions: Vec<String> = RunAction::ALL.iter().map(|a| a.to_string()).collect();
    assert_eq!(actions, ["pause", "resume", "rollback"]);
    assert_eq!(RunAction::Rollback.name(), "rollback");
    let statuses = [
        RunStatus::Running,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::RolledBack,
        RunStatus::Paused,
    ];
    let names: Vec<String> = statuses.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        names,
        ["running", "succeeded", "failed", "rolled_back", "paused"]
    );
    for s in statuses {
        assert_eq!(s.name(), s.to_string());
        assert_eq!(
            serde_json::to_value(s).unwrap(),
            serde_json::Value::from(s.name())
        );
        assert_eq!(s.is_terminal(), s != RunStatus::Running);
    }
    assert_eq!(
        (
            FailReason::Timeout.to_string(),
            FailReason::Interrupted.to_string()
        ),
        ("timeout".to_owned(), "interrupted".to_owned())
    );
}
