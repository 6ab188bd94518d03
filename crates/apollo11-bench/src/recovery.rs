//! Recovery: `Engine::open` timed in a fresh process on a 1M-event log (200k with --quick),
//! first with no snapshot, then with a snapshot 500 events behind the end (the seed's
//! "latest snapshot + about 500 events"); resident memory per event once recovered; and the
//! seed's one-run replay: 500 steps averaging 3 events each.

use crate::catalog::Scenario;
use crate::replay::{buffered_log, build, history_event};
use crate::report::{child, resident_bytes, Report};
use crate::scheduler::workflow;
use crate::Setup;
use anyhow::{bail, Result};
use apollo11_core::{AttemptFailure, EventKind, FailureClass, RunId, Seq, StepName};
use apollo11_log::{FileLog, Options};
use apollo11_machine::RunState;
use apollo11_runtime::{Engine, EngineConfig, RunStatus};
use apollo11_store::{EventStore, NewEvent, SnapshotStore};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub async fn run(setup: &Setup) -> Result<Report> {
    let per_run: u32 = if setup.quick { 200 } else { 1_000 };
    let dir = setup.dir.join("recovery");
    let _ = std::fs::remove_dir_all(&dir);
    build(&dir, 1_000, 1..=per_run).await?;
    let mut report = Report::new(Scenario::Recovery);
    report.header();
    let events = 1_000 * u64::from(per_run);
    let cold = probe_child(&dir)?;
    report.row(
        "no_snapshot",
        vec![
            json!(format!("Engine::open, {events} events, no snapshot")),
            json!(events),
            json!(events),
            cold["recovery_ms"].clone(),
            json!(cold["resident_bytes"].as_f64().unwrap_or(0.0) / events as f64),
        ],
    );
    let watermark = snapshot(&dir).await?;
    build(&dir, 5, per_run + 1..=per_run + 100).await?;
    let events = events + 500;
    let warm = probe_child(&dir)?;
    report.row(
        "snapshot",
        vec![
            json!(format!("Engine::open, {events} events, snapshot")),
            json!(events),
            json!(events - watermark),
            warm["recovery_ms"].clone(),
            json!(warm["resident_bytes"].as_f64().unwrap_or(0.0) / events as f64),
        ],
    );
    std::fs::remove_dir_all(&dir)?;
    let (steps_events, replay_ms) = seed_replay(&setup.dir.join("seed-replay")).await?;
    report.row(
        "one_run",
        vec![
            json!("one run of 500 steps x 3 events: open + read + fold"),
            json!(steps_events),
            json!(null),
            json!(replay_ms),
            json!(null),
        ],
    );
    report.note(
        "Recovery is timed in a fresh process (page cache warm); resident bytes are \
         the process's RSS growth across `Engine::open`, divided by the events in the log."
            .into(),
    );
    Ok(report)
}

/// Makes the engine save a snapshot of the whole log: it drives one tiny run, and closing
/// snapshots what was appended; returns its watermark.
async fn snapshot(dir: &Path) -> Result<u64> {
    let log = Arc::new(FileLog::open(dir, Options::default())?);
    let engine = Engine::open(log.clone(), EngineConfig::default()).await?;
    let wf = Arc::new(workflow("trigger", 1, true, 1)?);
    let run = engine.start(&wf, RunId("snapshot-trigger".into())).await?;
    if run.outcome().await? != RunStatus::Succeeded {
        bail!("the snapshot trigger run did not succeed");
    }
    engine.close().await;
    let last = log.last_event_id().await?.0;
    match log.load_snapshot().await? {
        Some(s) if s.watermark.0 == last => Ok(last),
        other => bail!(
            "closing left a snapshot at {:?}, not at event {last}",
            other.map(|s| s.watermark)
        ),
    }
}

/// Runs this program as `--probe-recovery DIR` and reads its figures.
fn probe_child(dir: &Path) -> Result<Value> {
    child("--probe-recovery", &[&dir.display().to_string()])
}

/// The probe itself: opens an engine on `dir` and prints the time it took and how much the
/// resident set grew.
pub async fn probe(dir: &Path) -> Result<()> {
    let before = resident_bytes()?;
    let started = Instant::now();
    let log = Arc::new(FileLog::open(dir, Options::default())?);
    let engine = Engine::open(log, EngineConfig::default()).await?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let grown = resident_bytes()?.saturating_sub(before);
    println!("{}", json!({"recovery_ms": ms, "resident_bytes": grown}));
    engine.close().await;
    Ok(())
}

/// The seed's claim: one run of 500 steps, on average 3 events each (every other step fails
/// once and succeeds on its retry), replayed from a freshly opened log; (events, ms).
async fn seed_replay(dir: &Path) -> Result<(u64, f64)> {
    let _ = std::fs::remove_dir_all(dir);
    let mut events = vec![history_event(1)];
    for step in 0..500u32 {
        let name = StepName(format!("step-{step:03}"));
        let event = |kind, attempt| NewEvent {
            step: Some(name.clone()),
            kind,
            attempt,
            ..history_event(1)
        };
        if step % 2 == 1 {
            events.push(event(EventKind::Started, 1));
            events.push(event(
                EventKind::AttemptFailed(AttemptFailure::new(
                    FailureClass::Error,
                    "transient",
                    true,
                )),
                1,
            ));
        }
        let attempt = 1 + step % 2;
        events.push(event(EventKind::Started, attempt));
        events.push(event(EventKind::Succeeded, attempt));
    }
    let count = events.len() as u64;
    let run = RunId("seed".into());
    {
        let log = buffered_log(dir)?;
        for (i, chunk) in events.chunks(100).enumerate() {
            log.append(&run, Seq(i as u32 * 100 + 1), chunk.to_vec())
                .await?;
        }
    }
    let started = Instant::now();
    let log = FileLog::open_read_only(dir)?;
    let mut state = RunState::new(run.clone());
    for e in log.read_run(&run, Seq(1)).await? {
        state.apply(&e);
    }
    let ms = started.elapsed().as_secs_f64() * 1e3;
    if state.steps.len() != 500 {
        bail!(
            "the seed replay folded {} steps, 500 expected",
            state.steps.len()
        );
    }
    drop(log);
    std::fs::remove_dir_all(dir)?;
    Ok((count, ms))
}
