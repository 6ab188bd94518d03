//! Folds a recorded history and asks what to do next, with `apollo11-machine` as the only
//! dependency.

use apollo11_machine::{
    fold, Command, History, Idempotency, Now, OnFailure, Payload, RunMachine, RunStatus,
    StepName, StepSpec, WorkflowSpec,
};
use std::collections::BTreeSet;

fn main() {
    let spec = WorkflowSpec::new(
        "etl",
        OnFailure::Pause,
        vec![
            StepSpec::new("extract", &[], Idempotency::Keyed),
            StepSpec::new("load", &["extract"], Idempotency::Keyed),
        ],
    );
    let history = History::new("run-1")
        .created("etl", Payload::Empty)
        .started("extract")
        .succeeded("extract", "rows=10");
    let state = fold(history.run_id(), history.events());
    let run = RunMachine::compile(&spec, state, |_, fallback| fallback).unwrap();
    assert_eq!(run.status(), RunStatus::Running);
    let executing = BTreeSet::new();
    let commands = run.decide(Now { ms: 0, executing: &executing });
    let load = Command::Start { step: StepName::from("load"), attempt: 1 };
    assert_eq!(commands, [load]);
    println!("machine-user: folded 3 events, next: {commands:?}");
}
