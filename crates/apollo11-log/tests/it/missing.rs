//! T16: committed data missing at the end of the log. The last segment truncated, zeroed or
//! deleted well before its end, after a clean close (its index file is the evidence) or after
//! a crash with a snapshot saved in fsync durability (the snapshot is): every open refuses
//! with the evidence, nothing on disk changes, `verify` reports the damage before and after a
//! refused writer, and `repair` accepts the loss so that the log opens cleanly again.

use crate::common::{append, created, read_everything, remove_index_files, sized};
use apollo11_core::EventId;
use apollo11_log::{plan_repair, repair, verify, FileLog, Options, RealFs};
use apollo11_store::{EventStore, Snapshot, SnapshotStore, StoreError};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Clone, Copy, Debug)]
enum Damage {
    /// `set_len` to the middle of the segment's data.
    Truncate,
    /// Zeros from the middle of the data to the end of the file.
    Zero,
    /// The segment file removed (its index file, if any, left).
    Delete,
    /// The segment file and its index file removed.
    DeleteWithIndex,
}

#[derive(Clone, Copy, Debug)]
enum Evidence {
    /// The log was closed cleanly: the last segment has its index file.
    CleanClose,
    /// The log crashed (no index files) after saving a snapshot of its last event.
    Snapshot,
}

fn options() -> Options {
    Options {
        segment_bytes_max: 8 * 1024,
        ..Options::default()
    }
}

/// Every file under `dir` with its bytes.
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(contents(&path));
        } else {
            out.insert(path.display().to_string(), std::fs::read(&path).unwrap());
        }
    }
    out
}

/// A log of `events` events of 300 bytes, closed cleanly, with the evidence asked for.
async fn build(dir: &Path, events: u32, evidence: Evidence) {
    let log = FileLog::open(dir, options()).unwrap();
    append(&log, "r", vec![created()]).await;
    for _ in 1..events {
        append(&log, "r", vec![sized("s", 300)]).await;
    }
    if let Evidence::Snapshot = evidence {
        log.save_snapshot(Snapshot {
            watermark: EventId(u64::from(events)),
            state: b"all of it".to_vec(),
        })
        .await
        .unwrap();
    }
    drop(log);
    if let Evidence::Snapshot = evidence {
        remove_index_files(&RealFs, dir);
    }
}

fn damage(dir: &Path, how: Damage) {
    let last = verify(dir).unwrap().segments.pop().unwrap();
    let path = dir.join(&last.file);
    let middle = last.bytes / 2;
    match how {
        Damage::Truncate => std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(middle)
            .unwrap(),
        Damage::Zero => {
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[middle as usize..].fill(0);
            std::fs::write(&path, bytes).unwrap();
        }
        Damage::Delete => std::fs::remove_file(&path).unwrap(),
        Damage::DeleteWithIndex => {
            std::fs::remove_file(&path).unwrap();
            let _ = std::fs::remove_file(path.with_extension("idx"));
        }
    }
}

fn assert_missing(result: Result<FileLog, StoreError>, case: &str) -> (String, u64) {
    match result {
        Err(StoreError::Corrupted {
            file,
            offset,
            reason,
        }) => {
            assert!(
                reason.contains("committed data is missing"),
                "{case}: {reason}"
            );
            assert!(
                !reason.contains("apollo11"),
                "{case}: no CLI advice: {reason}"
            );
            (file, offset)
        }
        Err(other) => panic!("{case}: wrong error: {other}"),
        Ok(log) => panic!(
            "{case}: opened with {} events: the loss went unnoticed",
            log.recovery().events
        ),
    }
}

async fn one_case(segments: u32, how: Damage, evidence: Evidence) {
    let case = format!("{segments} segment(s), {how:?}, {evidence:?}");
    let dir = tempfile::tempdir().unwrap();
    let events = if segments == 1 { 12 } else { 60 };
    build(dir.path(), events, evidence).await;
    let written = verify(dir.path()).unwrap();
    assert_eq!(
        written.segments.len() > 1,
        segments > 1,
        "{case}: {written:?}"
    );
    damage(dir.path(), how);
    // What another process left in the lock file: a refused writer must not replace it.
    std::fs::write(dir.path().join("LOCK"), "pid 1 (an earlier writer)").unwrap();
    let before = contents(dir.path());
    let reported = verify(dir.path()).unwrap();
    let found = reported
        .damage
        .clone()
        .unwrap_or_else(|| panic!("{case}: verify missed it: {reported:?}"));
    assert!(
        !reported.is_clean() && reported.torn_tail.is_none(),
        "{case}"
    );
    let refused = assert_missing(FileLog::open(dir.path(), options()), &case);
    assert_eq!(refused, (found.file.clone(), found.offset), "{case}");
    assert_missing(FileLog::open_read_only(dir.path()), &case);
    assert_eq!(
        contents(dir.path()),
        before,
        "{case}: a refused open changed files"
    );
    assert_eq!(verify(dir.path()).unwrap().damage, Some(found), "{case}");
    let plan = plan_repair(dir.path()).unwrap();
    assert_eq!(
        contents(dir.path()),
        before,
        "{case}: planning changed files"
    );
    let repaired = repair(dir.path()).unwrap();
    assert!(repaired.damage.is_some(), "{case}");
    assert_did_what_was_planned(dir.path(), &plan, &repaired, &case);
    assert!(
        repaired.events_kept < u64::from(events),
        "{case}: {repaired:?}"
    );
    let report = verify(dir.path()).unwrap();
    assert!(report.is_clean(), "{case}: after repair: {report:?}");
    let log = FileLog::open(dir.path(), options()).unwrap();
    assert_eq!(log.recovery().events, repaired.events_kept, "{case}");
    assert_eq!(read_everything(&log).await.unwrap(), repaired.events_kept);
    let next = append(&log, "again", vec![created()]).await;
    assert_eq!(next, [repaired.events_kept + 1], "{case}: ids continue");
    assert_eq!(
        log.load_snapshot().await.unwrap(),
        None,
        "{case}: stale snapshot"
    );
}

/// The repair did what its plan said, nothing else: the same damage, events and drops, each
/// cut segment cut where planned, its bytes kept when some were not zeros.
fn assert_did_what_was_planned(
    dir: &Path,
    plan: &apollo11_log::RepairPlan,
    repaired: &apollo11_log::RepairReport,
    case: &str,
) {
    assert_eq!(plan.damage, repaired.damage, "{case}");
    assert_eq!(plan.events_kept, repaired.events_kept, "{case}");
    assert_eq!(plan.drops, repaired.dropped, "{case}");
    let kept = plan.cuts.iter().filter(|c| c.kept).count();
    assert_eq!(
        kept,
        repaired.kept_in.len(),
        "{case}: {plan:?} {repaired:?}"
    );
    for c in &plan.cuts {
        let size = std::fs::metadata(dir.join(&c.file)).map(|m| m.len()).ok();
        let expected = (c.at > 0).then_some(c.at);
        assert_eq!(size, expected, "{case}: {c:?}");
    }
    for dropped in &plan.drops {
        assert!(!dir.join(dropped).exists(), "{case}: {dropped} left");
    }
}

#[tokio::test]
async fn a_last_segment_cut_short_after_a_clean_close_refuses_every_open_until_repair() {
    for segments in [1, 3] {
        for how in [Damage::Truncate, Damage::Zero, Damage::Delete] {
            one_case(segments, how, Evidence::CleanClose).await;
        }
    }
    one_case(3, Damage::DeleteWithIndex, Evidence::CleanClose).await;
}

#[tokio::test]
async fn a_last_segment_cut_short_under_an_fsync_snapshot_refuses_every_open_until_repair() {
    for segments in [1, 3] {
        for how in [Damage::Truncate, Damage::Zero, Damage::DeleteWithIndex] {
            one_case(segments, how, Evidence::Snapshot).await;
        }
    }
}

#[tokio::test]
async fn a_torn_tail_with_no_evidence_against_it_is_still_cut() {
    // The same damage with nothing proving the data was committed: what a crash leaves.
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 12, Evidence::CleanClose).await;
    remove_index_files(&RealFs, dir.path());
    damage(dir.path(), Damage::Truncate);
    let log = FileLog::open(dir.path(), options()).unwrap();
    assert!(log.recovery().torn.is_some());
    assert!(log.recovery().events < 12);
}

#[tokio::test]
async fn a_buffered_snapshot_past_the_end_is_no_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let buffered = Options {
        durability: apollo11_log::Durability::Buffered,
        ..options()
    };
    let log = FileLog::open(dir.path(), buffered.clone()).unwrap();
    append(&log, "r", vec![created(), sized("s", 10), sized("t", 10)]).await;
    log.save_snapshot(Snapshot {
        watermark: EventId(3),
        state: vec![3],
    })
    .await
    .unwrap();
    drop(log);
    remove_index_files(&RealFs, dir.path());
    damage(dir.path(), Damage::Truncate);
    // In buffered mode a power loss may take acknowledged events the snapshot covered.
    let log = FileLog::open(dir.path(), buffered).unwrap();
    assert!(log.recovery().events < 3);
    assert_eq!(log.load_snapshot().await.unwrap(), None);
    assert_eq!(log.last_event_id().await.unwrap().0, log.recovery().events);
}

#[tokio::test]
async fn an_unreadable_last_header_after_the_log_rolled_to_it_is_damage_not_a_torn_write() {
    // A crash while creating a segment can tear its header, but the segment before it gets
    // its index file only after the new header and directory entry were synced.
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 60, Evidence::CleanClose).await;
    let segments = verify(dir.path()).unwrap().segments;
    let last = dir.path().join(&segments.last().unwrap().file);
    std::fs::remove_file(last.with_extension("idx")).unwrap();
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.fill(0);
    std::fs::write(&last, bytes).unwrap();
    let before = contents(dir.path());
    let case = "unreadable last header";
    let (file, offset) = assert_missing(FileLog::open(dir.path(), options()), case);
    assert_eq!(
        (file.as_str(), offset),
        (segments.last().unwrap().file.as_str(), 0)
    );
    assert_missing(FileLog::open_read_only(dir.path()), case);
    assert_eq!(contents(dir.path()), before);
    // Without that index file, it is what a crash leaves: the segment is cut whole.
    let previous = dir.path().join(&segments[segments.len() - 2].file);
    std::fs::remove_file(previous.with_extension("idx")).unwrap();
    let log = FileLog::open(dir.path(), options()).unwrap();
    assert_eq!(log.recovery().events, 60 - segments.last().unwrap().events);
}
