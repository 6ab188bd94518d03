//! `decide` with an explicit clock: every scheduling rule of docs/ARCHITECTURE.md.

use crate::sim::{failing, Outcome, Sim};
use crate::{pinned, spec};
use apollo11_core::{
    Backoff, Idempotency as I, OnFailure, OverrideTarget, RetryPolicy, StepName, Timeout,
    WorkflowSpec,
};
use apollo11_dag::strategies::arb_dag_edges;
use apollo11_machine::strategies::arb_trigger_rule;
use apollo11_machine::History;
use apollo11_machine::{
    check_action, decide, pause_cause, retry_delay_ms, Command, FailReason, Now, PauseCause,
    Policy, RunAction, RunStatus,
};
use proptest::prelude::*;
use std::collections::BTreeSet;

fn start(step: &str, attempt: u32) -> Command {
    Command::Start {
        step: StepName::from(step),
        attempt,
    }
}

#[test]
fn ready_steps_start_in_parallel_up_to_the_concurrency_limit() {
    let mut w = spec(
        OnFailure::Pause,
        &[
            ("e", &[], I::Natural, false),
            ("d", &[], I::Natural, false),
            ("c", &[], I::Natural, false),
            ("b", &[], I::Natural, false),
            ("a", &[], I::Natural, false),
            ("z", &["a"], I::Natural, false),
        ],
    );
    w.max_concurrency = 2;
    let mut sim = Sim::new(&w, |_, _| Outcome::Ok(100));
    assert_eq!(
        sim.decide(),
        [start("a", 1), start("b", 1)],
        "ties broken by name, two slots"
    );
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(sim.peak_running, 2);
    assert_eq!(sim.steps_with("started"), ["a", "b", "c", "d", "e", "z"]);
}

/// What `decide` says at `ms` for the run `h` holds, with nothing executing.
pub fn decide_at(w: &WorkflowSpec, h: &History, ms: u64, executing: &[&str]) -> Vec<Command> {
    let (dag, policy) = Policy::compile(w, |_, f| f).unwrap();
    let state = apollo11_machine::fold(h.run_id(), h.events());
    let executing = executing.iter().map(|s| StepName::from(*s)).collect();
    decide(
        &state,
        &dag,
        &policy,
        Now {
            ms,
            executing: &executing,
        },
    )
}

#[test]
fn a_failed_step_is_retried_after_its_backoff() {
    let mut w = spec(OnFailure::Pause, &[("a", &[], I::Natural, false)]);
    w.steps[0].retry = RetryPolicy {
        max_attempts: 3,
        backoff: Backoff::Exponential,
        initial_ms: 1_000,
        max_ms: 60_000,
        jitter_pct: 0,
        ..RetryPolicy::default()
    };
    let mut h = History::new("r").created("test", pinned(&w));
    // (attempt, started at, failed at, next attempt due): 1 s, then 2 s after each failure.
    for (attempt, started, failed, due) in
        [(1, 10_000, 10_500, 11_500), (2, 11_500, 11_600, 13_600)]
    {
        h = h
            .at(started)
            .started("a")
            .at(failed)
            .failed("a", "boom", true);
        let waiting = decide_at(&w, &h, failed + 100, &[]);
        assert_eq!(
            waiting,
            [Command::WakeAt { ms: due }],
            "after attempt {attempt}"
        );
        assert_eq!(decide_at(&w, &h, due, &[]), [start("a", attempt + 1)]);
    }
    let h = h
        .at(13_600)
        .started("a")
        .at(13_700)
        .failed("a", "boom", true);
    assert_eq!(
        decide_at(&w, &h, 99_999, &[]),
        [Command::Finish {
            status: RunStatus::Paused
        }],
        "no attempt left"
    );
}

#[test]
fn backoff_is_capped_and_jitter_is_deterministic_and_bounded() {
    let p = RetryPolicy {
        max_attempts: 10,
        backoff: Backoff::Exponential,
        initial_ms: 1_000,
        max_ms: 5_000,
        jitter_pct: 0,
        ..RetryPolicy::default()
    };
    let plain: Vec<u64> = (1..=5).map(|a| retry_delay_ms(&p, "r", "s", a)).collect();
    assert_eq!(plain, [1_000, 2_000, 4_000, 5_000, 5_000]);
    let fixed = RetryPolicy {
        backoff: Backoff::Fixed,
        ..p.clone()
    };
    assert_eq!(retry_delay_ms(&fixed, "r", "s", 7), 1_000);
    let jittered = RetryPolicy {
        jitter_pct: 50,
        ..p
    };
    let delays: Vec<u64> = (0..50)
        .map(|i| retry_delay_ms(&jittered, &format!("run-{i}"), "s", 3))
        .collect();
    assert!(
        delays.iter().all(|&d| (2_000..=4_000).contains(&d)),
        "{delays:?}"
    );
    assert!(
        delays.iter().collect::<BTreeSet<_>>().len() > 10,
        "jitter spreads runs apart"
    );
    let again: Vec<u64> = (0..50)
        .map(|i| retry_delay_ms(&jittered, &format!("run-{i}"), "s", 3))
        .collect();
    assert_eq!(delays, again);
}

#[test]
fn an_attempt_past_its_timeout_is_failed_and_retried() {
    let mut w = spec(OnFailure::Pause, &[("a", &[], I::Natural, false)]);
    w.steps[0].timeout = Timeout::Fixed(500);
    w.steps[0].retry.initial_ms = 100;
    let mut sim = Sim::new(&w, |_, attempt| {
        if attempt == 1 {
            Outcome::Hang
        } else {
            Outcome::Ok(10)
        }
    });
    assert_eq!(sim.decide(), [start("a", 1)]);
    sim.run_until_started("a", 1);
    assert_eq!(
        sim.decide(),
        [Command::WakeAt { ms: 1_500 }],
        "wake at the deadline"
    );
    assert_eq!(sim.run(), RunStatus::Succeeded);
    let failed = sim
        .events
        .iter()
        .find(|e| e.kind.name() == "failed")
        .unwrap();
    assert_eq!(
        (failed.at_ms, &failed.kind),
        (
            1_500,
            &apollo11_core::EventKind::AttemptFailed(apollo11_core::AttemptFailure::new(
                apollo11_core::FailureClass::Timeout,
                "timeout",
                true
            ))
        )
    );
    assert_eq!(sim.summary(), "a=succeeded#2");
}

#[test]
fn a_step_left_running_by_a_dead_scheduler_is_failed_as_interrupted_then_retried() {
    let w = spec(
        OnFailure::Pause,
        &[
            ("a", &[], I::Keyed, false),
            ("b", &["a"], I::Keyed, false),
            ("c", &["b"], I::Keyed, false),
        ],
    );
    let mut sim = Sim::new(&w, |_, _| Outcome::Ok(10));
    sim.run_until_started("b", 1);
    sim.crash();
    let interrupted = Command::Fail {
        step: StepName::from("b"),
        attempt: 1,
        reason: FailReason::Interrupted,
    };
    assert_eq!(sim.decide(), [interrupted]);
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(
        sim.steps_with("started"),
        ["a", "b", "b", "c"],
        "a is not rerun"
    );
    assert_eq!(sim.summary(), "a=succeeded#1 b=succeeded#2 c=succeeded#1");
}

#[test]
fn rollback_on_a_diamond_compensates_d_then_b_and_c_then_a() {
    // A -> B, C -> D -> E; E fails for good; every step but E has a compensation.
    let w = spec(
        OnFailure::Rollback,
        &[
            ("a", &[], I::Keyed, true),
            ("b", &["a"], I::Keyed, true),
            ("c", &["a"], I::Keyed, true),
            ("d", &["b", "c"], I::Keyed, true),
            ("e", &["d"], I::Natural, false),
        ],
    );
    let mut sim = Sim::new(&w, failing("e", u32::MAX, false, 10));
    assert_eq!(sim.run(), RunStatus::RolledBack);
    assert_eq!(sim.steps_with("compensating"), ["d", "b", "c", "a"]);
    // b and c were compensated in parallel: both started before either finished.
    let kinds: Vec<String> = sim
        .events
        .iter()
        .filter(|e| matches!(e.step.as_ref().map(|s| s.as_str()), Some("b" | "c")))
        .map(|e| e.kind.name().to_owned())
        .collect();
    assert_eq!(
        kinds[kinds.len() - 4..],
        ["compensating", "compensating", "compensated", "compensated"]
    );
    assert_eq!(
        sim.summary(),
        "a=compensated#1 b=compensated#1 c=compensated#1 d=compensated#1 e=failed#1"
    );
}

#[test]
fn rollback_waits_for_running_steps_before_compensating() {
    let w = spec(
        OnFailure::Rollback,
        &[
            ("a", &[], I::Keyed, true),
            ("slow", &["a"], I::Keyed, true),
            ("bad", &["a"], I::Natural, false),
        ],
    );
    let mut sim = Sim::new(&w, |step, _| match step {
        "slow" => Outcome::Ok(1_000),
        "bad" => Outcome::Err {
            after_ms: 1,
            retryable: false,
        },
        _ => Outcome::Ok(1),
    });
    assert_eq!(sim.run(), RunStatus::RolledBack);
    assert_eq!(sim.steps_with("compensating"), ["slow", "a"]);
}

#[test]
fn a_compensate_class_step_is_compensated_before_it_reruns() {
    let w = spec(
        OnFailure::Pause,
        &[
            ("charge", &[], I::Compensate, true),
            ("ship", &["charge"], I::Natural, false),
        ],
    );
    let mut sim = Sim::new(&w, failing("charge", 1, true, 5));
    sim.run_until_started("charge", 1);
    sim.run_until_started("ship", 1);
    let kinds: Vec<&str> = sim
        .events
        .iter()
        .filter(|e| e.step.as_ref().map(|s| s.as_str()) == Some("charge"))
        .map(|e| e.kind.name())
        .collect();
    assert_eq!(
        kinds,
        [
            "started",
            "failed",
            "compensating",
            "compensated",
            "started",
            "succeeded"
        ]
    );
    assert_eq!(sim.run(), RunStatus::Succeeded);
}

#[test]
fn pause_then_override_then_the_run_continues_downstream() {
    let w = spec(
        OnFailure::Pause,
        &[
            ("a", &[], I::Natural, false),
            ("b", &["a"], I::Natural, false),
            ("c", &["b"], I::Natural, false),
        ],
    );
    let mut sim = Sim::new(&w, failing("b", u32::MAX, false, 5));
    assert_eq!(sim.run(), RunStatus::Paused);
    assert_eq!(sim.summary(), "a=succeeded#1 b=failed#1 c=pending#0");
    assert_eq!(
        pause_cause(sim.state(), sim.dag(), sim.policy()),
        Some(PauseCause::StepFailed {
            step: StepName::from("b")
        })
    );
    sim.override_step("b", OverrideTarget::Succeeded, "fixed by hand");
    assert_eq!(sim.decide(), [start("c", 1)]);
    assert_eq!(sim.run(), RunStatus::Succeeded);
}

#[test]
fn override_to_pending_reruns_with_the_next_attempt_and_skipped_unblocks_dependents() {
    let w = spec(
        OnFailure::Pause,
        &[
            ("a", &[], I::Natural, false),
            ("b", &["a"], I::Natural, false),
        ],
    );
    let mut sim = Sim::new(&w, failing("a", 1, false, 5));
    assert_eq!(sim.run(), RunStatus::Paused);
    sim.override_step("a", OverrideTarget::Pending, "try again");
    assert_eq!(sim.decide(), [start("a", 2)]);
    let mut skip = Sim::new(&w, |_, _| Outcome::Err {
        after_ms: 5,
        retryable: false,
    });
    assert_eq!(skip.run(), RunStatus::Paused);
    skip.override_step("a", OverrideTarget::Skipped, "not needed");
    assert_eq!(skip.decide(), [start("b", 1)]);
}

#[test]
fn an_anomalous_run_fails_until_an_override_and_then_continues() {
    let w = spec(
        OnFailure::Pause,
        &[
            ("a", &[], I::Natural, false),
            ("b", &["a"], I::Natural, false),
        ],
    );
    let h = History::new("r")
        .created("test", pinned(&w))
        .succeeded("a", "no start");
    assert_eq!(
        decide_at(&w, &h, 0, &[]),
        [Command::Finish {
            status: RunStatus::Failed
        }]
    );
    let h = h.overridden("a", OverrideTarget::Succeeded, "op", "checked the output");
    assert_eq!(decide_at(&w, &h, 0, &[]), [start("b", 1)]);
}

#[test]
fn a_compensation_left_unfinished_is_failed_as_interrupted_then_retried_after_its_backoff() {
    let w = spec(
        OnFailure::Rollback,
        &[("a", &[], I::Keyed, true), ("b", &["a"], I::Natural, false)],
    );
    let h = History::new("r")
        .created("test", pinned(&w))
        .started("a")
        .succeeded("a", "x");
    let h = h.started("b").failed("b", "no", false).compensating("a");
    let interrupted = Command::FailCompensation {
        step: StepName::from("a"),
        attempt: 1,
    };
    assert_eq!(
        decide_at(&w, &h, 0, &[]),
        std::slice::from_ref(&interrupted)
    );
    assert_eq!(
        interrupted.event().map(|(_, kind, _)| kind),
        Some(apollo11_core::EventKind::Interrupted)
    );
    assert_eq!(
        decide_at(&w, &h, 0, &["a"]),
        [],
        "still running here: wait for it"
    );
    let h = h.at(5_000).compensation_failed("a", "interrupted", true);
    assert_eq!(
        decide_at(&w, &h, 5_500, &[]),
        [Command::WakeAt { ms: 6_000 }],
        "the step's backoff (1 s) from the failed try"
    );
    assert_eq!(
        decide_at(&w, &h, 6_000, &[]),
        [Command::Compensate {
            step: StepName::from("a"),
            attempt: 1
        }]
    );
    let h = h.compensating("a").compensated("a");
    assert_eq!(
        decide_at(&w, &h, 0, &[]),
        [Command::Finish {
            status: RunStatus::RolledBack
        }]
    );
}

/// A diamond whose `e` fails for good; every other step has a compensation.
fn diamond_failing_at_e() -> WorkflowSpec {
    spec(
        OnFailure::Rollback,
        &[
            ("a", &[], I::Keyed, true),
            ("b", &["a"], I::Keyed, true),
            ("c", &["a"], I::Keyed, true),
            ("d", &["b", "c"], I::Keyed, true),
            ("e", &["d"], I::Natural, false),
        ],
    )
}

/// `(step, kind, at_ms)` of the compensation events of a simulated run.
fn compensation_timeline(sim: &Sim) -> Vec<(String, &'static str, u64)> {
    sim.events
        .iter()
        .filter(|e| e.kind.name().starts_with("compensat"))
        .map(|e| (e.step.clone().unwrap().0, e.kind.name(), e.at_ms))
        .collect()
}

#[test]
fn a_failed_compensation_is_retried_after_its_backoff_and_what_it_depends_on_waits() {
    let mut sim = Sim::new(&diamond_failing_at_e(), failing("e", u32::MAX, false, 10))
        .compensations(|step, try_| match (step, try_) {
            ("b", 1 | 2) => Outcome::Err {
                after_ms: 5,
                retryable: true,
            },
            _ => Outcome::Ok(5),
        });
    assert_eq!(sim.run(), RunStatus::RolledBack);
    let b: Vec<(&str, u64)> = compensation_timeline(&sim)
        .into_iter()
        .filter(|(s, _, _)| s == "b")
        .map(|(_, k, at)| (k, at))
        .collect();
    let kinds: Vec<&str> = b.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        kinds,
        [
            "compensating",
            "compensation_failed",
            "compensating",
            "compensation_failed",
            "compensating",
            "compensated"
        ]
    );
    assert_eq!(
        b[2].1 - b[1].1,
        1_000,
        "first retry 1 s after the failed try"
    );
    assert_eq!(
        b[4].1 - b[3].1,
        2_000,
        "second retry 2 s after the next one"
    );
    let a_starts = compensation_timeline(&sim)
        .into_iter()
        .find(|(s, k, _)| s == "a" && *k == "compensating")
        .unwrap()
        .2;
    assert!(a_starts >= b[5].1, "a is compensated only after b is");
    assert_eq!(
        sim.steps_with("compensating"),
        ["d", "b", "c", "b", "b", "a"]
    );
    assert_eq!(
        sim.summary(),
        "a=compensated#1 b=compensated#1 c=compensated#1 d=compensated#1 e=failed#1"
    );
}

#[test]
fn a_compensation_out_of_tries_pauses_the_run_whatever_on_failure_says_until_an_override() {
    let mut sim = Sim::new(&diamond_failing_at_e(), failing("e", u32::MAX, false, 10))
        .compensations(|step, _| {
            if step == "b" {
                Outcome::Err {
                    after_ms: 5,
                    retryable: true,
                }
            } else {
                Outcome::Ok(5)
            }
        });
    assert_eq!(sim.run(), RunStatus::Paused);
    assert_eq!(
        sim.summary(),
        "a=succeeded#1 b=compensation_failed#1 c=compensated#1 d=compensated#1 e=failed#1",
        "a is not compensated while b, which depends on it, is not undone"
    );
    let b = sim.state().step("b");
    assert_eq!(b.compensation_tries, 3, "max_attempts tries, then a person");
    assert_eq!(
        pause_cause(sim.state(), sim.dag(), sim.policy()),
        Some(PauseCause::CompensationFailed {
            step: StepName::from("b"),
            retry_with: Some(OverrideTarget::Succeeded)
        })
    );
    assert_eq!(sim.steps_with("compensation_failed"), ["b", "b", "b"]);
    sim.override_step("b", OverrideTarget::Skipped, "undone by hand");
    assert_eq!(
        sim.decide(),
        [Command::Compensate {
            step: StepName::from("a"),
            attempt: 1
        }]
    );
    assert_eq!(sim.run(), RunStatus::RolledBack);
}

#[test]
fn a_compensation_error_that_no_retry_can_fix_pauses_at_once() {
    let mut sim = Sim::new(&diamond_failing_at_e(), failing("e", u32::MAX, false, 10))
        .compensations(|step, _| {
            if step == "d" {
                Outcome::Err {
                    after_ms: 5,
                    retryable: false,
                }
            } else {
                Outcome::Ok(5)
            }
        });
    assert_eq!(sim.run(), RunStatus::Paused);
    assert_eq!(sim.steps_with("compensating"), ["d"]);
    assert_eq!(sim.state().step("d").compensation_tries, 1);
    // Overriding to `succeeded` asks for the compensation again, with a fresh budget.
    sim.override_step(
        "d",
        OverrideTarget::Succeeded,
        "fixed the permissions; try again",
    );
    assert_eq!(
        sim.decide(),
        [Command::Compensate {
            step: StepName::from("d"),
            attempt: 1
        }]
    );
}

#[test]
fn a_compensate_class_step_whose_compensation_fails_once_is_compensated_then_rerun() {
    let w = spec(
        OnFailure::Pause,
        &[
            ("charge", &[], I::Compensate, true),
            ("ship", &["charge"], I::Natural, false),
        ],
    );
    let mut sim = Sim::new(&w, failing("charge", 1, true, 5)).compensations(|_, try_| {
        if try_ == 1 {
            Outcome::Err {
                after_ms: 5,
                retryable: true,
            }
        } else {
            Outcome::Ok(5)
        }
    });
    assert_eq!(sim.run(), RunStatus::Succeeded);
    assert_eq!(pause_cause(sim.state(), sim.dag(), sim.policy()), None);
    let kinds: Vec<&str> = sim
        .events
        .iter()
        .filter(|e| e.step.as_ref().map(|s| s.as_str()) == Some("charge"))
        .map(|e| e.kind.name())
        .collect();
    assert_eq!(
        kinds,
        [
            "started",
            "failed",
            "compensating",
            "compensation_failed",
            "compensating",
            "compensated",
            "started",
            "succeeded"
        ]
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Random graphs, random outcomes, random crashes: every run ends, never breaks the
    /// table, the concurrency limit or a dependency, and never reruns a succeeded step.
    #[test]
    fn every_run_of_a_random_workflow_terminates_within_the_rules(
        edges in arb_dag_edges(12),
        seed in any::<u64>(),
        rollback in any::<bool>(),
        crash_at in proptest::option::of(0usize..30),
        operator in proptest::option::of((0usize..30, 0usize..3)),
        triggers in proptest::collection::vec(arb_trigger_rule(), 12),
    ) {
        let steps: Vec<(&str, Vec<&str>)> = edges.iter().map(|(n, d)| (n.as_str(), d.iter().map(String::as_str).collect())).collect();
        let owned: Vec<(&str, &[&str], I, bool)> = steps.iter().enumerate().map(|(i, (n, d))| {
            let class = [I::Natural, I::Keyed, I::Checkpoint, I::Compensate][(seed as usize + i) % 4];
            (*n, d.as_slice(), class, class == I::Compensate || i % 2 == 0)
        }).collect();
        let mut w = spec(if rollback { OnFailure::Rollback } else { OnFailure::Pause }, &owned);
        w.max_concurrency = 3;
        for (step, trigger) in w.steps.iter_mut().zip(triggers) {
            step.trigger = trigger;
        }
        let outcome = move |salt: u64, step: &str, attempt: u32| {
            let h = step.bytes().fold(seed ^ salt ^ u64::from(attempt), |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
            match h % 5 { 0 => Outcome::Err { after_ms: h % 7, retryable: h % 3 != 0 }, _ => Outcome::Ok(h % 50) }
        };
        // Compensations fail as often as attempts, retryably or not.
        let mut sim = Sim::new(&w, move |step, attempt| outcome(0, step, attempt))
            .compensations(move |step, try_| outcome(0x5eed, step, try_));
        if let Some(rounds) = crash_at {
            for _ in 0..rounds {
                if sim.round().is_some() { break; }
            }
            sim.crash();
        }
        // An operator acts once, at a random point, when the run allows it; a pause is
        // lifted once the run stops on it.
        let mut status = None;
        if let Some((rounds, action)) = operator {
            for _ in 0..rounds {
                status = sim.round();
                if status.is_some() { break; }
            }
            let action = RunAction::ALL[action];
            if status.is_none() && check_action(sim.state(), sim.dag(), sim.policy(), action).is_ok() {
                sim.operator(action, "random");
            }
        }
        let mut status = status.unwrap_or_else(|| sim.run());
        if status == RunStatus::Paused && sim.state().paused.is_some() {
            sim.operator(RunAction::Resume, "go on");
            status = sim.run();
        }
        let rolling_back = rollback || sim.state().rollback.is_some();
        prop_assert!(sim.peak_running <= 3);
        match status {
            RunStatus::Succeeded => prop_assert!(
                sim.summary().split(' ').all(|s| s.contains("=succeeded") || s.contains("=skipped")),
                "{}", sim.summary()
            ),
            // A rollback pauses only on a compensation out of tries (or one no retry fixes).
            RunStatus::Paused => prop_assert!(
                !rolling_back || sim.state().steps.values().any(|s| s.status == apollo11_machine::StepStatus::CompensationFailed),
                "{}", sim.summary()
            ),
            RunStatus::RolledBack => {
                prop_assert!(rolling_back);
                for (name, _, _, has_compensation) in &owned {
                    let left = sim.state().status(name);
                    prop_assert!(!(*has_compensation && left == apollo11_machine::StepStatus::Succeeded), "{name} not undone");
                }
            }
            other => prop_assert!(false, "unexpected {other:?}"),
        }
    }
}

#[test]
fn a_compensate_class_step_out_of_compensation_tries_pauses_with_no_retry_override() {
    let w = spec(OnFailure::Pause, &[("charge", &[], I::Compensate, true)]);
    let mut sim = Sim::new(&w, failing("charge", 1, true, 5)).compensations(|_, _| Outcome::Err {
        after_ms: 5,
        retryable: true,
    });
    assert_eq!(sim.run(), RunStatus::Paused);
    assert_eq!(sim.summary(), "charge=compensation_failed#1");
    assert_eq!(
        pause_cause(sim.state(), sim.dag(), sim.policy()),
        Some(PauseCause::CompensationFailed {
            step: StepName::from("charge"),
            retry_with: None
        }),
        "outside a rollback no override asks for the compensation again"
    );
}

#[test]
fn a_rollback_undoes_a_failed_step_only_when_its_class_is_compensate() {
    for (class, undone) in [
        (I::Compensate, true),
        (I::Keyed, false),
        (I::Checkpoint, false),
    ] {
        let w = spec(
            OnFailure::Rollback,
            &[("a", &[], I::Keyed, true), ("b", &["a"], class, true)],
        );
        let h = History::new("r")
            .created("test", pinned(&w))
            .started("a")
            .succeeded("a", "A")
            .started("b")
            .failed("b", "no", false);
        let first = if undone { "b" } else { "a" };
        assert_eq!(
            decide_at(&w, &h, 0, &[]),
            [Command::Compensate {
                step: StepName::from(first),
                attempt: 1
            }],
            "{class:?}"
        );
    }
}

#[test]
fn either_kind_of_anomaly_alone_stops_new_work_while_a_step_is_busy() {
    let w = spec(
        OnFailure::Pause,
        &[
            ("a", &[], I::Natural, false),
            ("b", &[], I::Natural, false),
            ("c", &[], I::Natural, false),
        ],
    );
    let created = History::new("r").created("test", pinned(&w)).started("a");
    // A step anomaly only: `b` is anomalous, `a` is running.
    let step_only = created.clone().succeeded("b", "no start");
    // A run anomaly only: an event of another run in this run's log.
    let mut run_only = created.clone().into_events();
    let mut foreign = run_only[1].clone();
    foreign.run_id = apollo11_core::RunId::from("other");
    foreign.seq = apollo11_core::Seq(3);
    run_only.push(foreign);
    let (dag, policy) = Policy::compile(&w, |_, f| f).unwrap();
    let executing = [StepName::from("a")].into_iter().collect();
    let now = Now {
        ms: 0,
        executing: &executing,
    };
    for (what, state) in [
        (
            "step",
            apollo11_machine::fold(step_only.run_id(), step_only.events()),
        ),
        ("run", apollo11_machine::fold(created.run_id(), &run_only)),
    ] {
        assert!(state.is_anomalous(), "{what}");
        assert_eq!(
            decide(&state, &dag, &policy, now),
            [],
            "{what}: nothing new starts"
        );
        assert_eq!(
            apollo11_machine::run_status(&state, &dag, &policy),
            RunStatus::Running,
            "{what}: still busy"
        );
    }
}
