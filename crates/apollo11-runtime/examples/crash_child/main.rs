//! The child of `cargo xtask crash`. `run` drives 8 runs of a 50-step workflow on the file log,
//! or on a PostgreSQL schema under leases, until they finish (or the parent SIGKILLs it);
//! `check` verifies, after the last restart,
//! the invariants I1–I6 of docs/reliability.md from the two ledgers this program keeps
//! outside the log:
//!
//! - `steps.ledger`: one fsynced line `run step attempt pid` per step execution, written by
//!   the step itself before it does anything else;
//! - `acks.ledger`: one fsynced line `run seq kind` per event whose append was acknowledged.
//!
//! On the file log it also moves the runs of earlier generations out of the live segments
//! (`gc.rs`), so kills land during collects too.
//!
//! ```text
//! crash_child run   DIR GENERATION [URL SCHEMA OWNER]
//! crash_child check DIR GENERATIONS KILLS [URL SCHEMA]
//! ```
//!
//! With `URL SCHEMA` the events are in that PostgreSQL schema and `run` drives under leases
//! of `OWNER` lasting [`TTL`]: a run a killed child held is driven again at once by a child
//! of the same owner (the same epoch), and after the ttl by another (the next epoch).

use acked::{ledger_line, open_ledger, AckFile};
use apollo11_core::{Event, EventId};
use apollo11_log::{verify, FileLog, Options};
use apollo11_machine::StepStatus;
use apollo11_postgres::{PgOptions, PgStore};
use apollo11_runtime::{
    Engine, EngineConfig, EngineError, Idempotency, Leasing, Output, RetryPolicy, RunId, RunStatus,
    Step, StepBuilder, StepContext, StepError, Store, Timeout, Workflow,
};
use apollo11_store::{Acked, EventStore, StoreError};
use async_trait::async_trait;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod acked;
mod gc;
mod ledger;

const RUNS: usize = 8;
const STEPS: usize = 50;
const WIDTH: usize = 5;
/// The lease ttl on PostgreSQL: short, so a child of another owner takes a killed one's runs
/// over quickly.
const TTL: Duration = Duration::from_millis(500);

/// A PostgreSQL schema to keep the events in.
struct Pg {
    url: String,
    schema: String,
}

impl Pg {
    async fn open(&self) -> Result<PgStore, StoreError> {
        PgStore::open(PgOptions {
            schema: self.schema.clone(),
            application_name: self.schema.clone(),
            ..PgOptions::new(&self.url)
        })
        .await
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
    // Every kill can interrupt a step; an interrupted attempt spends no attempt, but the
    // budget stays larger than this test has kills all the same.
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

/// Segments of 64 KiB: each generation seals a few, which its successor's gc rewrites.
fn open_log(dir: &Path) -> Result<FileLog, StoreError> {
    let options = Options {
        segment_bytes_max: 64 << 10,
        ..Options::default()
    };
    FileLog::open(dir.join("log"), options)
}

fn config() -> EngineConfig {
    EngineConfig {
        snapshot_every_events: 500,
        ..EngineConfig::default()
    }
}

/// Drives this generation's runs to their end, on the file log, or on `pg` under leases of
/// `owner`.
async fn run(dir: &Path, generation: usize, pg: Option<(Pg, String)>) -> Result<(), EngineError> {
    let steps = Arc::new(open_ledger(&dir.join("steps.ledger")));
    let acks = AckFile(open_ledger(&dir.join("acks.ledger")));
    let Some((pg, owner)) = pg else {
        let log = Arc::new(open_log(dir)?);
        let store = Arc::new(Acked::new(log.clone(), acks));
        let engine = Engine::open(store, config()).await?;
        return tokio::select! {
            finished = finish_all(Arc::new(engine), generation, steps) => finished,
            failed = gc::collect_finished(log, generation) => Err(failed.into()),
        };
    };
    let store = Arc::new(Acked::new(Arc::new(pg.open().await?), acks));
    let leasing = Leasing::new(store.clone(), TTL)?;
    let config = EngineConfig {
        instance: owner,
        ..config()
    };
    let engine = Engine::open_leased(store, config, leasing).await?;
    finish_all(Arc::new(engine), generation, steps).await
}

async fn finish_all<S: Store>(
    engine: Arc<Engine<S>>,
    generation: usize,
    steps: Arc<Mutex<std::fs::File>>,
) -> Result<(), EngineError> {
    let wf = Arc::new(workflow(steps));
    let tasks: Vec<_> = run_ids(generation)
        .into_iter()
        .map(|id| tokio::spawn(finish(engine.clone(), wf.clone(), id)))
        .collect();
    for task in tasks {
        task.await.expect("a run's task panicked")?;
    }
    Ok(())
}

/// Starts the run, or resumes it, until it succeeds.
async fn finish<S: Store>(
    engine: Arc<Engine<S>>,
    wf: Arc<Workflow>,
    id: RunId,
) -> Result<(), EngineError> {
    loop {
        let handle = match engine.start(&wf, id.clone()).await {
            Err(EngineError::RunExists { .. }) => engine.resume(&wf, id.clone()).await,
            other => other,
        };
        let outcome = match handle {
            Ok(handle) => handle.outcome().await,
            Err(e) => Err(e),
        };
        match outcome {
            // The kills interrupted one step three times in a row: the engine paused the
            // run for a person, and the person knows the kills did it.
            Ok(RunStatus::Paused) => {
                let lifted = engine.unpause(&id, "crash-check", "the kills interrupted it");
                match lifted.await {
                    Err(e) if !held_elsewhere(&e) => return Err(e),
                    _ => {}
                }
            }
            Ok(status) => {
                assert_eq!(status, RunStatus::Succeeded, "{id}");
                return Ok(());
            }
            Err(e) if held_elsewhere(&e) => tokio::time::sleep(TTL / 5).await,
            Err(e) => return Err(e),
        }
    }
}
/// A run a killed child of another owner still holds (its lease not run out yet; or created
/// under it with nothing written, which `start` calls existing and `resume` unknown), or one
/// whose lease this child lost: it is driven again a moment later.
fn held_elsewhere(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::Leased { .. }
            | EngineError::UnknownRun { .. }
            | EngineError::Store(StoreError::LeaseLost { .. } | StoreError::Fenced { .. })
    )
}

/// Every event of `store`, in id order.
async fn all_events(store: &impl EventStore) -> Vec<Event> {
    let mut events: Vec<Event> = Vec::new();
    loop {
        let from = EventId(events.last().map_or(0, |e| e.event_id.0) + 1);
        let page = store.read_from(from, 10_000).await.expect("read_from");
        if page.is_empty() {
            return events;
        }
        events.extend(page);
    }
}

/// Checks I1-I6 over every generation; prints a summary; panics on a violation.
async fn check(dir: &Path, generations: usize, kills: u64, pg: Option<Pg>) {
    // The file log numbers events densely; PostgreSQL's ids come from transaction ids.
    let dense = pg.is_none();
    let events = match pg {
        None => {
            let report = verify(dir.join("log")).expect("verify runs");
            assert!(
                report.damage.is_none(),
                "I5/I2: damage in the log: {:?}",
                report.damage
            );
            let log = open_log(dir).expect("I5: the log opens");
            gc::all_events(&log, all_events(&log).await).await
        }
        Some(pg) => all_events(&pg.open().await.expect("I5: the store opens")).await,
    };
    assert!(
        events.windows(2).all(|w| match dense {
            true => w[1].event_id.0 == w[0].event_id.0 + 1,
            false => w[1].event_id.0 > w[0].event_id.0,
        }),
        "I6: event ids strictly increase (in the file log without gaps, live and archived together)"
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

/// A panic anywhere ends the child, one in a spawned task too (tokio would only print it and
/// go on, and the run would pass): the harness fails on a child that dies on its own (I5).
fn abort_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    abort_on_panic();
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: crash_child run DIR GENERATION [URL SCHEMA OWNER] | crash_child check DIR GENERATIONS KILLS [URL SCHEMA]";
    let dir = PathBuf::from(args.get(2).expect(usage));
    let number = |i: usize| {
        args.get(i)
            .and_then(|a| a.parse::<u64>().ok())
            .expect(usage)
    };
    let pg = |i: usize| {
        args.get(i).map(|url| Pg {
            url: url.clone(),
            schema: args.get(i + 1).expect(usage).clone(),
        })
    };
    match args.get(1).map(String::as_str) {
        Some("run") => {
            let pg = pg(4).map(|pg| (pg, args.get(6).expect(usage).clone()));
            if let Err(e) = run(&dir, number(3) as usize, pg).await {
                eprintln!("crash child failed: {e}");
                std::process::exit(2);
            }
        }
        Some("check") => check(&dir, number(3) as usize, number(4), pg(5)).await,
        _ => panic!("{usage}"),
    }
}
