//! Lifecycle: a year of runs with retention on. 100,000 runs (10,000 with --quick) of 50
//! chained no-op steps (101 events each: about 10 million) driven by the engine on the
//! durable file log in waves of 1,000, spread over four workflows; every tenth wave (every
//! second with --quick) a gc runs beside the next wave on the engine's own log, as `serve`
//! does on its schedule: the retention policy (`keep_last` 1,000 per workflow) over the
//! inspector's list, then `FileLog::collect` of the runs it lets go. Against the baseline of
//! the same run, every event ever appended (what the live log would hold without gc), the
//! live segments after each gc and at their largest, checked against the bound stated in
//! the notes.

use crate::catalog::Scenario;
use crate::replay::segment_bytes;
use crate::report::Report;
use crate::scheduler::{close, workflow};
use crate::Setup;
use anyhow::{ensure, Result};
use apollo11_log::{FileLog, Options};
use apollo11_runtime::inspect::Retention;
use apollo11_runtime::{Engine, EngineConfig, Inspector, RunId, RunStatus, Workflow};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// The workflows runs are spread over, round robin.
const WORKFLOWS: [&str; 4] = ["etl", "report", "backup", "deploy"];
/// Steps of every run: 1 + 2 × 50 = 101 events.
const STEPS: usize = 50;
/// Runs started together.
const WAVE: usize = 1_000;
/// Runs of each workflow the policy keeps.
const KEEP_LAST: u32 = 1_000;
/// Segments of 16 MiB, so that runs leave the live log a segment at a time.
const SEGMENT_BYTES: u64 = 16 * 1024 * 1024;

/// The engine, its log, and the workflows to start runs of.
struct Fleet {
    engine: Arc<Engine<FileLog>>,
    log: Arc<FileLog>,
    workflows: Vec<Arc<Workflow>>,
}

pub async fn run(setup: &Setup) -> Result<Report> {
    let (runs, gc_every) = if setup.quick {
        (10_000, 2)
    } else {
        (100_000, 10)
    };
    let dir = setup.dir.join("lifecycle");
    let _ = std::fs::remove_dir_all(&dir);
    let options = Options {
        segment_bytes_max: SEGMENT_BYTES,
        ..Options::default()
    };
    let log = Arc::new(FileLog::open(&dir, options)?);
    let engine = Arc::new(Engine::open(log.clone(), EngineConfig::default()).await?);
    let workflows = (WORKFLOWS.iter())
        .map(|name| Ok(Arc::new(workflow(name, STEPS, true, 8)?)))
        .collect::<Result<Vec<_>>>()?;
    let fleet = Fleet {
        engine,
        log,
        workflows,
    };
    let mut report = Report::new(Scenario::Lifecycle);
    report.header();
    let (mut largest, mut steps_s, mut started) = (0u64, 0.0, Instant::now());
    let waves = runs / WAVE;
    for wave in 0..waves {
        let gc_now = wave > 0 && wave % gc_every == 0;
        largest = largest.max(segment_bytes(&dir)?);
        let driven = drive(&fleet, wave);
        let gc = if gc_now {
            let (gc, driven) = tokio::join!(collect(&fleet), driven);
            driven?;
            Some(gc?)
        } else {
            driven.await?;
            None
        };
        if let Some(gc) = gc {
            let done = wave * WAVE;
            steps_s = (gc_every * WAVE * STEPS) as f64 / started.elapsed().as_secs_f64();
            started = Instant::now();
            report.row(
                "gc",
                vec![
                    json!(done),
                    json!(done * (1 + 2 * STEPS)),
                    json!(mb(appended(&dir)?)),
                    json!(mb(gc.live_before)),
                    json!(mb(gc.live_after)),
                    json!(mb(archive_bytes(&dir)?)),
                    json!(gc.runs),
                    json!(gc.left),
                    json!(gc.seconds),
                    json!(gc.pause_ms),
                    json!(steps_s),
                    json!(null),
                    json!(null),
                ],
            );
        }
    }
    largest = largest.max(segment_bytes(&dir)?);
    let bound = bound(&dir, runs, gc_every)?;
    report.row("end", end_row(runs, &dir, largest, bound)?);
    report.note(format!(
        "{runs} runs of {STEPS} chained no-op steps over {} workflows, waves of {WAVE}, \
         keep_last {KEEP_LAST}, gc every {gc_every} waves beside the next one, segments of \
         {} MiB; the live log at its largest: {:.1} MiB, against the bound (runs kept + runs \
         of one gc interval, at the mean bytes a run, + 2 segments) {:.1} MiB; last steps/s \
         {steps_s:.0}",
        WORKFLOWS.len(),
        SEGMENT_BYTES >> 20,
        mb(largest),
        mb(bound),
    ));
    ensure!(
        largest <= bound,
        "the live log reached {largest} bytes, above its bound {bound}"
    );
    close(vec![fleet.engine]).await;
    std::fs::remove_dir_all(&dir)?;
    Ok(report)
}

/// The last row: every run done, the live log at its largest and its bound.
fn end_row(runs: usize, dir: &std::path::Path, largest: u64, bound: u64) -> Result<Vec<Value>> {
    let mut cells = vec![
        json!(runs),
        json!(runs * (1 + 2 * STEPS)),
        json!(mb(appended(dir)?)),
    ];
    cells.extend(std::iter::repeat_n(json!(null), 8));
    cells.extend([json!(mb(largest)), json!(mb(bound))]);
    Ok(cells)
}

/// Starts wave `wave`'s runs and waits until every one has succeeded.
async fn drive(fleet: &Fleet, wave: usize) -> Result<()> {
    let mut handles = Vec::with_capacity(WAVE);
    for r in wave * WAVE..(wave + 1) * WAVE {
        let wf = &fleet.workflows[r % fleet.workflows.len()];
        handles.push(fleet.engine.start(wf, RunId(format!("run-{r:06}"))).await?);
    }
    for handle in handles {
        ensure!(
            handle.outcome().await? == RunStatus::Succeeded,
            "a lifecycle run did not succeed"
        );
    }
    Ok(())
}

/// What one gc did.
struct Gc {
    runs: usize,
    /// Runs let go but left in the segment being written, for a later gc.
    left: usize,
    seconds: f64,
    pause_ms: f64,
    live_before: u64,
    live_after: u64,
}

/// The policy over the live runs, then the runs it lets go collected out of the live log
/// (on a blocking thread, as it writes and syncs files).
async fn collect(fleet: &Fleet) -> Result<Gc> {
    let started = Instant::now();
    let policy = Retention::new(None, Some(KEEP_LAST)).map_err(anyhow::Error::msg)?;
    let plan = Inspector::new(fleet.log.clone()).retention(&policy).await?;
    let ids: Vec<RunId> = plan.archive.iter().map(|row| row.run_id.clone()).collect();
    let log = fleet.log.clone();
    let collected = tokio::task::spawn_blocking(move || log.collect(&ids)).await??;
    Ok(Gc {
        runs: collected.moved.len(),
        left: collected.left.len(),
        seconds: started.elapsed().as_secs_f64(),
        pause_ms: collected.pause.as_secs_f64() * 1e3,
        live_before: collected.live_bytes_before,
        live_after: collected.live_bytes_after,
    })
}

/// The live log's bound: the runs the policy keeps and the runs of one gc interval, at the
/// mean bytes a run takes in the log (everything appended over every run), and two segments
/// (the one being written, and runs a gc could not take yet).
fn bound(dir: &std::path::Path, runs: usize, gc_every: usize) -> Result<u64> {
    let per_run = appended(dir)? / runs as u64;
    let held = WORKFLOWS.len() as u64 * u64::from(KEEP_LAST) + (gc_every * WAVE) as u64;
    Ok(held * per_run + 2 * SEGMENT_BYTES)
}

/// Every byte ever appended: the live segments and the archive files.
fn appended(dir: &std::path::Path) -> Result<u64> {
    Ok(segment_bytes(dir)? + archive_bytes(dir)?)
}

/// The archive files' bytes.
fn archive_bytes(dir: &std::path::Path) -> Result<u64> {
    let Ok(entries) = std::fs::read_dir(dir.join("archive")) else {
        return Ok(0);
    };
    let mut total = 0;
    for entry in entries {
        total += entry?.metadata()?.len();
    }
    Ok(total)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_row_fills_every_column_and_keeps_largest_and_bound() {
        let dir = tempfile::tempdir().expect("a temporary dir");
        std::fs::create_dir(dir.path().join("segments")).expect("segments");
        let mut report = Report::new(Scenario::Lifecycle);
        report.row(
            "end",
            end_row(10, dir.path(), 3 << 20, 5 << 20).expect("a row"),
        );
        let end = &report.rows[0].1;
        let at = |name| report.columns.iter().position(|c| *c == name).expect(name);
        assert_eq!(end[at("live_mb_largest")], json!(3.0));
        assert_eq!(end[at("bound_mb")], json!(5.0));
    }
}
