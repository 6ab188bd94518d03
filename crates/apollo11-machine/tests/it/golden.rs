//! Golden histories: event logs checked in under `tests/data/` with the state each one must
//! fold to, replayed on every test run. A change to the event format, the fold or the run
//! status that alters any of them fails here. `APOLLO11_BLESS=1` rewrites the files from
//! the builders below (review the diff before committing it).

use crate::{pinned, spec};
use apollo11_core::{
    Event, ForEach, Idempotency as I, ItemSource, OnFailure, OverrideTarget, TriggerRule,
    WorkflowSpec,
};
use apollo11_machine::History;
use apollo11_machine::{fold, run_status, Policy, RunStatus};
use std::path::PathBuf;

struct Golden {
    name: &'static str,
    history: History,
    status: RunStatus,
    /// `step=status#attempt`, in declaration order.
    steps: &'static str,
}

fn chain() -> WorkflowSpec {
    spec(
        OnFailure::Pause,
        &[
            ("collect", &[], I::Keyed, false),
            ("clean", &["collect"], I::Natural, false),
            ("persist", &["clean"], I::Keyed, false),
        ],
    )
}

fn diamond() -> WorkflowSpec {
    spec(
        OnFailure::Rollback,
        &[
            ("a", &[], I::Keyed, true),
            ("b", &["a"], I::Keyed, true),
            ("c", &["a"], I::Keyed, true),
            ("d", &["b", "c"], I::Natural, false),
        ],
    )
}

fn payment() -> WorkflowSpec {
    spec(
        OnFailure::Pause,
        &[
            ("charge", &[], I::Compensate, true),
            ("ship", &["charge"], I::Keyed, false),
        ],
    )
}

/// The chain under `on_failure = "rollback"` with one attempt per step.
fn chain_one_attempt() -> WorkflowSpec {
    let mut w = chain();
    w.on_failure = OnFailure::Rollback;
    for s in &mut w.steps {
        s.retry.max_attempts = 1;
    }
    w
}

/// a → {b, c}, and `notify` (one_failed) after b and c.
fn notify_on_failure() -> WorkflowSpec {
    let mut w = spec(
        OnFailure::Pause,
        &[
            ("a", &[], I::Keyed, false),
            ("b", &["a"], I::Keyed, false),
            ("c", &["a"], I::Keyed, false),
            ("notify", &["b", "c"], I::Natural, false),
        ],
    );
    w.steps[3].trigger = TriggerRule::OneFailed;
    w
}

/// `a`, then `b` and `c` started.
fn notify_run(run: &str) -> History {
    History::new(run)
        .created("test", pinned(&notify_on_failure()))
        .started("a")
        .succeeded("a", "ok")
        .started("b")
        .started("c")
}

/// discover → shards (a template over discover's output) → report.
fn template() -> WorkflowSpec {
    let mut w = spec(
        OnFailure::Pause,
        &[
            ("discover", &[], I::Keyed, false),
            ("shards", &["discover"], I::Natural, false),
            ("report", &["shards"], I::Natural, false),
        ],
    );
    w.steps[1].for_each = Some(ForEach {
        items: ItemSource::Output {
            step: "discover".into(),
            path: String::new(),
        },
        wave_size: None,
        gate: None,
        key: None,
    });
    w
}

/// `clean` started and interrupted `times` times, each after a minute.
fn clean_interrupted(mut h: History, times: u32) -> History {
    h = h
        .created("test", pinned(&chain_one_attempt()))
        .started("collect")
        .succeeded("collect", "rows=100");
    for _ in 0..times {
        h = h.started("clean").wait(60_000).interrupted("clean");
    }
    h
}

/// `clean` run again and succeeding, then `persist`.
fn clean_then_persist(h: History) -> History {
    h.started("clean")
        .succeeded("clean", "rows=97")
        .started("persist")
        .succeeded("persist", "ok")
}

/// A diamond run whose `d` failed for good after `a`, `b` and `c` succeeded.
fn diamond_failed_at_d(h: History) -> History {
    h.created("test", pinned(&diamond()))
        .started("a")
        .succeeded("a", "A")
        .started("b")
        .started("c")
        .succeeded("c", "C")
        .succeeded("b", "B")
        .started("d")
        .failed_legacy("d", "disk full", false)
}

/// The diamond's rollback where `b`'s compensation fails all three of its tries.
fn undo_out_of_tries(h: History) -> History {
    diamond_failed_at_d(h)
        .compensating("b")
        .compensating("c")
        .compensated("c")
        .compensation_failed("b", "bucket locked", true)
        .wait(1_000)
        .compensating("b")
        .compensation_failed("b", "bucket locked", true)
        .wait(2_000)
        .compensating("b")
        .compensation_failed("b", "bucket locked", true)
}

/// The chain paused by an operator while `collect` ran; `collect` finished.
fn operator_pause(h: History) -> History {
    h.created("test", pinned(&chain()))
        .started("collect")
        .paused("alice", "database maintenance")
        .succeeded("collect", "rows=100")
}

fn goldens() -> Vec<Golden> {
    let chain_run = |h: History| h.created("test", pinned(&chain()));
    vec![
        Golden {
            name: "happy_path",
            history: chain_run(History::new("happy"))
                .started("collect")
                .succeeded("collect", "rows=100")
                .started("clean")
                .succeeded("clean", "rows=97")
                .started("persist")
                .succeeded("persist", "ok"),
            status: RunStatus::Succeeded,
            steps: "collect=succeeded#1 clean=succeeded#1 persist=succeeded#1",
        },
        Golden {
            name: "crash_mid_step_then_resume",
            history: clean_then_persist(
                chain_run(History::new("crash"))
                    .started("collect")
                    .succeeded("collect", "rows=100")
                    .started("clean")
                    .wait(60_000)
                    .failed_legacy("clean", "interrupted", true),
            ),
            status: RunStatus::Succeeded,
            steps: "collect=succeeded#1 clean=succeeded#2 persist=succeeded#1",
        },
        Golden {
            name: "placed_then_interrupted_with_its_marker",
            history: chain_run(History::new("placed"))
                .started("collect")
                .placed("collect", "host-a", r#"{"pgid":4242}"#)
                .wait(60_000)
                .raw(
                    Some("collect"),
                    apollo11_core::EventKind::Failed {
                        error: "interrupted".into(),
                        retryable: true,
                    },
                    1,
                    apollo11_core::Payload::inline(r#"{"chunks_done":7}"#),
                )
                .started("collect")
                .placed("collect", "host-a", r#"{"pgid":4250}"#),
            status: RunStatus::Running,
            steps: "collect=running#2 clean=pending#0 persist=pending#0",
        },
        Golden {
            name: "interrupted_spends_no_attempt",
            history: clean_then_persist(
                clean_interrupted(History::new("interrupted"), 1).wait(1_000),
            ),
            status: RunStatus::Succeeded,
            steps: "collect=succeeded#1 clean=succeeded#2 persist=succeeded#1",
        },
        Golden {
            name: "interrupted_three_times_then_paused",
            history: clean_interrupted(History::new("poison"), 3).paused(
                "engine-1",
                &apollo11_machine::interruptions_reason("clean", 3),
            ),
            status: RunStatus::Paused,
            steps: "collect=succeeded#1 clean=failed#3 persist=pending#0",
        },
        Golden {
            name: "retry_then_success",
            history: chain_run(History::new("retry"))
                .started("collect")
                .failed_legacy("collect", "connection reset", true)
                .wait(1_000)
                .started("collect")
                .failed_legacy("collect", "connection reset", true)
                .wait(2_000)
                .started("collect")
                .succeeded("collect", "rows=100"),
            status: RunStatus::Running,
            steps: "collect=succeeded#3 clean=pending#0 persist=pending#0",
        },
        Golden {
            name: "diamond_rollback",
            history: History::new("diamond")
                .created("test", pinned(&diamond()))
                .started("a")
                .succeeded("a", "A")
                .started("b")
                .started("c")
                .succeeded("c", "C")
                .succeeded("b", "B")
                .started("d")
                .failed_legacy("d", "disk full", false)
                .compensating("b")
                .compensating("c")
                .compensated("c")
                .compensated("b")
                .compensating("a")
                .compensated("a"),
            status: RunStatus::RolledBack,
            steps: "a=compensated#1 b=compensated#1 c=compensated#1 d=failed#1",
        },
        Golden {
            name: "compensation_retried",
            history: diamond_failed_at_d(History::new("undo-retry"))
                .compensating("b")
                .compensating("c")
                .compensated("c")
                .wait(60_000)
                .compensation_failed("b", "interrupted", true)
                .wait(1_000)
                .compensating("b")
                .compensation_failed("b", "connection refused", true)
                .wait(2_000)
                .compensating("b")
                .compensated("b")
                .compensating("a")
                .compensated("a"),
            status: RunStatus::RolledBack,
            steps: "a=compensated#1 b=compensated#1 c=compensated#1 d=failed#1",
        },
        Golden {
            name: "compensation_out_of_tries",
            history: undo_out_of_tries(History::new("undo-stuck")),
            status: RunStatus::Paused,
            steps: "a=succeeded#1 b=compensation_failed#1 c=compensated#1 d=failed#1",
        },
        Golden {
            name: "compensation_out_of_tries_then_override",
            history: undo_out_of_tries(History::new("undo-override"))
                .overridden(
                    "b",
                    OverrideTarget::Skipped,
                    "carol",
                    "unlocked the bucket and deleted the copy by hand",
                )
                .compensating("a")
                .compensated("a"),
            status: RunStatus::RolledBack,
            steps: "a=compensated#1 b=skipped#1 c=compensated#1 d=failed#1",
        },
        Golden {
            name: "operator_paused",
            history: operator_pause(History::new("op-pause")),
            status: RunStatus::Paused,
            steps: "collect=succeeded#1 clean=pending#0 persist=pending#0",
        },
        Golden {
            name: "operator_pause_then_resume",
            history: operator_pause(History::new("op-resume"))
                .wait(3_600_000)
                .resumed("alice", "maintenance over")
                .started("clean")
                .succeeded("clean", "rows=97")
                .started("persist")
                .succeeded("persist", "ok"),
            status: RunStatus::Succeeded,
            steps: "collect=succeeded#1 clean=succeeded#1 persist=succeeded#1",
        },
        Golden {
            name: "rollback_requested",
            history: History::new("op-rollback")
                .created("test", pinned(&diamond()))
                .started("a")
                .succeeded("a", "A")
                .started("b")
                .started("c")
                .succeeded("c", "C")
                .rollback_requested("bob", "wrong input file")
                .succeeded("b", "B")
                .compensating("b")
                .compensating("c")
                .compensated("c")
                .compensated("b")
                .compensating("a")
                .compensated("a"),
            status: RunStatus::RolledBack,
            steps: "a=compensated#1 b=compensated#1 c=compensated#1 d=pending#0",
        },
        Golden {
            name: "compensate_then_rerun",
            history: History::new("pay")
                .created("test", pinned(&payment()))
                .started("charge")
                .failed_legacy("charge", "gateway 502", true)
                .compensating("charge")
                .compensated("charge")
                .wait(1_000)
                .started("charge")
                .succeeded("charge", "txn=42")
                .started("ship")
                .succeeded("ship", "parcel=7"),
            status: RunStatus::Succeeded,
            steps: "charge=succeeded#2 ship=succeeded#1",
        },
        Golden {
            name: "override_out_of_anomaly",
            history: chain_run(History::new("anomaly"))
                .started("collect")
                .succeeded("collect", "rows=100")
                .succeeded("collect", "rows=100")
                .overridden(
                    "collect",
                    OverrideTarget::Succeeded,
                    "alice",
                    "duplicate ack from a retried writer; output checked",
                )
                .started("clean")
                .succeeded("clean", "rows=97"),
            status: RunStatus::Running,
            steps: "collect=succeeded#1 clean=succeeded#1 persist=pending#0",
        },
        Golden {
            name: "pause_override_continue",
            history: chain_run(History::new("pause"))
                .started("collect")
                .succeeded("collect", "rows=100")
                .started("clean")
                .failed_legacy("clean", "schema mismatch", false)
                .overridden("clean", OverrideTarget::Succeeded, "bob", "cleaned by hand")
                .started("persist")
                .succeeded("persist", "ok"),
            status: RunStatus::Succeeded,
            steps: "collect=succeeded#1 clean=succeeded#1 persist=succeeded#1",
        },
        Golden {
            name: "one_failed_runs_then_paused",
            history: notify_run("notify")
                .failed_legacy("b", "refused", false)
                .succeeded("c", "ok")
                .started("notify")
                .succeeded("notify", "sent"),
            status: RunStatus::Paused,
            steps: "a=succeeded#1 b=failed#1 c=succeeded#1 notify=succeeded#1",
        },
        Golden {
            name: "one_failed_skipped",
            history: notify_run("quiet")
                .succeeded("b", "ok")
                .succeeded("c", "ok")
                .skipped("notify", "trigger rule `one_failed`: no dependency failed"),
            status: RunStatus::Succeeded,
            steps: "a=succeeded#1 b=succeeded#1 c=succeeded#1 notify=skipped#0",
        },
        Golden {
            name: "template_expanded_into_nothing",
            history: History::new("empty")
                .created("test", pinned(&template()))
                .started("discover")
                .succeeded("discover", "[]")
                .started("shards")
                .expanded("shards", &[])
                .started("report")
                .succeeded("report", "none"),
            status: RunStatus::Succeeded,
            steps: "discover=succeeded#1 shards=succeeded#1 report=succeeded#1",
        },
    ]
}

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn read_history(name: &str) -> Vec<Event> {
    let path = data_dir().join(format!("{name}.events.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

fn bless(g: &Golden) {
    let events: Vec<String> = g
        .history
        .events()
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    std::fs::write(
        data_dir().join(format!("{}.events.jsonl", g.name)),
        events.join("\n") + "\n",
    )
    .unwrap();
    let state = fold(g.history.run_id(), g.history.events());
    std::fs::write(
        data_dir().join(format!("{}.state.json", g.name)),
        serde_json::to_string_pretty(&state).unwrap() + "\n",
    )
    .unwrap();
}

#[test]
fn golden_histories_replay_to_their_recorded_states() {
    let blessing = std::env::var_os("APOLLO11_BLESS").is_some();
    for g in goldens() {
        if blessing {
            bless(&g);
        }
        let events = read_history(g.name);
        assert_eq!(
            events,
            g.history.events(),
            "{}: the file no longer matches its builder",
            g.name
        );
        let state = fold(g.history.run_id(), &events);
        let expected_path = data_dir().join(format!("{}.state.json", g.name));
        let expected: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&expected_path).unwrap()).unwrap();
        assert_eq!(
            serde_json::to_value(&state).unwrap(),
            expected,
            "{}: state differs from {}",
            g.name,
            expected_path.display()
        );
        let spec: WorkflowSpec =
            serde_json::from_slice(state.definition.inline_bytes().unwrap()).unwrap();
        let (dag, policy) = Policy::compile(&spec, |_, f| f).unwrap();
        assert_eq!(run_status(&state, &dag, &policy), g.status, "{}", g.name);
        let steps: Vec<String> = dag
            .nodes()
            .map(|n| {
                let s = state.step(dag.name(n));
                format!("{}={}#{}", dag.name(n), s.status, s.attempt)
            })
            .collect();
        assert_eq!(steps.join(" "), g.steps, "{}", g.name);
    }
}

#[test]
fn every_file_under_tests_data_is_a_replayed_golden() {
    let known: Vec<String> = goldens()
        .iter()
        .flat_map(|g| {
            [
                format!("{}.events.jsonl", g.name),
                format!("{}.state.json", g.name),
            ]
        })
        .collect();
    for entry in std::fs::read_dir(data_dir()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            known.contains(&name),
            "tests/data/{name} is not replayed by any test"
        );
    }
}
