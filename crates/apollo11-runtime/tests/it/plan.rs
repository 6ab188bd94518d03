//! The plan judges each step it would start by its condition, as resume would: over the
//! run's arguments and the outputs its steps recorded.

use crate::inspect::append;
use apollo11_core::{Idempotency, OnFailure, Payload, RunId, StepSpec, TriggerRule, WorkflowSpec};
use apollo11_machine::History;
use apollo11_runtime::inspect::PlanStep;
use apollo11_runtime::Inspector;
use apollo11_store::MemStore;
use serde_json::json;
use std::sync::Arc;

/// `a`; `b` after it when `condition` holds; `c` after `b`; `notify` when `b` failed.
fn conditional(condition: &str) -> WorkflowSpec {
    let mut b = StepSpec::new("b", &["a"], Idempotency::Natural);
    b.condition = Some(condition.to_owned());
    let mut notify = StepSpec::new("notify", &["b"], Idempotency::Natural);
    notify.trigger = TriggerRule::OneFailed;
    let mut spec = WorkflowSpec::new(
        "when",
        OnFailure::Pause,
        vec![
            StepSpec::new("a", &[], Idempotency::Natural),
            b,
            StepSpec::new("c", &["b"], Idempotency::Natural),
            notify,
        ],
    );
    spec.arguments.insert("full".to_owned(), json!(true));
    spec
}

/// A run of `conditional(condition)` whose `a` succeeded with `{"rows":3}`, its engine
/// stopped before deciding about `b`.
async fn stopped_after_a(condition: &str) -> Inspector<MemStore> {
    let store = Arc::new(MemStore::new());
    let definition = serde_json::to_vec(&conditional(condition)).unwrap();
    let history = History::new("r")
        .at(1_000)
        .created("when", Payload::inline(definition))
        .started("a")
        .succeeded("a", "{\"rows\":3}");
    append(store.as_ref(), history).await;
    Inspector::new(store)
}

fn start(step: &str) -> PlanStep {
    PlanStep::Start {
        step: step.into(),
        attempt: 1,
    }
}

#[tokio::test]
async fn the_plan_skips_a_step_whose_condition_is_false_and_goes_on_with_its_dependents() {
    let condition = "params.full && steps.a.output.rows > 5";
    let plan = stopped_after_a(condition)
        .await
        .plan(&RunId::from("r"))
        .await;
    let plan = plan.unwrap();
    let PlanStep::Skip { reason, .. } = &plan.steps[2] else {
        panic!("{:?}", plan.steps);
    };
    assert!(reason.contains("trigger rule"), "{reason}");
    assert_eq!(
        plan.steps[..2],
        [
            PlanStep::Skip {
                step: "b".into(),
                reason: format!("condition `{condition}` is false"),
            },
            start("c"),
        ]
    );
    assert_eq!(plan.steps.len(), 3, "{:?}", plan.steps);
    assert_eq!(
        plan.lines[0],
        format!("skip b: condition `{condition}` is false")
    );
    let holds = stopped_after_a("params.full && steps.a.output.rows < 5").await;
    let plan = holds.plan(&RunId::from("r")).await.unwrap();
    assert_eq!(plan.steps, [start("b")], "a condition that holds starts");
}

#[tokio::test]
async fn the_plan_fails_for_good_a_step_whose_condition_cannot_be_evaluated() {
    let plan = stopped_after_a("steps.a.output.rows > \"x\"").await;
    let plan = plan.plan(&RunId::from("r")).await.unwrap();
    let PlanStep::FailForGood {
        step,
        attempt: 1,
        error,
    } = &plan.steps[0]
    else {
        panic!("{:?}", plan.steps);
    };
    assert_eq!(step.as_str(), "b");
    assert!(
        error.starts_with(
            "the condition `steps.a.output.rows > \"x\"` of step `b` compares integer with string"
        ),
        "{error}"
    );
    assert!(
        plan.lines[0].starts_with("fail b attempt 1 for good: the condition"),
        "{}",
        plan.lines[0]
    );
    assert!(
        plan.steps.contains(&start("notify")),
        "its one_failed dependent starts: {:?}",
        plan.steps
    );
}
