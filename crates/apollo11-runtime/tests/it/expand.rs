//! A `for_each` over a step's output, expanded at run time: fan-out, fan-in, replay to
//! either side of the expansion, rollback through the items, a resume that expands once,
//! and a list too long.

use crate::authoring::{json_out, output, run_to_end, step, Attempt};
use crate::scripted::{kinds, open};
use apollo11_core::{EventKind, Payload, Seq};
use apollo11_runtime::{
    EngineError, Idempotency, Inspector, ItemSource, OnFailure, Output, RunId, RunStatus, Step,
    StepBuilder, StepContext, StepError, Workflow, WorkflowBuilder,
};
use apollo11_store::{EventStore, MemStore, NewEvent};
use async_trait::async_trait;
use serde_json::json;
use std::sync::{Arc, Mutex};

/// The template: one step per item of `discover`'s output.
fn work(f: Attempt) -> StepBuilder {
    step("work", f)
        .depends_on(&["discover"])
        .for_each(ItemSource::Output {
            step: "discover".into(),
            path: String::new(),
        })
}

/// An item's upper case; it reads its item, neither the template's list of items nor its
/// source's output (the same list), which it does not name.
fn upper(ctx: &StepContext) -> Result<Output, StepError> {
    if ctx.input("work").is_some() || ctx.input("discover").is_some() {
        return Err(StepError::fatal(
            "an item reads its item, not its template's list",
        ));
    }
    Ok(Output::text(
        ctx.item().unwrap().as_str().unwrap().to_uppercase(),
    ))
}

/// Joins the outputs of `work[a]`, `work[b]`, `work[c]` it was given.
fn merge(ctx: &StepContext) -> Result<Output, StepError> {
    let read = |s: &str| {
        ctx.input(s)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    let all: Vec<Option<String>> = ["work[a]", "work[b]", "work[c]"].map(read).into();
    json_out(&json!(all))
}

fn fan(discover: Attempt) -> WorkflowBuilder {
    Workflow::builder("fan")
        .step(step("discover", discover))
        .step(work(upper))
        .step(step("merge", merge).depends_on(&["work"]))
}

fn abc(_: &StepContext) -> Result<Output, StepError> {
    json_out(&json!(["a", "b", "c"]))
}

/// Names of the run's steps as the inspector shows them at `at` (now if `None`), with
/// what `merge` depends on.
async fn graph_at(store: &Arc<MemStore>, at: Option<u64>) -> (Vec<String>, Vec<String>) {
    let inspector = Inspector::new(store.clone());
    let at = at.map(apollo11_core::EventId);
    let view = inspector.status(&RunId::from("r"), at).await.unwrap();
    let merge = view.steps.iter().find(|s| s.name == "merge").unwrap();
    (view.order.clone(), merge.depends_on.clone())
}

#[tokio::test(start_paused = true)]
async fn a_template_fans_out_over_an_output_and_a_step_fans_in_and_replay_shows_either_graph() {
    let store = Arc::new(MemStore::new());
    let status = run_to_end(&store, &fan(abc).build().unwrap(), json!({}), "r").await;
    assert_eq!(status.unwrap(), RunStatus::Succeeded);
    assert_eq!(output(&store, "r", "merge").await, json!(["A", "B", "C"]));
    assert_eq!(kinds(&store, "r", "work").await, ["started", "expanded"]);
    assert_eq!(
        output(&store, "r", "work").await,
        json!(["a", "b", "c"]),
        "the items are the template's payload"
    );
    let events = store.read_run(&RunId::from("r"), Seq(1)).await.unwrap();
    let expanded = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Expanded { items: 3 }))
        .unwrap()
        .event_id
        .0;
    let before = graph_at(&store, Some(expanded - 1)).await;
    assert_eq!(before.0, ["discover", "work", "merge"]);
    assert_eq!(before.1, ["work"]);
    let after = graph_at(&store, Some(expanded)).await;
    let items = ["work[a]", "work[b]", "work[c]"];
    assert_eq!(
        after.0,
        [&["discover", "work"][..], &items, &["merge"]].concat()
    );
    assert_eq!(after.1, items);
    assert_eq!(graph_at(&store, None).await, after);
    let inspector = Inspector::new(store.clone());
    let run = RunId::from("r");
    let grown = inspector.grown_definition(&run, None).await.unwrap();
    let origin = grown.steps[3].origin.as_ref().unwrap();
    assert_eq!(
        (origin.declaration.as_str(), &origin.item),
        ("work", &json!("b"))
    );
    assert_eq!(
        inspector.definition(&run).await.unwrap().steps.len(),
        3,
        "as pinned"
    );
}

#[tokio::test(start_paused = true)]
async fn an_output_that_is_no_list_or_too_long_a_list_fails_the_template_for_good() {
    fn many(_: &StepContext) -> Result<Output, StepError> {
        let max = apollo11_core::limits::FOR_EACH_ITEMS_MAX as usize;
        json_out(&json!((0..=max).collect::<Vec<_>>()))
    }
    fn object(_: &StepContext) -> Result<Output, StepError> {
        json_out(&json!({"a": 1}))
    }
    let cases: [(Attempt, &str); 2] = [
        (
            many,
            "step `work`: for_each over 10001 items; at most 10000 are allowed",
        ),
        (
            object,
            "step `work`: for_each over `steps.discover.output`, which is object, not a list",
        ),
    ];
    for (discover, error) in cases {
        let store = Arc::new(MemStore::new());
        let status = run_to_end(&store, &fan(discover).build().unwrap(), json!({}), "r").await;
        assert_eq!(status.unwrap(), RunStatus::Paused);
        let events = store.read_run(&RunId::from("r"), Seq(1)).await.unwrap();
        let failed = (events.iter())
            .find_map(|e| e.kind.failure().map(|f| (f.error.clone(), f.retryable)))
            .unwrap();
        assert_eq!(failed, (error.to_owned(), false));
        assert_eq!(kinds(&store, "r", "merge").await, Vec::<&str>::new());
    }
}

/// A step that records each compensation it runs, by step name.
struct Undone(Attempt, Arc<Mutex<Vec<String>>>);

#[async_trait]
impl Step for Undone {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        (self.0)(ctx)
    }

    async fn compensate(&self, ctx: &StepContext) -> Result<(), StepError> {
        self.1.lock().unwrap().push(ctx.step.to_string());
        Ok(())
    }

    fn has_compensation(&self) -> bool {
        true
    }
}

#[tokio::test(start_paused = true)]
async fn a_rollback_compensates_the_items_in_reverse_topological_order_and_not_the_template() {
    fn chained(ctx: &StepContext) -> Result<Output, StepError> {
        Ok(Output::text(format!("{}", ctx.item().unwrap())))
    }
    fn fail(_: &StepContext) -> Result<Output, StepError> {
        Err(StepError::fatal("merge failed"))
    }
    let undone = Arc::new(Mutex::new(Vec::new()));
    let compensated = |name: &str, f| {
        StepBuilder::new(name, Undone(f, undone.clone())).idempotency(Idempotency::Compensate)
    };
    let workflow = Workflow::builder("fan")
        .on_failure(OnFailure::Rollback)
        .step(compensated("discover", abc))
        .step(
            compensated("work", chained)
                .depends_on(&["discover"])
                .for_each(ItemSource::Output {
                    step: "discover".into(),
                    path: String::new(),
                })
                .waves(1),
        )
        .step(step("merge", fail).depends_on(&["work"]))
        .build()
        .unwrap();
    let store = Arc::new(MemStore::new());
    let status = run_to_end(&store, &workflow, json!({}), "r").await;
    assert_eq!(status.unwrap(), RunStatus::RolledBack);
    assert_eq!(
        *undone.lock().unwrap(),
        ["work[c]", "work[b]", "work[a]", "discover"],
        "in waves of one, each item depends on the one before"
    );
    assert_eq!(
        kinds(&store, "r", "work").await,
        ["started", "expanded"],
        "the template, whose work is its items, has nothing to undo"
    );
}

/// Appends `events` (step, kind, attempt, payload) to run `r` after its `seq - 1` first.
async fn append(store: &MemStore, seq: u32, events: Vec<(Option<&str>, EventKind, u32, Payload)>) {
    let events = (events.into_iter())
        .map(|(step, kind, attempt, payload)| NewEvent {
            step: step.map(Into::into),
            kind,
            attempt,
            at_ms: 1,
            instance: "dead".into(),
            payload,
        })
        .collect();
    store
        .append(&RunId::from("r"), Seq(seq), events)
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_resume_expands_once_whether_the_template_was_not_started_or_interrupted() {
    let workflow = Arc::new(fan(abc).build().unwrap());
    let definition = serde_json::to_vec(workflow.spec()).unwrap();
    for interrupted in [false, true] {
        let store = Arc::new(MemStore::new());
        let created = EventKind::RunCreated {
            workflow: "fan".into(),
        };
        let mut events = vec![
            (None, created, 0, Payload::Inline(definition.clone())),
            (Some("discover"), EventKind::Started, 1, Payload::Empty),
            (
                Some("discover"),
                EventKind::Succeeded,
                1,
                Payload::inline(json!(["a", "b", "c"]).to_string()),
            ),
        ];
        if interrupted {
            events.push((Some("work"), EventKind::Started, 1, Payload::Empty));
        }
        append(&store, 1, events).await;
        let engine = open(&store).await;
        let resumed = engine.resume(&workflow, RunId::from("r")).await.unwrap();
        assert_eq!(resumed.outcome().await.unwrap(), RunStatus::Succeeded);
        let expected: &[&str] = match interrupted {
            true => &["started", "interrupted", "started", "expanded"],
            false => &["started", "expanded"],
        };
        assert_eq!(kinds(&store, "r", "work").await, expected);
        assert_eq!(
            kinds(&store, "r", "work[b]").await,
            ["started", "succeeded"]
        );
        assert_eq!(output(&store, "r", "merge").await, json!(["A", "B", "C"]));
        // Once expanded, a resume grows the same graph from the log and has nothing to do.
        let engine = open(&store).await;
        let again = engine.resume(&workflow, RunId::from("r")).await.unwrap();
        assert_eq!(again.outcome().await.unwrap(), RunStatus::Succeeded);
        assert_eq!(kinds(&store, "r", "work").await, expected);
    }
}

#[tokio::test(start_paused = true)]
async fn a_resume_grows_the_graph_from_the_log_and_reruns_an_interrupted_item() {
    let workflow = Arc::new(fan(abc).build().unwrap());
    let definition = serde_json::to_vec(workflow.spec()).unwrap();
    let store = Arc::new(MemStore::new());
    let created = EventKind::RunCreated {
        workflow: "fan".into(),
    };
    let items = || Payload::inline(json!(["a", "b", "c"]).to_string());
    let events = vec![
        (None, created, 0, Payload::Inline(definition)),
        (Some("discover"), EventKind::Started, 1, Payload::Empty),
        (Some("discover"), EventKind::Succeeded, 1, items()),
        (Some("work"), EventKind::Started, 1, Payload::Empty),
        (Some("work"), EventKind::Expanded { items: 3 }, 1, items()),
        (Some("work[a]"), EventKind::Started, 1, Payload::Empty),
        (
            Some("work[a]"),
            EventKind::Succeeded,
            1,
            Payload::inline("A"),
        ),
        (Some("work[b]"), EventKind::Started, 1, Payload::Empty),
    ];
    append(&store, 1, events).await;
    let engine = open(&store).await;
    let resumed = engine.resume(&workflow, RunId::from("r")).await.unwrap();
    assert_eq!(resumed.outcome().await.unwrap(), RunStatus::Succeeded);
    assert_eq!(kinds(&store, "r", "work").await, ["started", "expanded"]);
    assert_eq!(
        kinds(&store, "r", "work[a]").await,
        ["started", "succeeded"]
    );
    assert_eq!(
        kinds(&store, "r", "work[b]").await,
        ["started", "interrupted", "started", "succeeded"]
    );
    assert_eq!(output(&store, "r", "merge").await, json!(["A", "B", "C"]));
}

#[tokio::test(start_paused = true)]
async fn an_operator_action_knows_the_steps_a_template_made() {
    let store = Arc::new(MemStore::new());
    let status = run_to_end(&store, &fan(abc).build().unwrap(), json!({}), "r").await;
    assert_eq!(status.unwrap(), RunStatus::Succeeded);
    let engine = open(&store).await;
    let refused = engine
        .override_step(
            &RunId::from("r"),
            "work[a]",
            apollo11_runtime::OverrideTarget::Skipped,
            "op",
            "why",
        )
        .await;
    assert!(
        matches!(refused, Err(EngineError::OverrideNotAllowed { ref step, .. }) if step == "work[a]"),
        "the item step is known (the run is finished): {refused:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_template_whose_source_was_skipped_is_skipped_and_its_dependents_go_on() {
    let workflow = Workflow::builder("fan")
        .step(step("discover", abc).condition("1 == 2"))
        .step(work(upper))
        .step(step("merge", merge).depends_on(&["work"]))
        .build()
        .unwrap();
    let store = Arc::new(MemStore::new());
    let status = run_to_end(&store, &workflow, json!({}), "r").await;
    assert_eq!(status.unwrap(), RunStatus::Succeeded);
    assert_eq!(kinds(&store, "r", "work").await, ["skipped"]);
    assert_eq!(
        output(&store, "r", "merge").await,
        json!([null, null, null])
    );
}

#[tokio::test(start_paused = true)]
async fn more_items_than_one_append_holds_start_at_once_and_fan_in() {
    const ITEMS: u32 = 2 * apollo11_core::limits::APPEND_BATCH_EVENTS_MAX + 1;
    fn many(_: &StepContext) -> Result<Output, StepError> {
        json_out(&json!((1..=ITEMS).collect::<Vec<_>>()))
    }
    fn count(ctx: &StepContext) -> Result<Output, StepError> {
        json_out(&json!(ctx.scope().outputs.len()))
    }
    let workflow = Workflow::builder("fan")
        .max_concurrency(ITEMS)
        .step(step("discover", many))
        .step(work(|ctx| json_out(ctx.item().unwrap())))
        .step(step("merge", count).depends_on(&["work"]))
        .build()
        .unwrap();
    let store = Arc::new(MemStore::new());
    let status = run_to_end(&store, &workflow, json!({}), "r").await;
    assert_eq!(status.unwrap(), RunStatus::Succeeded);
    assert_eq!(
        output(&store, "r", "merge").await,
        json!(ITEMS),
        "the merge reads each item's output (what it depends on), not the template's list \
         of items nor discover's output, which it does not name"
    );
}
