//! Where a try runs and what becomes of one the engine did not see end: a step records its
//! place before its work acts; an interrupted or timed-out try is settled by its step (stop
//! it, salvage its marker) before its failure is appended, and a place the step cannot
//! reach pauses the run instead of running the step again.

use crate::scripted::{kinds, open};
use apollo11_core::{EventKind, Payload, Seq, Usage};
use apollo11_runtime::{
    Idempotency, Leftover, OnFailure, Output, Place, RetryPolicy, RunId, RunStatus, Settled, Step,
    StepBuilder, StepContext, StepError, Timeout, TryKind, Workflow, PLACE_REQUESTS_MAX,
};
use apollo11_store::{EventStore, MemStore};
use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MARKER: &[u8] = br#"{"chunks_done":7}"#;

/// What the step saw, shared with the test.
#[derive(Default)]
struct Seen {
    /// Kinds of the step's events right after `placed` returned.
    durable_when_placed: Vec<&'static str>,
    /// Every `settle` call.
    settled: Vec<Leftover>,
    /// `previous_payload` of every attempt after the first.
    previous: Vec<Option<Vec<u8>>>,
}

/// A step whose first attempt records a place and then works "elsewhere" forever; later
/// attempts succeed. `settle` answers with `answer`.
struct Remote {
    store: Arc<MemStore>,
    seen: Arc<Mutex<Seen>>,
    answer: Settled,
}

#[async_trait]
impl Step for Remote {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        if ctx.attempt > 1 {
            let mut seen = self.seen.lock().unwrap();
            seen.previous.push(ctx.previous_payload.clone());
            return Ok(Output::text("done"));
        }
        ctx.placed("host-a", "job-1").await?;
        let durable = kinds(&self.store, ctx.run_id.as_str(), ctx.step.as_str()).await;
        self.seen.lock().unwrap().durable_when_placed = durable;
        // The work goes on where the engine cannot see it, whatever the cancel says.
        tokio::time::sleep(Duration::from_secs(3_600)).await;
        Ok(Output::empty())
    }

    async fn settle(&self, leftover: &Leftover) -> Settled {
        self.seen.lock().unwrap().settled.push(leftover.clone());
        self.answer.clone()
    }
}

fn workflow(code: Remote, timeout: Timeout) -> Workflow {
    Workflow::builder("remote")
        .on_failure(OnFailure::Pause)
        .step(
            StepBuilder::new("job", code)
                .idempotency(Idempotency::Checkpoint)
                .retry(RetryPolicy {
                    max_attempts: 3,
                    initial_ms: 10,
                    ..RetryPolicy::default()
                })
                .timeout(timeout),
        )
        .build()
        .unwrap()
}

fn remote(store: &Arc<MemStore>, seen: &Arc<Mutex<Seen>>, answer: Settled) -> Remote {
    Remote {
        store: store.clone(),
        seen: seen.clone(),
        answer,
    }
}

/// Starts the run, lets attempt 1 record its place, and kills the engine's driver as a crash
/// would; then resumes it with a new engine whose step settles with `answer`.
async fn crash_then_resume(answer: Settled) -> (Arc<MemStore>, Arc<Mutex<Seen>>, RunStatus) {
    let store = Arc::new(MemStore::new());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let run = RunId::from("r");
    {
        let first = open(&store).await;
        let code = remote(
            &store,
            &seen,
            Settled::Stopped {
                marker: None,
                used: None,
            },
        );
        let wf = Arc::new(workflow(code, Timeout::None));
        let handle = first.start(&wf, run.clone()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        handle.abort();
        let _ = handle.outcome().await;
    }
    let second = open(&store).await;
    let wf = Arc::new(workflow(remote(&store, &seen, answer), Timeout::None));
    let status = second
        .resume(&wf, run)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    (store, seen, status)
}

/// The payload of run `r`'s first event of this kind.
async fn payload_of(store: &MemStore, kind: &EventKind) -> Payload {
    let events = store.read_run(&RunId::from("r"), Seq(1)).await.unwrap();
    events
        .into_iter()
        .find(|e| e.kind == *kind)
        .expect("the event that ended the try")
        .payload
}

fn the_place() -> Option<Place> {
    Some(Place {
        host: "host-a".into(),
        handle: "job-1".into(),
    })
}

#[tokio::test(start_paused = true)]
async fn an_interrupted_try_is_settled_with_its_place_and_its_marker_reaches_the_next_attempt() {
    let marker = Settled::Stopped {
        marker: Some(MARKER.to_vec()),
        used: None,
    };
    let (store, seen, status) = crash_then_resume(marker).await;
    assert_eq!(status, RunStatus::Succeeded);
    let payload = payload_of(&store, &EventKind::Interrupted).await;
    assert_eq!(payload, Payload::inline(MARKER));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.durable_when_placed, ["started", "placed"]);
    assert_eq!(seen.settled.len(), 1, "settled once, before the failure");
    let leftover = &seen.settled[0];
    assert_eq!((leftover.attempt, leftover.kind), (1, TryKind::Run));
    assert_eq!(leftover.place, the_place());
    assert_eq!(seen.previous, [Some(MARKER.to_vec())]);
}

#[tokio::test(start_paused = true)]
async fn what_a_settled_try_used_is_recorded_just_before_its_interruption() {
    let used = Usage {
        isolation: "cgroup".into(),
        wall_ms: 1_000,
        cpu_user_ms: Some(700),
        cpu_system_ms: Some(20),
        peak_memory_bytes: Some(64 << 20),
        memory_limit_bytes: Some(256 << 20),
    };
    let answer = Settled::Stopped {
        marker: None,
        used: Some(used.clone()),
    };
    let (store, seen, status) = crash_then_resume(answer).await;
    assert_eq!(status, RunStatus::Succeeded);
    let events = store.read_run(&RunId::from("r"), Seq(1)).await.unwrap();
    let ended = (events.iter())
        .position(|e| e.kind == EventKind::Interrupted)
        .expect("attempt 1 was interrupted");
    assert_eq!(events[ended - 1].kind, EventKind::AttemptUsage(used));
    assert_eq!(events[ended - 1].attempt, 1);
    let leftover = &seen.lock().unwrap().settled[0];
    let started = events.iter().find(|e| e.kind == EventKind::Started);
    assert_eq!(Some(leftover.started_ms), started.map(|e| e.at_ms));
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_try_pauses_the_run_naming_its_place_and_nothing_reruns_until_resumed() {
    let answer = Settled::Unreachable {
        reason: "host-a is not this host".into(),
    };
    let (store, seen, status) = crash_then_resume(answer).await;
    assert_eq!(status, RunStatus::Paused);
    assert!(seen.lock().unwrap().previous.is_empty(), "no attempt 2");
    let run = RunId::from("r");
    let events = store.read_run(&run, Seq(1)).await.unwrap();
    let reason = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::RunPaused { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .expect("the run was paused");
    for part in [
        "attempt 1 of step `job`",
        "host-a (job-1)",
        "is not this host",
    ] {
        assert!(reason.contains(part), "{part} not in {reason}");
    }
    assert_eq!(
        kinds(&store, "r", "job").await,
        ["started", "placed", "interrupted"]
    );
    // A person made sure it stopped and resumes: attempt 2 runs, with no marker.
    let engine = open(&store).await;
    let wf = Arc::new(workflow(
        remote(
            &store,
            &seen,
            Settled::Stopped {
                marker: None,
                used: None,
            },
        ),
        Timeout::None,
    ));
    engine.unpause(&run, "op", "job-1 is gone").await.unwrap();
    let status = engine
        .resume(&wf, run)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Succeeded);
    assert_eq!(seen.lock().unwrap().previous, [None]);
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_try_is_settled_before_its_failure_and_its_marker_reaches_the_retry() {
    let store = Arc::new(MemStore::new());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let engine = open(&store).await;
    let marker = Settled::Stopped {
        marker: Some(MARKER.to_vec()),
        used: None,
    };
    let wf = Arc::new(workflow(remote(&store, &seen, marker), Timeout::Fixed(500)));
    let handle = engine.start(&wf, RunId::from("r")).await.unwrap();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Succeeded);
    let timeout = EventKind::AttemptFailed(apollo11_core::AttemptFailure::new(
        apollo11_core::FailureClass::Timeout,
        "timeout",
        true,
    ));
    let payload = payload_of(&store, &timeout).await;
    assert_eq!(payload, Payload::inline(MARKER));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.settled.len(), 1);
    assert_eq!(seen.settled[0].place, the_place());
    assert_eq!(seen.previous, [Some(MARKER.to_vec())]);
}

/// A step that records its place, then succeeds.
struct PlacedThenDone;

#[async_trait]
impl Step for PlacedThenDone {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        ctx.placed("host-a", &format!("job-{}", ctx.step)).await?;
        Ok(Output::empty())
    }
}

#[tokio::test(start_paused = true)]
async fn more_tries_than_the_place_requests_that_may_wait_at_once_all_record_their_place() {
    let width = 3 * PLACE_REQUESTS_MAX;
    let mut builder = Workflow::builder("placed-wide").max_concurrency(width as u32);
    for i in 0..width {
        let step = StepBuilder::new(&format!("s{i:03}"), PlacedThenDone);
        builder = builder.step(step.idempotency(Idempotency::Natural));
    }
    let wf = Arc::new(builder.build().unwrap());
    let store = Arc::new(MemStore::new());
    let engine = open(&store).await;
    let run = RunId::from("r");
    let handle = engine.start(&wf, run.clone()).await.unwrap();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Succeeded);
    let events = store.read_run(&run, Seq(1)).await.unwrap();
    let placed = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Placed { .. }));
    assert_eq!(placed.count(), width, "every try's place was recorded");
}

/// A step that records its place with what runs there (its step name's worth of `detail`
/// bytes: `small` a few, `large` over the inline limit), then succeeds.
struct PlacedWithDetail;

fn detail_of(step: &str) -> Vec<u8> {
    let repeat = if step == "large" { 2_000 } else { 1 };
    format!(r#"{{"command":"{}"}}"#, "run ".repeat(repeat)).into_bytes()
}

#[async_trait]
impl Step for PlacedWithDetail {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        let detail = detail_of(ctx.step.as_str());
        ctx.placed_with("host-a", "job", detail).await?;
        Ok(Output::empty())
    }
}

#[tokio::test(start_paused = true)]
async fn what_a_try_runs_is_the_placed_events_payload_inline_or_as_a_blob() {
    let mut builder = Workflow::builder("placed-detail");
    for name in ["small", "large"] {
        let step = StepBuilder::new(name, PlacedWithDetail).idempotency(Idempotency::Natural);
        builder = builder.step(step);
    }
    let wf = Arc::new(builder.build().unwrap());
    let store = Arc::new(MemStore::new());
    let engine = open(&store).await;
    let run = RunId::from("r");
    let handle = engine.start(&wf, run.clone()).await.unwrap();
    assert_eq!(handle.outcome().await.unwrap(), RunStatus::Succeeded);
    let events = store.read_run(&run, Seq(1)).await.unwrap();
    let placed: Vec<_> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Placed { .. }))
        .collect();
    assert_eq!(placed.len(), 2);
    for e in placed {
        let step = e.step.as_ref().unwrap().as_str();
        let bytes = apollo11_store::resolve(store.as_ref(), &e.payload)
            .await
            .unwrap();
        assert_eq!(bytes, detail_of(step), "{step}");
        assert_eq!(matches!(e.payload, Payload::Blob(_)), step == "large");
    }
}
