//! Replay: a log of 1M events (1,000 runs × 1,000; 200k with --quick) is opened (scan, CRC,
//! decode of each event's head, index) and every run folded from it.

use crate::append::event;
use crate::report::Report;
use crate::Setup;
use anyhow::Result;
use apollo11_core::{EventId, RunId, Seq};
use apollo11_log::{Durability, FileLog, Options};
use apollo11_machine::RunState;
use apollo11_store::EventStore;
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

pub async fn run(setup: &Setup) -> Result<Report> {
    let per_run: u32 = if setup.quick { 200 } else { 1_000 };
    let dir = setup.dir.join("replay");
    let _ = std::fs::remove_dir_all(&dir);
    build(&dir, 1_000, per_run).await?;
    let events = 1_000 * u64::from(per_run);
    let bytes: u64 = std::fs::read_dir(dir.join("segments"))?
        .map(|e| e.map(|e| e.metadata().map(|m| m.len()).unwrap_or(0)))
        .sum::<Result<u64, _>>()?;
    let started = Instant::now();
    let log = FileLog::open_read_only(&dir)?;
    let open_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let runs = fold_all(&log).await?;
    let fold_s = started.elapsed().as_secs_f64();
    assert_eq!(runs, 1_000);
    let mut report = Report::new(
        "replay",
        &[
            "events",
            "open_events_per_s",
            "open_mb_per_s",
            "fold_events_per_s",
            "total_events_per_s",
        ],
    );
    report.header();
    report.row(vec![
        json!(events),
        json!(events as f64 / open_s),
        json!(bytes as f64 / open_s / 1e6),
        json!(events as f64 / fold_s),
        json!(events as f64 / (open_s + fold_s)),
    ]);
    std::fs::remove_dir_all(&dir)?;
    Ok(report)
}

/// `runs` runs of `per_run` events each, appended in batches of 100 (buffered: building the
/// log is not what is measured).
async fn build(dir: &Path, runs: u64, per_run: u32) -> Result<()> {
    let log = FileLog::open(
        dir,
        Options {
            durability: Durability::Buffered,
            ..Options::default()
        },
    )?;
    for round in 0..per_run / 100 {
        for r in 0..runs {
            let events = (0..100)
                .map(|i| event(u64::from(round) * 100 + i))
                .collect();
            log.append(&RunId(format!("run-{r:04}")), Seq(round * 100 + 1), events)
                .await?;
        }
    }
    Ok(())
}

/// Reads the whole log from the start in pages and folds every run; returns the run count.
async fn fold_all(log: &FileLog) -> Result<usize> {
    let mut states: HashMap<RunId, RunState> = HashMap::new();
    let mut from = EventId(1);
    loop {
        let page = log.read_from(from, 10_000).await?;
        let Some(last) = page.last() else { break };
        from = EventId(last.event_id.0 + 1);
        for e in &page {
            states
                .entry(e.run_id.clone())
                .or_insert_with(|| RunState::new(e.run_id.clone()))
                .apply(e);
        }
    }
    Ok(states.len())
}
