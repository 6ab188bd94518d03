//! Properties of the fold: deterministic, total, and snapshot + suffix == full replay.

use apollo11_core::strategies::arb_event_kind;
use apollo11_core::{Event, EventId, Payload, RunId, Seq, StepName};
use apollo11_core::{Idempotency, OnFailure, StepSpec, WorkflowSpec};
use apollo11_machine::strategies::{arb_history, arb_history_with_expansion, arb_trigger_rule};
use apollo11_machine::History;
use apollo11_machine::{decide, fold, run_status, Now, RunMachine, RunState, StepStatus};
use proptest::prelude::*;
use std::collections::BTreeSet;

fn run() -> RunId {
    RunId::from("run-p")
}

/// Events with every field arbitrary: other runs, any seq, step or no step.
fn arb_wild_events() -> impl Strategy<Value = Vec<Event>> {
    let event = (
        prop_oneof![Just("run-p"), Just("other")],
        0u32..6,
        proptest::option::of(prop_oneof![Just("a"), Just("b")]),
        arb_event_kind(),
        0u32..4,
        any::<u64>(),
    )
        .prop_map(|(run, seq, step, kind, attempt, at_ms)| Event {
            event_id: EventId(u64::from(seq)),
            run_id: RunId::from(run),
            seq: Seq(seq),
            step: step.map(StepName::from),
            kind,
            attempt,
            at_ms,
            instance: "x".into(),
            payload: Payload::Empty,
        });
    proptest::collection::vec(event, 0..40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, ..ProptestConfig::default() })]

    #[test]
    fn a_machine_kept_event_by_event_equals_one_built_from_its_state(
        events in arb_history(4, 60),
        edges in apollo11_dag::strategies::arb_dag_edges(3),
        on_failure in prop_oneof![Just(OnFailure::Pause), Just(OnFailure::Rollback)],
        triggers in proptest::collection::vec(arb_trigger_rule(), 3),
    ) {
        // Steps s0..s2 form a random workflow; the history also names s3, which it lacks.
        let steps: Vec<StepSpec> = edges
            .into_iter()
            .map(|(n, deps)| {
                let deps: Vec<String> = deps.iter().map(|d| rename(d)).collect();
                let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
                StepSpec {
                    has_compensation: true,
                    ..StepSpec::new(&rename(&n), &deps, Idempotency::Compensate)
                }
            })
            .zip(triggers)
            .map(|(step, trigger)| StepSpec { trigger, ..step })
            .collect();
        let spec = WorkflowSpec::new("wf", on_failure, steps).with_max_concurrency(2);
        let mut machine = RunMachine::compile(&spec, RunState::new(run()), |_, f| f).unwrap();
        let nothing = BTreeSet::new();
        for e in &events {
            machine.apply(e);
            let rebuilt = RunMachine::new(machine.dag().clone(), machine.policy().clone(), machine.state().clone());
            prop_assert_eq!(&machine, &rebuilt);
            let now = Now { ms: e.at_ms, executing: &nothing };
            prop_assert_eq!(machine.decide(now), decide(machine.state(), machine.dag(), machine.policy(), now));
            prop_assert_eq!(machine.status(), run_status(machine.state(), machine.dag(), machine.policy()));
        }
        prop_assert_eq!(machine.into_state(), fold(&run(), &events));
    }

    #[test]
    fn replaying_the_same_events_twice_gives_equal_states(events in arb_history(4, 60)) {
        prop_assert_eq!(fold(&run(), &events), fold(&run(), &events));
    }

    #[test]
    fn snapshot_of_any_prefix_plus_the_suffix_equals_full_replay(
        events in arb_history(4, 60),
        split in any::<prop::sample::Index>(),
    ) {
        snapshot_then_suffix(&events, split.index(events.len() + 1))?;
    }

    #[test]
    fn snapshot_plus_suffix_equals_full_replay_across_an_expansion(
        events in arb_history_with_expansion(4, 40),
        split in any::<prop::sample::Index>(),
    ) {
        let full = fold(&run(), &events);
        prop_assert_eq!(full.expansions.first().map(|x| (x.step.as_str(), x.seq.0)), Some(("s0", 3)));
        prop_assert_eq!(full.expansions.len(), full.expansions.iter().map(|x| x.seq).collect::<BTreeSet<_>>().len());
        snapshot_then_suffix(&events, split.index(events.len() + 1))?;
    }

    #[test]
    fn the_fold_is_total_on_arbitrary_events(events in arb_wild_events()) {
        let state = fold(&run(), &events);
        // Whatever came in, the state only names steps that had events of this run.
        for name in state.steps.keys() {
            let step_events = events.iter().filter(|e| e.run_id == run() && e.step.as_ref() == Some(name));
            prop_assert!(step_events.count() > 0);
        }
        if events.first().is_some_and(|e| e.run_id != run()) {
            prop_assert!(state.anomaly.is_some());
        }
    }
}

/// A state restored from the JSON snapshot of the first `k` events, then given the rest,
/// equals the fold of every event.
fn snapshot_then_suffix(events: &[Event], k: usize) -> Result<(), TestCaseError> {
    let snapshot = serde_json::to_vec(&fold(&run(), &events[..k])).unwrap();
    let mut restored: RunState = serde_json::from_slice(&snapshot).unwrap();
    for e in &events[k..] {
        restored.apply(e);
    }
    prop_assert_eq!(restored, fold(&run(), events));
    Ok(())
}

#[test]
fn an_event_the_table_forbids_makes_the_step_anomalous_and_names_the_event() {
    let events = History::new("run-p")
        .created("wf", Payload::Empty)
        .started("a")
        .succeeded("a", "out")
        .succeeded("a", "again")
        .started("b")
        .into_events();
    let state = fold(&run(), &events);
    let a = state.step("a");
    assert_eq!(a.status, StepStatus::Anomalous);
    let anomaly = a.anomaly.clone().unwrap();
    assert_eq!(
        (anomaly.event_id, anomaly.kind, anomaly.from),
        (
            EventId(4),
            apollo11_core::KindTag::Succeeded,
            apollo11_machine::AnomalySite::Step(StepStatus::Succeeded)
        )
    );
    // The state's JSON names them as it always has.
    let json = serde_json::to_value(&anomaly).unwrap();
    assert_eq!(
        (&json["kind"], &json["from"]),
        (&"succeeded".into(), &"succeeded".into())
    );
    assert_eq!(
        serde_json::from_value::<apollo11_machine::Anomaly>(json).unwrap(),
        *anomaly
    );
    assert_eq!(
        state.status("b"),
        StepStatus::Running,
        "other steps are not affected"
    );
    assert!(state.is_anomalous());
}

#[test]
fn run_level_anomalies_are_recorded_once_with_the_first_offence() {
    let mut events = History::new("run-p")
        .started("a")
        .created("wf", Payload::Empty)
        .created("wf", Payload::Empty)
        .into_events();
    events[2].seq = Seq(9);
    let state = fold(&run(), &events);
    let anomaly = state.anomaly.unwrap();
    assert_eq!(anomaly.event_id, EventId(1));
    assert_eq!(anomaly.reason, "a step event before RunCreated");
    let json = serde_json::to_value(&anomaly).unwrap();
    assert_eq!(
        (&json["kind"], &json["from"]),
        (&"started".into(), &"run".into())
    );
    assert_eq!(
        serde_json::from_value::<apollo11_machine::Anomaly>(json).unwrap(),
        anomaly
    );
    let bad = serde_json::json!({"event_id": 1, "kind": "started", "event_attempt": 1, "from": "moon", "reason": "x"});
    let err = serde_json::from_value::<apollo11_machine::Anomaly>(bad).unwrap_err();
    assert!(
        err.to_string()
            .contains("`moon` is neither `run` nor a step state"),
        "{err}"
    );
}

#[test]
fn durations_errors_and_payloads_are_kept() {
    let events = History::new("run-p")
        .created("wf", Payload::inline("def"))
        .at(5_000)
        .started("a")
        .at(5_300)
        .failed("a", "boom", true)
        .at(6_000)
        .started("a")
        .at(6_250)
        .succeeded("a", "rows=10")
        .into_events();
    let state = fold(&run(), &events);
    assert_eq!(state.definition, Payload::inline("def"));
    let a = state.step("a");
    assert_eq!(
        (a.status, a.attempt, a.duration_ms),
        (StepStatus::Succeeded, 2, Some(250))
    );
    assert_eq!(
        a.payload_seq,
        Some(Seq(5)),
        "the success carries the output"
    );
    assert_eq!(events[4].payload, Payload::inline("rows=10"));
    let after_failure = fold(&run(), &events[..3]);
    assert_eq!(
        after_failure.step("a").payload_seq,
        None,
        "a failure without a payload points at none"
    );
    assert!(a.last_error.is_none(), "a success clears the last error");
    assert_eq!(state.last_event_id, EventId(5));
}

/// `n000`.. from the dag's strategies as the history's step names `s0`..
fn rename(node: &str) -> String {
    format!("s{}", node.trim_start_matches('n').parse::<u32>().unwrap())
}

#[test]
fn compensation_tries_and_their_last_error_are_kept_until_the_compensation_ends() {
    let h = History::new("run-p")
        .created("wf", Payload::Empty)
        .started("a")
        .succeeded("a", "out")
        .compensating("a")
        .at(7_000)
        .compensation_failed("a", "permission denied", true)
        .compensating("a")
        .compensation_failed("a", "disk full", false);
    let state = fold(&run(), h.events());
    let a = state.step("a");
    assert_eq!(
        (a.status, a.attempt, a.compensation_tries),
        (StepStatus::CompensationFailed, 1, 2)
    );
    let error = a.compensation_error.as_deref().unwrap();
    assert_eq!(
        (error.error.as_str(), error.retryable, error.at_ms),
        ("disk full", false, 7_020)
    );
    assert!(a.last_error.is_none(), "the step itself did not fail");
    assert_eq!(
        a.payload_seq,
        Some(Seq(3)),
        "the output stays for the next try"
    );
    let retried = fold(&run(), h.clone().compensating("a").events());
    let a = retried.step("a");
    assert_eq!(
        (a.status, a.compensation_tries),
        (StepStatus::Compensating, 3)
    );
    assert!(
        a.compensation_error.is_some(),
        "kept while the next try runs"
    );
    for ended in [
        h.clone().compensating("a").compensated("a"),
        h.clone().overridden(
            "a",
            apollo11_core::OverrideTarget::Skipped,
            "op",
            "undone by hand",
        ),
    ] {
        let a = fold(&run(), ended.events()).step("a").clone();
        assert_eq!((a.compensation_tries, a.compensation_error), (0, None));
    }
    let again = fold(
        &run(),
        h.overridden("a", apollo11_core::OverrideTarget::Succeeded, "op", "retry")
            .compensating("a")
            .events(),
    );
    assert_eq!(
        again.step("a").compensation_tries,
        1,
        "a new compensation counts anew"
    );
}

#[test]
fn operator_actions_on_the_run_are_folded_into_its_pause_and_rollback() {
    let h = History::new("run-p")
        .created("wf", Payload::Empty)
        .at(2_000)
        .paused("alice", "database maintenance")
        .paused("bob", "me too");
    let state = fold(&run(), h.events());
    let pause = state.paused.clone().unwrap();
    assert_eq!(
        (
            pause.by.as_str(),
            pause.reason.as_str(),
            pause.at_ms,
            pause.event_id
        ),
        ("alice", "database maintenance", 2_000, EventId(2)),
        "a second pause keeps the first"
    );
    assert!(state.anomaly.is_none() && state.rollback.is_none());
    let resumed = fold(&run(), h.clone().resumed("alice", "done").events());
    assert!(resumed.paused.is_none());
    let again = fold(
        &run(),
        h.clone()
            .resumed("alice", "done")
            .resumed("bob", "x")
            .events(),
    );
    assert!(
        again.paused.is_none() && again.anomaly.is_none(),
        "a resume of a run not paused changes nothing"
    );
    let rolled = fold(
        &run(),
        h.rollback_requested("carol", "bad release")
            .rollback_requested("dan", "again")
            .events(),
    );
    assert_eq!(
        rolled.paused.map(|p| p.by),
        Some("alice".to_owned()),
        "a rollback request leaves the pause in force: only a resume lifts it"
    );
    assert_eq!(rolled.rollback.unwrap().by, "carol");
}

#[test]
fn an_operator_event_before_run_created_or_naming_a_step_is_an_anomaly() {
    let early = History::new("run-p")
        .paused("alice", "x")
        .created("wf", Payload::Empty);
    let anomaly = fold(&run(), early.events()).anomaly.unwrap();
    assert_eq!(anomaly.reason, "run_paused before RunCreated");
    let on_a_step = History::new("run-p").created("wf", Payload::Empty).raw(
        Some("a"),
        apollo11_core::EventKind::RollbackRequested {
            by: "op".into(),
            reason: "r".into(),
        },
        0,
        Payload::Empty,
    );
    let state = fold(&run(), on_a_step.events());
    assert_eq!(state.status("a"), StepStatus::Anomalous);
    assert!(
        state.rollback.is_none(),
        "the run was not asked to roll back"
    );
}

#[test]
fn a_history_numbers_its_events_and_keeps_its_clock() {
    let h = History::new("run-p")
        .first_event_id(40)
        .created("wf", Payload::Empty)
        .wait(500)
        .started("a")
        .at(9_000)
        .failed("a", "x", true)
        .started("a");
    let got: Vec<(u64, u32, u64, u32)> = h
        .events()
        .iter()
        .map(|e| (e.event_id.0, e.seq.0, e.at_ms, e.attempt))
        .collect();
    assert_eq!(
        got,
        [
            (40, 1, 1_000, 0),
            (41, 2, 1_510, 1),
            (42, 3, 9_000, 1),
            (43, 4, 9_010, 2)
        ]
    );
    assert_eq!(h.run_id().as_str(), "run-p");
    assert!(h.events().iter().all(|e| e.instance == "test"));
    assert_eq!(h.clone().into_events(), h.events());
}

#[test]
fn a_place_names_only_the_try_it_was_recorded_for() {
    let h = History::new("run-p")
        .created("wf", Payload::Empty)
        .started("a")
        .placed("a", "host-a", "pgid 7");
    let state = fold(&run(), h.events());
    let place = state.step("a").place.as_deref().expect("placed");
    assert_eq!(
        (place.host.as_str(), place.handle.as_str()),
        ("host-a", "pgid 7")
    );
    let failed = h.failed("a", "interrupted", true);
    assert_eq!(fold(&run(), failed.events()).step("a").place, None);
    let compensating = failed.compensating("a").placed("a", "host-b", "pgid 9");
    let state = fold(&run(), compensating.events());
    assert_eq!(state.step("a").status, StepStatus::Compensating);
    assert_eq!(state.step("a").place.as_ref().unwrap().host, "host-b");
    let retried = compensating
        .compensation_failed("a", "interrupted", true)
        .compensating("a");
    assert_eq!(fold(&run(), retried.events()).step("a").place, None);
}
