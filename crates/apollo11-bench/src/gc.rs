//! `gc`'s swap: moving half the runs of the replay scenario's log (1,000 runs of 1,000
//! events, interleaved in batches of 100, so every sealed segment holds runs to move; 200
//! events a run with --quick) out of its 16 MiB segments (`FileLog::collect`; runs with an
//! event in the live segment stay), next to the baseline of writing the runs it moved to an
//! archive file only (`FileLog::write_archive`, what every collect does first), each on its
//! own copy of the log, the files in the page cache.
//! Reported: both times and their ratio, the pause (the index's write lock held for the
//! renames, the directory sync and the index swap: no append acknowledged meanwhile), and the
//! live segments' bytes before and after.

use crate::catalog::Scenario;
use crate::cold::copy_dir;
use crate::replay::{buffered, build_with};
use crate::report::Report;
use crate::Setup;
use anyhow::{ensure, Result};
use apollo11_log::{FileLog, Options, RunId};
use serde_json::json;
use std::time::Instant;

/// Segments of 16 MiB, as the replay log's in `cold`.
const SEGMENT_BYTES: u64 = 16 * 1024 * 1024;

pub async fn run(setup: &Setup) -> Result<Report> {
    let mut report = Report::new(Scenario::Gc);
    report.header();
    let root = setup.dir.join("gc");
    let _ = std::fs::remove_dir_all(&root);
    let per_run: u32 = if setup.quick { 200 } else { 1_000 };
    let options = Options {
        segment_bytes_max: SEGMENT_BYTES,
        ..buffered()
    };
    let (baseline, swapped) = (root.join("archive-only"), root.join("collect"));
    build_with(&baseline, 1_000, 1..=per_run, options.clone()).await?;
    copy_dir(&baseline.join("segments"), &swapped.join("segments"))?;
    let runs: Vec<RunId> = (0..1_000)
        .step_by(2)
        .map(|r| RunId(format!("run-{r:04}")))
        .collect();

    let log = FileLog::open(&swapped, options.clone())?;
    let started = Instant::now();
    let collected = log.collect(&runs)?;
    let collect_s = started.elapsed().as_secs_f64();
    drop(log);
    // The baseline archives the runs the collect moved (those with an event in the live
    // segment stay).
    let log = FileLog::open(&baseline, options)?;
    let started = Instant::now();
    let written = log.write_archive(&collected.moved)?;
    let archive_s = started.elapsed().as_secs_f64();
    drop(log);
    ensure!(
        collected.events == written.events && !collected.moved.is_empty(),
        "collect moved {} events, the archive holds {}",
        collected.events,
        written.events
    );
    let mb = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    report.row(
        "collect",
        vec![
            json!(u64::from(per_run) * 1_000),
            json!(collected.moved.len()),
            json!(collected.left.len()),
            json!(collected.segments),
            json!(mb(collected.live_bytes_before)),
            json!(mb(collected.live_bytes_after)),
            json!(archive_s),
            json!(collect_s),
            json!(collect_s / archive_s),
            json!(collected.pause.as_secs_f64() * 1e3),
        ],
    );
    report.note(format!(
        "1,000 runs of {per_run} events interleaved in batches of 100 over segments of {} MiB; \
         the even-numbered half asked for, those with an event in the live segment left; each \
         measure on its own copy of the log, durability buffered for \
         the build, gc's own syncs (archive, manifest, rewritten segments, directories) made",
        SEGMENT_BYTES >> 20
    ));
    std::fs::remove_dir_all(&root)?;
    Ok(report)
}
