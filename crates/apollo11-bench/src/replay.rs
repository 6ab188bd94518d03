//! Replay: a log of 1M events (1,000 runs × 1,000; 200k with --quick), each run a real
//! history (`RunCreated`, then steps that start and succeed, every event carrying 200 bytes),
//! opened (index files, or a scan with CRCs) and every run folded (`fold`: read back and
//! applied; `read`, apart: read back and decoded only); against a naive replay in the same run:
//! read each segment file whole, check each record's CRC, decode the whole event, fold into
//! a `HashMap`. The naive reader knows the record framing of docs/log-format.md and nothing
//! else of the log.

use crate::catalog::Scenario;
use crate::report::Report;
use crate::Setup;
use anyhow::{bail, Result};
use apollo11_core::{Event, EventId, EventKind, EventRef, Payload, RunId, Seq, StepName};
use apollo11_log::{Durability, FileLog, Options};
use apollo11_machine::RunState;
use apollo11_store::{EventStore, NewEvent};
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// Event `seq` of a run: `RunCreated`, then each step `Started` and `Succeeded`; 200 bytes of
/// payload each.
pub fn history_event(seq: u32) -> NewEvent {
    let step = (seq >= 2).then(|| StepName(format!("step-{:04}", (seq - 2) / 2)));
    let kind = match seq {
        1 => EventKind::RunCreated {
            workflow: "replay".into(),
        },
        s if s % 2 == 0 => EventKind::Started,
        _ => EventKind::Succeeded,
    };
    NewEvent {
        step,
        kind,
        attempt: 1,
        at_ms: 1_700_000_000_000 + u64::from(seq),
        instance: "bench".into(),
        payload: Payload::Inline(vec![b'p'; 200]),
    }
}

pub async fn run(setup: &Setup) -> Result<Report> {
    let per_run: u32 = if setup.quick { 200 } else { 1_000 };
    let dir = setup.dir.join("replay");
    let _ = std::fs::remove_dir_all(&dir);
    build(&dir, 1_000, 1..=per_run).await?;
    let events = 1_000 * u64::from(per_run);
    let bytes = segment_bytes(&dir)?;
    let mut report = Report::new(Scenario::Replay);
    report.header();
    let started = Instant::now();
    let log = FileLog::open_read_only(&dir)?;
    let open_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let read = read_all(&log, |_| ()).await?;
    let read_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let parts = fold_all(&log)?;
    let runs = parts.iter().map(HashMap::len).sum::<usize>();
    let fold_s = started.elapsed().as_secs_f64();
    drop(parts);
    if read != events {
        bail!("read {read} events back, {events} expected");
    }
    drop(log);
    let started = Instant::now();
    let naive_runs = naive(&dir)?;
    let naive_s = started.elapsed().as_secs_f64();
    if runs != 1_000 || naive_runs != runs {
        bail!("replay folded {runs} runs, the naive replay {naive_runs}; 1000 expected");
    }
    let total_s = open_s + fold_s;
    report.row(
        "log",
        vec![
            json!(events),
            json!(events as f64 / open_s),
            json!(events as f64 / read_s),
            json!(events as f64 / fold_s),
            json!(events as f64 / total_s),
            json!(bytes as f64 / total_s / 1e6),
            json!(events as f64 / naive_s),
            json!(naive_s / total_s),
        ],
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(report)
}

/// Total bytes of the log's segment files.
pub fn segment_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir.join("segments"))? {
        total += entry?.metadata()?.len();
    }
    Ok(total)
}

/// `runs` runs, each given the events `seqs` of its history, appended in batches of 100
/// (buffered: building the log is not what is measured).
pub async fn build(dir: &Path, runs: u64, seqs: std::ops::RangeInclusive<u32>) -> Result<()> {
    build_with(dir, runs, seqs, buffered()).await
}

/// [`build`] on a log opened with `options`.
pub async fn build_with(
    dir: &Path,
    runs: u64,
    seqs: std::ops::RangeInclusive<u32>,
    options: Options,
) -> Result<()> {
    let log = FileLog::open(dir, options)?;
    let (first, last) = (*seqs.start(), *seqs.end());
    for batch_start in (first..=last).step_by(100) {
        let batch_end = (batch_start + 99).min(last);
        for r in 0..runs {
            let events = (batch_start..=batch_end).map(history_event).collect();
            log.append(&RunId(format!("run-{r:04}")), Seq(batch_start), events)
                .await?;
        }
    }
    Ok(())
}

/// Options to build logs to measure: no fsync (building them is not what is measured).
pub fn buffered() -> Options {
    Options {
        durability: Durability::Buffered,
        ..Options::default()
    }
}

/// The log in `dir`, opened without fsync: for building logs to measure.
pub fn buffered_log(dir: &Path) -> Result<FileLog> {
    Ok(FileLog::open(dir, buffered())?)
}

/// Reads the whole log from the start in pages, handing each event to `each`, borrowed;
/// returns how many events were read.
async fn read_all(log: &FileLog, mut each: impl FnMut(&EventRef<'_>) + Send) -> Result<u64> {
    let (mut from, mut read) = (EventId(1), 0);
    let mut count = |e: &EventRef<'_>| {
        read += 1;
        each(e);
    };
    while let Some(last) = log.scan_from(from, 10_000, &mut count).await? {
        from = EventId(last.0 + 1);
    }
    Ok(read)
}

/// Folds every run, on one thread per core: each thread folds its share of the runs into a
/// map of its own.
pub fn fold_all(log: &FileLog) -> Result<Vec<HashMap<String, RunState>>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut parts: Vec<HashMap<String, RunState>> = (0..threads).map(|_| HashMap::new()).collect();
    let mut visitors: Vec<_> = parts
        .iter_mut()
        .map(|states| move |e: &EventRef<'_>| fold(states, e))
        .collect();
    log.scan_runs(&mut visitors)?;
    drop(visitors);
    Ok(parts)
}

/// Folds `e` into its run's state.
fn fold(states: &mut HashMap<String, RunState>, e: &EventRef<'_>) {
    if let Some(state) = states.get_mut(e.run_id) {
        state.apply_ref(e);
        return;
    }
    let mut state = RunState::new(RunId(e.run_id.to_owned()));
    state.apply_ref(e);
    states.insert(e.run_id.to_owned(), state);
}

/// The naive replay: each segment read whole; per record `[len u32][crc u32][kind u8 …]`
/// after the 24-byte segment header, the CRC checked over the length and the body, and event
/// records decoded whole with bincode and folded.
fn naive(dir: &Path) -> Result<usize> {
    let mut names: Vec<_> = std::fs::read_dir(dir.join("segments"))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    names.retain(|p| p.extension().is_some_and(|x| x == "seg"));
    names.sort();
    let mut states = HashMap::new();
    for path in names {
        let bytes = std::fs::read(&path)?;
        let mut at = 24;
        while at + 8 <= bytes.len() {
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into()?) as usize;
            if len == 0 {
                break;
            }
            let body = &bytes[at + 8..at + 8 + len];
            let mut crc = crc32fast::Hasher::new();
            crc.update(&bytes[at..at + 4]);
            crc.update(body);
            if crc.finalize() != u32::from_le_bytes(bytes[at + 4..at + 8].try_into()?) {
                bail!("{}: checksum mismatch at {at}", path.display());
            }
            if body[0] == 1 {
                let (event, _): (Event, usize) =
                    bincode::serde::decode_from_slice(&body[1..], bincode::config::standard())?;
                fold(&mut states, &event.view());
            }
            at += 8 + len;
        }
    }
    Ok(states.len())
}
