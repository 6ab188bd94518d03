//! The child of `cargo xtask crash`. `run` drives 8 runs of a 50-step workflow on the file log
//! until they finish (or the parent SIGKILLs it); `check` verifies, after the last restart,
//! the invariants I1–I6 of docs/reliability.md from the two ledgers this program keeps
//! outside the log:
//!
//! - `steps.ledger`: one fsynced line `run step attempt pid` per step execution, written by
//!   the step itself before it does anything else;
//! - `acks.ledger`: one fsynced line `run seq kind` per event whose append was acknowledged.
//!
//! ```text
//! crash_child run   DIR GENERATION
//! crash_child check DIR GENERATIONS KILLS
//! ```

use apollo11_core::{Event, EventId, Seq};
use apollo11_log::{verify, FileLog, Options};
use apollo11_machine::StepStatus;
use apollo11_runtime::{
    Engine, EngineConfig, EngineError, Idempotency, Output, RetryPolicy, RunId, RunStatus, Step,
    StepBuilder, StepContext, StepError, Timeout, Workflow,
};
use apollo11_store::{
    BlobStore, EventStore, NewEvent, RunSummary, Snapshot, SnapshotStore, StoreError,
};
use async_trait::async_trait;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod ledger;

const RUNS: usize = 8;
const STEPS: usize = 50;
const WIDTH: usize = 5;

/// Appends a line to a ledger file and fsyncs it.
fn ledger_line(file: &Mutex<std::fs::File>, line: &str) {
    let mut f = file.lock().unwrap();
    f.write_all(line.as_bytes())
        .and_then(|()| f.sync_data())
        .expect("ledger write");
}

fn open_ledger(path: &Path) -> Mutex<std::fs::File> {
    Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("ledger open"),
    )
}

/// The file log, recording every acknowledged append in the ack ledger.
struct Acked {
    log: FileLog,
    acks: Mutex<std::fs::File>,
}

#[async_trait]
impl EventStore for Acked {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        let kinds: Vec<&'static str> = events.iter().map(|e| e.kind.name()).collect();
        let ids = self.log.append(run_id, expected_seq, events).await?;
        let lines: String = kinds
            .iter()
            .enumerate()
            .map(|(i, k)| format!("{run_id} {} {k}\n", expected_seq.0 + i as u32))
            .collect();
        ledger_line(&self.acks, &lines);
        Ok(ids)
    }
    async fn read_run(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError> {
        self.log.read_run(run_id, from_seq).await
    }
    async fn read_from(&self, from: EventId, max_events: u32) -> Result<Vec<Event>, StoreError> {
        self.log.read_from(from, max_events).await
    }
    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.log.list_runs().await
    }
    async fn last_event_id(&self) -> Result<EventId, StoreError> {
        self.log.last_event_id().await
    }
}

#[async_trait]
impl SnapshotStore for Acked {
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.log.save_snapshot(snapshot).await
    }
    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        self.log.load_snapshot().await
    }
}

#[async_trait]
impl BlobStore for Acked {
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<apollo11_core::BlobRef, StoreError> {
        self.log.put_blob(bytes).await
    }
    async fn get_blob(&self, blob: &apollo11_core::BlobRef) -> Result<Vec<u8>, StoreError> {
        self.log.get_blob(blob).await
    }
}

/// Records its execution, then works for a few milliseconds.
struct Work {
    ledger: Arc<Mutex<std::fs::File>>,
}

#[async_trait]
impl Step for Work {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        ledger_line(
            &self.ledger,
            &format!(
                "{} {} {} {}\n",
                ctx.run_id,
                ctx.step,
                ctx.attempt,
                std::process::id()
            ),
        );
        let ms = 2 + ctx.idempotency_key.bytes().map(u64::from).sum::<u64>() % 12;
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(Output::text(format!("done by {}", std::process::id())))
    }
}

/// 50 steps in layers of 5, each step depending on every step of the layer before.
fn workflow(ledger: Arc<Mutex<std::fs::File>>) -> Workflow {
    let names: Vec<String> = (0..STEPS).map(|i| format!("s{i:02}")).collect();
    // Every kill can interrupt a step, and an interrupted attempt counts against its retry
    // budget (so a step that crashes its engine every time cannot loop forever): give steps
    // more attempts than this test has kills.
    let retry = RetryPolicy {
        max_attempts: 100_000,
        initial_ms: 5,
        max_ms: 50,
        ..RetryPolicy::default()
    };
    let mut builder = Workflow::builder("crash")
        .max_concurrency(WIDTH as u32)
        .defaults(retry, Timeout::None);
    for i in 0..STEPS {
        let layer = i / WIDTH;
        let deps: Vec<&str> = if layer == 0 {
            Vec::new()
        } else {
            names[(layer - 1) * WIDTH..layer * WIDTH]
                .iter()
                .map(String::as_str)
                .collect()
        };
        let step = StepBuilder::new(
            &names[i],
            Work {
                ledger: ledger.clone(),
            },
        )
        .idempotency(Idempotency::Keyed)
        .depends_on(&deps);
        builder = builder.step(step);
    }
    builder.build().expect("valid")
}

fn run_ids(generation: usize) -> Vec<RunId> {
    (0..RUNS)
        .map(|r| RunId(format!("g{generation:03}-r{r}")))
        .collect()
}

async fn run(dir: &Path, generation: usize) -> Result<(), EngineError> {
    let log = FileLog::open(
        dir.join("log"),
        Options {
            segment_bytes_max: 1 << 20,
            ..Options::default()
        },
    )?;
    let store = Arc::new(Acked {
        log,
        acks: open_ledger(&dir.join("acks.ledger")),
    });
    let engine = Engine::open(
        store,
        EngineConfig {
            snapshot_every_events: 500,
            ..EngineConfig::default()
        },
    )
    .await?;
    let wf = engine.register(workflow(Arc::new(open_ledger(&dir.join("steps.ledger")))));
    let mut handles = Vec::new();
    for id in run_ids(generation) {
        let handle = match engine.start(&wf, id.clone()).await {
            Err(EngineError::RunExists { .. }) => engine.resume(id).await?,
            other => other?,
        };
        handles.push(handle);
    }
    for h in handles {
        let status = h.outcome().await?;
        assert_eq!(status, RunStatus::Succeeded);
    }
    Ok(())
}

/// Checks I1-I6 over every generation; prints a summary; panics on a violation.
async fn check(dir: &Path, generations: usize, kills: u64) {
    let report = verify(dir.join("log")).expect("verify runs");
    assert!(
        report.damage.is_none(),
        "I5/I2: damage in the log: {:?}",
        report.damage
    );
    let log = FileLog::open(
        dir.join("log"),
        Options {
            segment_bytes_max: 1 << 20,
            ..Options::default()
        },
    )
    .expect("I5: the log opens");
    let events = log.read_from(EventId(1), u32::MAX).await.unwrap();
    assert!(
        events
            .windows(2)
            .all(|w| w[1].event_id.0 == w[0].event_id.0 + 1),
        "I6: event ids strictly increase without gaps"
    );
    let logged: BTreeSet<(String, u32, &str)> = events
        .iter()
        .map(|e| (e.run_id.0.clone(), e.seq.0, e.kind.name()))
        .collect();
    let acks = std::fs::read_to_string(dir.join("acks.ledger")).unwrap_or_default();
    for line in acks.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let key = (f[0].to_owned(), f[1].parse().unwrap(), f[2]);
        assert!(
            logged.contains(&(key.0.clone(), key.1, key.2)),
            "I1: acknowledged event {line} is not in the log"
        );
    }
    let ledger = std::fs::read_to_string(dir.join("steps.ledger")).unwrap_or_default();
    let executions = ledger::executions(&ledger).unwrap_or_else(|e| panic!("{e}"));
    let mut reruns = 0u64;
    for generation in 0..generations {
        for run_id in run_ids(generation) {
            let state =
                apollo11_machine::fold(&run_id, events.iter().filter(|e| e.run_id == run_id));
            for i in 0..STEPS {
                let step = format!("s{i:02}");
                let s = state.step(&step);
                assert_eq!(
                    s.status,
                    StepStatus::Succeeded,
                    "I4: {run_id}/{step} did not finish"
                );
                let attempts = executions
                    .get(&(run_id.0.clone(), step.clone()))
                    .map_or(&[][..], Vec::as_slice);
                let rerun = ledger::check_step(&run_id.0, &step, s.attempt, attempts)
                    .unwrap_or_else(|e| panic!("{e}"));
                assert!(
                    u64::from(rerun) <= kills,
                    "{run_id}/{step}: {} attempts with {kills} kills",
                    s.attempt
                );
                reruns += u64::from(rerun);
            }
        }
    }
    println!(
        "crash check: {} runs x {STEPS} steps finished, {} events, {} acknowledged appends checked, {reruns} reruns of interrupted steps after {kills} kills; I1-I6 hold",
        generations * RUNS,
        events.len(),
        acks.lines().count()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: crash_child run DIR GENERATION | crash_child check DIR GENERATIONS KILLS";
    let dir = PathBuf::from(args.get(2).expect(usage));
    let number = |i: usize| {
        args.get(i)
            .and_then(|a| a.parse::<u64>().ok())
            .expect(usage)
    };
    match args.get(1).map(String::as_str) {
        Some("run") => {
            if let Err(e) = run(&dir, number(3) as usize).await {
                eprintln!("crash child failed: {e}");
                std::process::exit(2);
            }
        }
        Some("check") => check(&dir, number(3) as usize, number(4)).await,
        _ => panic!("{usage}"),
    }
}
