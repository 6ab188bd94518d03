//! Cold segments: what zstd saves on the logs of the two examples (`examples/five-stage`, a
//! pipeline of five shell steps, and `examples/ops-runbook`, 102 shell steps) and of the
//! replay scenario's log (1,000 runs of 1,000 events; 200 with --quick), and what it costs a
//! replay. Each log is written with its real steps (the examples run through the engine with
//! their shell steps, from a copy of their folder) or by the replay scenario's builder, then
//! replayed twice in the same run: every segment plain, then every sealed one compressed
//! (`FileLog::compress_cold`), each time opened read-only and every run folded on one
//! thread per core, the files in the page cache both times; the fastest of at least three
//! replays each.

use crate::catalog::Scenario;
use crate::replay::{buffered, build_with, fold_all};
use crate::report::Report;
use crate::Setup;
use anyhow::{ensure, Result};
use apollo11_log::{FileLog, Options};
use apollo11_runtime::{Engine, EngineConfig, RunId, RunStatus};
use apollo11_shell::run_folder;
use apollo11_shell::{definition, shell};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// The examples: name, runs (and with --quick), segment size. A five-stage run logs about
/// 3.5 KB, an ops-runbook run about 37 KB, so their segments are small enough for a few
/// dozen runs to seal several; each is then compressed alone, which understates what 1 MiB
/// frames of a full segment give.
const EXAMPLES: [(&str, u32, u32, u64); 2] = [
    ("five-stage", 32, 8, 16 * 1024),
    ("ops-runbook", 16, 3, 64 * 1024),
];
/// Segments of the replay log: 16 MiB, so that all but one of its segments are sealed.
const REPLAY_SEGMENT_BYTES: u64 = 16 * 1024 * 1024;

pub async fn run(setup: &Setup) -> Result<Report> {
    let mut report = Report::new(Scenario::Cold);
    report.header();
    let root = setup.dir.join("cold");
    for (example, runs, quick_runs, segment_bytes) in EXAMPLES {
        let dir = root.join(example);
        let runs = if setup.quick { quick_runs } else { runs };
        run_example(&dir, example, runs, segment_bytes).await?;
        measure(&mut report, example, &dir.join("data"), segment_bytes)?;
    }
    let per_run: u32 = if setup.quick { 200 } else { 1_000 };
    let dir = root.join("replay");
    let options = options(REPLAY_SEGMENT_BYTES);
    build_with(&dir, 1_000, 1..=per_run, options).await?;
    measure(&mut report, "replay", &dir, REPLAY_SEGMENT_BYTES)?;
    report.note(format!(
        "segments of 16 KiB (five-stage) and 64 KiB (ops-runbook), {} MiB for the replay log; \
         each sealed segment compressed in frames of 1 MiB (zstd level 3, checksums on)",
        REPLAY_SEGMENT_BYTES >> 20
    ));
    std::fs::remove_dir_all(&root)?;
    Ok(report)
}

/// Options to write a log to measure, with segments of `segment_bytes_max`.
fn options(segment_bytes_max: u64) -> Options {
    Options {
        segment_bytes_max,
        ..buffered()
    }
}

/// `runs` runs of the example `name` on segments of `segment_bytes`, one after another (the
/// runbook's runs share its hosts' state files), on a copy of its folder in `dir`
/// (its steps write their work files next to their workflow), the log in `dir/data`.
async fn run_example(dir: &Path, name: &str, runs: u32, segment_bytes: u64) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    let folder = dir.join("workflow");
    copy_dir(&Path::new("examples").join(name), &folder)?;
    let declared = definition::load(&folder.join("workflow.toml")).map_err(anyhow::Error::msg)?;
    // With its parameters' defaults: the runbook's hosts made into their steps.
    let spec =
        definition::instantiate(&declared, &Default::default()).map_err(anyhow::Error::msg)?;
    let data = std::path::absolute(dir.join("data"))?;
    let log = FileLog::open(&data, options(segment_bytes))?;
    let engine = Engine::open(std::sync::Arc::new(log), EngineConfig::default()).await?;
    let workflow = Arc::new(shell::workflow(&spec, &data)?);
    for r in 0..runs {
        let run = format!("{name}-{r:03}");
        run_folder::create(&data, &run, &spec).map_err(|e| anyhow::Error::msg(e.to_string()))?;
        let status = engine.start(&workflow, RunId(run)).await?.outcome().await?;
        ensure!(
            status == RunStatus::Succeeded,
            "a {name} run ended {status:?}"
        );
    }
    engine.close().await;
    Ok(())
}

pub fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Replays the log in `dir` plain, compresses its sealed segments, replays it again; one row.
fn measure(report: &mut Report, name: &str, dir: &Path, segment_bytes: u64) -> Result<()> {
    let (events, plain_s) = best_replay(dir)?;
    let log = FileLog::open(dir, options(segment_bytes))?;
    let started = Instant::now();
    let compressed = log.compress_cold(0)?;
    let compress_s = started.elapsed().as_secs_f64();
    drop(log);
    let (cold_events, cold_s) = best_replay(dir)?;
    ensure!(
        cold_events == events,
        "{name}: {cold_events} events replayed, {events} expected"
    );
    ensure!(
        !compressed.is_empty(),
        "{name}: no sealed segment to compress"
    );
    let plain: u64 = compressed.iter().map(|c| c.plain_bytes).sum();
    let stored: u64 = compressed.iter().map(|c| c.stored_bytes).sum();
    report.row(
        name,
        vec![
            json!(name),
            json!(events),
            json!(compressed.len()),
            json!(plain as f64 / 1e6),
            json!(stored as f64 / 1e6),
            json!(plain as f64 / stored as f64),
            json!(plain as f64 / compress_s / 1e6),
            json!(events as f64 / plain_s),
            json!(events as f64 / cold_s),
            json!(cold_s / plain_s),
        ],
    );
    Ok(())
}

/// The fastest of at least three replays, and of as many as a second holds (a small log's
/// replay takes a millisecond, which one lost time slice would double).
fn best_replay(dir: &Path) -> Result<(u64, f64)> {
    let started = Instant::now();
    let mut best = replay(dir)?;
    for n in 1.. {
        if n >= 3 && started.elapsed().as_secs_f64() >= 1.0 {
            break;
        }
        let (events, seconds) = replay(dir)?;
        best = (events, best.1.min(seconds));
    }
    Ok(best)
}

/// Opens the log read-only and folds every run; returns the events and the seconds taken.
fn replay(dir: &Path) -> Result<(u64, f64)> {
    let started = Instant::now();
    let log = FileLog::open_read_only(dir)?;
    let parts = fold_all(&log)?;
    let seconds = started.elapsed().as_secs_f64();
    ensure!(parts.iter().any(|p| !p.is_empty()), "no run folded");
    Ok((log.recovery().events, seconds))
}
