//! The inspector: status now and at an event, the run list (re-reading only changed runs),
//! the plan, events by page, the pinned definition and step payloads, and their JSON.

use apollo11_core::{EventId, Idempotency, OnFailure, Payload, RunId, Seq, StepSpec, WorkflowSpec};
use apollo11_machine::{History, StepStatus};
use apollo11_runtime::inspect::{Pause, PlanStep, RunFilter};
use apollo11_runtime::{EngineError, Inspector, RunStatus};
use apollo11_store::{
    BlobStore, EventStore, IdGaps, MemStore, NewEvent, RunSummary, Snapshot, SnapshotStore,
    StoreError,
};
use async_trait::async_trait;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// A MemStore that counts the runs it reads whole, and lists none while `hidden` (as a
/// store would once its runs were removed).
#[derive(Default)]
struct Counting {
    store: MemStore,
    run_reads: AtomicUsize,
    hidden: AtomicBool,
}

#[async_trait]
impl EventStore for Counting {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        self.store.append(run_id, expected_seq, events).await
    }
    async fn read_run(
        &self,
        run_id: &RunId,
        from_seq: Seq,
    ) -> Result<Vec<apollo11_core::Event>, StoreError> {
        self.run_reads.fetch_add(1, Ordering::Relaxed);
        self.store.read_run(run_id, from_seq).await
    }
    async fn read_from(
        &self,
        from: EventId,
        max_events: u32,
    ) -> Result<Vec<apollo11_core::Event>, StoreError> {
        self.store.read_from(from, max_events).await
    }
    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        if self.hidden.load(Ordering::Relaxed) {
            return Ok(Vec::new());
        }
        self.store.list_runs().await
    }
    async fn last_event_id(&self) -> Result<EventId, StoreError> {
        self.store.last_event_id().await
    }
}

#[async_trait]
impl SnapshotStore for Counting {
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.store.save_snapshot(snapshot).await
    }
    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        self.store.load_snapshot().await
    }
}

#[async_trait]
impl BlobStore for Counting {
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<apollo11_core::BlobRef, StoreError> {
        self.store.put_blob(bytes).await
    }
    async fn get_blob(&self, blob: &apollo11_core::BlobRef) -> Result<Vec<u8>, StoreError> {
        self.store.get_blob(blob).await
    }
}

/// `a`, then `b` after it; pause on failure, one attempt each.
fn spec(name: &str) -> WorkflowSpec {
    let once = |s: StepSpec| {
        s.with_retry(apollo11_core::RetryPolicy {
            max_attempts: 1,
            ..Default::default()
        })
    };
    WorkflowSpec::new(
        name,
        OnFailure::Pause,
        vec![
            once(StepSpec::new("a", &[], Idempotency::Natural)),
            once(StepSpec::new("b", &["a"], Idempotency::Keyed)),
        ],
    )
}

pub(crate) fn created(run: &str, workflow: &str, at_ms: u64) -> History {
    let definition = Payload::inline(serde_json::to_vec(&spec(workflow)).unwrap());
    History::new(run).at(at_ms).created(workflow, definition)
}

pub(crate) async fn append(store: &impl EventStore, history: History) -> Vec<EventId> {
    let run = history.run_id().clone();
    let last = store.list_runs().await.unwrap();
    let seq = last
        .iter()
        .find(|s| s.run_id == run)
        .map_or(0, |s| s.last_seq.0);
    let events = history.into_events().into_iter().skip(seq as usize);
    let events: Vec<NewEvent> = events.map(NewEvent::from).collect();
    store.append(&run, Seq(seq + 1), events).await.unwrap()
}

fn inspector<S: apollo11_runtime::Store>(store: S) -> (Arc<S>, Inspector<S>) {
    let store = Arc::new(store);
    (store.clone(), Inspector::new(store))
}

#[tokio::test]
async fn status_at_an_event_compares_ids_on_a_store_whose_ids_have_gaps() {
    let (store, inspector) = inspector(MemStore::with_id_gaps(IdGaps::Even));
    append(store.as_ref(), created("other", "wf", 1_000)).await;
    let run = created("r", "wf", 2_000)
        .started("a")
        .succeeded("a", "{\"rows\":3}");
    let ids = append(store.as_ref(), run).await;
    assert_eq!(ids, [EventId(4), EventId(6), EventId(8)]);
    let r = RunId::from("r");
    let events_at = |at: u64| {
        let inspector = &inspector;
        let r = &r;
        async move {
            inspector
                .status(r, Some(EventId(at)))
                .await
                .map(|v| v.events)
        }
    };
    assert_eq!(inspector.status(&r, None).await.unwrap().events, 3);
    assert_eq!(events_at(8).await.unwrap(), 3);
    assert_eq!(events_at(7).await.unwrap(), 2, "7 is a gap: up to 6");
    assert_eq!(events_at(4).await.unwrap(), 1);
    let before = events_at(3).await.unwrap_err();
    assert!(
        matches!(
            before,
            EngineError::BeforeRun {
                at: EventId(3),
                begins: EventId(4),
                ..
            }
        ),
        "{before:?}"
    );
    let view = inspector.status(&r, Some(EventId(6))).await.unwrap();
    assert_eq!(
        (
            view.state,
            view.event_id,
            view.steps[0].state,
            view.steps[0].attempt
        ),
        (RunStatus::Running, EventId(6), StepStatus::Running, 1)
    );
    let unknown = inspector.status(&RunId::from("nope"), None).await;
    assert!(matches!(unknown, Err(EngineError::UnknownRun { .. })));
}

#[tokio::test]
async fn a_paused_run_says_why_what_is_allowed_and_serializes_steps_by_name() {
    let (store, inspector) = inspector(MemStore::new());
    let run = created("r", "wf", 1_000)
        .started("a")
        .failed("a", "disk full", true);
    append(store.as_ref(), run).await;
    let view = inspector.status(&RunId::from("r"), None).await.unwrap();
    assert_eq!(view.state, RunStatus::Paused);
    assert_eq!(
        view.paused,
        Some(Pause::StepFailed {
            step: "a".into(),
            attempts: 1,
            error: Some("disk full".into()),
            class: Some("error".into()),
            stopped: Some("no attempt left (1 of 1 for class error)".into()),
        })
    );
    assert_eq!(view.order, ["a", "b"]);
    assert_eq!(view.allowed.get("resume"), Some(&false));
    assert_eq!(view.allowed.get("pause"), Some(&true));
    assert_eq!(
        view.refused.keys().copied().collect::<Vec<_>>(),
        ["resume"],
        "one reason per action refused"
    );
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(json["state"], "paused");
    assert_eq!(json["steps"]["a"]["state"], "failed");
    assert_eq!(json["steps"]["a"]["log"]["attempt"], 1);
    assert_eq!(json["steps"]["b"]["log"], serde_json::Value::Null);
    assert_eq!(json["paused"]["cause"], "step_failed");
    let named = view.map_logs(|run, step, log| format!("{run}/{step}/{}", log.attempt));
    let renamed = serde_json::to_value(&named).unwrap();
    assert_eq!(
        renamed["steps"]["a"]["log"], "r/a/1",
        "each log named by the front end"
    );
    assert_eq!(renamed["steps"]["b"]["log"], serde_json::Value::Null);
    let mut unnamed = json.clone();
    unnamed["steps"]["a"]["log"] = renamed["steps"]["a"]["log"].clone();
    assert_eq!(renamed, unnamed, "nothing but the logs changes");
}

#[tokio::test]
async fn the_run_list_filters_orders_newest_first_and_rereads_only_changed_runs() {
    let (store, inspector) = inspector(Counting::default());
    append(store.as_ref(), created("old", "wf", 1_000).started("a")).await;
    append(store.as_ref(), created("new", "other", 5_000)).await;
    let all = inspector.runs(&RunFilter::all()).await.unwrap();
    let ids: Vec<_> = all.runs.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, ["new", "old"], "newest first");
    assert_eq!((all.runs[1].steps, all.runs[1].steps_done), (2, 0));
    let reads = store.run_reads.load(Ordering::Relaxed);
    inspector.runs(&RunFilter::all()).await.unwrap();
    assert_eq!(
        store.run_reads.load(Ordering::Relaxed),
        reads,
        "nothing changed: no run read"
    );
    append(
        store.as_ref(),
        created("old", "wf", 1_000).started("a").succeeded("a", ""),
    )
    .await;
    let wf = inspector
        .runs(&RunFilter::all().workflow("wf"))
        .await
        .unwrap();
    assert_eq!(
        store.run_reads.load(Ordering::Relaxed),
        reads + 1,
        "only the changed run is read again"
    );
    assert_eq!((wf.runs.len(), wf.runs[0].steps_done), (1, 1));
    let running = RunFilter::all().state(RunStatus::Succeeded);
    assert!(inspector.runs(&running).await.unwrap().runs.is_empty());
}

#[tokio::test]
async fn a_page_of_runs_is_newest_first_after_its_cursor_and_runs_gone_from_the_store_are_forgotten(
) {
    let (store, inspector) = inspector(Counting::default());
    for (run, at) in [("a", 1_000), ("b", 2_000), ("c", 2_000), ("d", 3_000)] {
        append(store.as_ref(), created(run, "wf", at)).await;
    }
    append(store.as_ref(), created("x", "other", 2_500)).await;
    let ids = |rows: Vec<apollo11_runtime::inspect::RunRow>| -> Vec<String> {
        rows.into_iter().map(|r| r.run_id.0).collect()
    };
    let wf = RunFilter::all().workflow("wf");
    let first = inspector.runs_page(&wf, None, 2).await.unwrap();
    assert_eq!(
        ids(first.clone()),
        ["d", "c"],
        "by creation, then id, descending"
    );
    let after = Some((first[1].created_at, first[1].run_id.as_str()));
    let second = inspector.runs_page(&wf, after, 2).await.unwrap();
    assert_eq!(ids(second), ["b", "a"]);
    let all = inspector
        .runs_page(&RunFilter::all(), None, 10)
        .await
        .unwrap();
    assert_eq!(ids(all), ["d", "x", "c", "b", "a"]);
    store.hidden.store(true, Ordering::Relaxed);
    let gone = inspector
        .runs_page(&RunFilter::all(), None, 10)
        .await
        .unwrap();
    assert!(
        gone.is_empty(),
        "rows of runs the store no longer lists are dropped"
    );
    store.hidden.store(false, Ordering::Relaxed);
    let reads = store.run_reads.load(Ordering::Relaxed);
    assert_eq!(
        inspector.runs(&RunFilter::all()).await.unwrap().runs.len(),
        5
    );
    assert_eq!(
        store.run_reads.load(Ordering::Relaxed),
        reads + 5,
        "forgotten rows are read again"
    );
}

#[tokio::test]
async fn an_unreadable_run_is_set_apart_and_the_others_are_listed() {
    let (store, inspector) = inspector(MemStore::new());
    append(store.as_ref(), created("good", "wf", 1_000)).await;
    let garbage = History::new("bad").created("wf", Payload::inline("not json"));
    append(store.as_ref(), garbage).await;
    let list = inspector.runs(&RunFilter::all()).await.unwrap();
    assert_eq!(list.runs.len(), 1);
    assert_eq!(list.unreadable.len(), 1);
    assert_eq!(list.unreadable[0].run_id.as_str(), "bad");
    assert!(matches!(
        list.unreadable[0].error,
        EngineError::BadDefinition { .. }
    ));
}

#[tokio::test]
async fn the_plan_marks_an_interrupted_attempt_then_runs_it_again() {
    let (store, inspector) = inspector(MemStore::new());
    append(store.as_ref(), created("r", "wf", 1_000).started("a")).await;
    let plan = inspector.plan(&RunId::from("r")).await.unwrap();
    assert_eq!(plan.state, RunStatus::Running);
    assert_eq!(plan.interrupted, ["a".into()]);
    assert_eq!(
        plan.steps,
        [
            PlanStep::Fail {
                step: "a".into(),
                attempt: 1,
                interrupted: true
            },
            PlanStep::Wait { ms: 1_000 },
            PlanStep::Start {
                step: "a".into(),
                attempt: 2
            },
        ],
        "one attempt only, but the interruption spends none"
    );
    assert_eq!(plan.run_state_after, RunStatus::Running);
    assert_eq!(plan.paused, None);
    assert!(plan.lines[0].starts_with("mark a attempt 1 as interrupted"));
    let again = created("r2", "wf", 1_000)
        .started("a")
        .failed("a", "x", true);
    append(
        store.as_ref(),
        again.overridden("a", apollo11_core::OverrideTarget::Pending, "op", "retry"),
    )
    .await;
    let plan = inspector.plan(&RunId::from("r2")).await.unwrap();
    assert_eq!(plan.rerun, ["a".into()]);
    assert_eq!(plan.lines, ["rerun a as attempt 2"]);
}

#[tokio::test]
async fn the_plan_pauses_a_run_whose_step_would_be_interrupted_a_third_time_in_a_row() {
    let (store, inspector) = inspector(MemStore::new());
    let twice = created("r", "wf", 1_000)
        .started("a")
        .interrupted("a")
        .started("a")
        .interrupted("a");
    append(store.as_ref(), twice.started("a")).await;
    let plan = inspector.plan(&RunId::from("r")).await.unwrap();
    let reason = apollo11_machine::interruptions_reason("a", 3);
    assert_eq!(
        plan.steps,
        [
            PlanStep::Fail {
                step: "a".into(),
                attempt: 3,
                interrupted: true
            },
            PlanStep::Pause {
                step: "a".into(),
                reason: reason.clone()
            },
            PlanStep::Finish {
                status: RunStatus::Paused
            }
        ]
    );
    assert_eq!(plan.run_state_after, RunStatus::Paused);
    assert!(matches!(&plan.paused, Some(Pause::Operator { reason: r, .. }) if *r == reason));
    assert_eq!(plan.lines[1], format!("pause the run: {reason}"));
}

#[tokio::test]
async fn events_come_by_page_with_flat_kind_fields_and_payloads_as_json() {
    let (store, inspector) = inspector(MemStore::new());
    let run = created("r", "wf", 1_000)
        .started("a")
        .succeeded("a", "{\"rows\":3}");
    append(store.as_ref(), run.started("b").failed("b", "boom", false)).await;
    let r = RunId::from("r");
    let page = inspector.events(&r, EventId(0), 2).await.unwrap();
    assert_eq!(page.events.len(), 2);
    assert_eq!(page.next_after, Some(EventId(2)));
    let rest = inspector.events(&r, EventId(2), 10).await.unwrap();
    assert_eq!(rest.events.len(), 3);
    assert_eq!(rest.next_after, None);
    let json: Vec<_> = rest
        .events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(json[0]["payload"]["rows"], 3);
    assert_eq!(
        (json[2]["kind"].as_str(), json[2]["error"].as_str()),
        (Some("failed"), Some("boom"))
    );
    assert_eq!(json[2]["retryable"], false);
    let first = serde_json::to_value(&page.events[0]).unwrap();
    assert_eq!(first["workflow"], "wf");
    assert!(inspector
        .events(&RunId::from("nope"), EventId(0), 1)
        .await
        .is_err());
}

#[tokio::test]
async fn the_definition_and_step_payloads_come_back_as_pinned_and_recorded() {
    let (store, inspector) = inspector(MemStore::new());
    let run = created("r", "wf", 1_000).started("a").succeeded("a", "out");
    append(store.as_ref(), run).await;
    let r = RunId::from("r");
    assert_eq!(inspector.definition(&r).await.unwrap(), spec("wf"));
    assert_eq!(
        inspector.step_payload(&r, "a").await.unwrap(),
        Some(b"out".to_vec())
    );
    assert_eq!(inspector.step_payload(&r, "b").await.unwrap(), None);
    let unknown = inspector.step_payload(&r, "zz").await;
    assert!(matches!(unknown, Err(EngineError::UnknownStep { .. })));
}
