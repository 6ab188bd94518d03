//! What `verify` reports beyond the segments: snapshots of another log, index files an open
//! would ignore, and blobs that are damaged, missing or of the wrong length, with the events
//! that refer to them.

use crate::common::{append, created, sized};
use apollo11_core::{BlobRef, EventId, EventKind, Payload, RunId, Seq};
use apollo11_log::{verify, BlobUse, FileLog};
use apollo11_store::{
    conformance::event, BlobStore, EventStore, NewEvent, Snapshot, SnapshotStore,
};
use std::path::Path;

/// A log of three events with snapshots at 1 and 3, named `run`.
async fn with_snapshots(dir: &Path, run: &str) {
    let log = FileLog::open(dir, crate::common::small()).unwrap();
    append(&log, run, vec![created()]).await;
    save(&log, 1, "one").await;
    append(&log, run, vec![sized("s", 10), sized("t", 10)]).await;
    save(&log, 3, "three").await;
}

async fn save(log: &FileLog, watermark: u64, state: &str) {
    log.save_snapshot(Snapshot {
        watermark: EventId(watermark),
        state: state.as_bytes().to_vec(),
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_snapshot_copied_from_another_log_is_never_loaded_and_verify_reports_it() {
    let (ours, theirs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    with_snapshots(ours.path(), "ours").await;
    with_snapshots(theirs.path(), "theirs").await;
    let name = "snapshots/00000000000000000003.snap";
    std::fs::copy(theirs.path().join(name), ours.path().join(name)).unwrap();
    let log = FileLog::open_read_only(ours.path()).unwrap();
    let loaded = log.load_snapshot().await.unwrap().unwrap();
    assert_eq!(
        (loaded.watermark, loaded.state),
        (EventId(1), b"one".to_vec()),
        "the foreign snapshot is skipped for an older one"
    );
    let report = verify(ours.path()).unwrap();
    assert!(!report.is_clean(), "{report:?}");
    let problems: Vec<_> = report
        .snapshots
        .iter()
        .filter_map(|s| Some((s.file.as_str(), s.problem.as_deref()?)))
        .collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].0, name);
    assert!(problems[0].1.contains("another log"), "{problems:?}");
    assert!(
        verify(theirs.path()).unwrap().is_clean(),
        "in its own log it is fine"
    );
    // A snapshot is a cache: repair removes a damaged one, and only that, even with the log
    // intact.
    drop(log);
    let plan = apollo11_log::plan_repair(ours.path()).unwrap();
    assert_eq!((plan.damage, plan.drops), (None, vec![name.to_owned()]));
    let repaired = apollo11_log::repair(ours.path()).unwrap();
    assert_eq!(repaired.dropped, [name]);
    assert!(verify(ours.path()).unwrap().is_clean());
    assert_eq!(
        apollo11_log::repair(ours.path()).unwrap(),
        apollo11_log::RepairReport {
            events_kept: 3,
            event_count: 3,
            ..Default::default()
        },
        "nothing more to do"
    );
}

#[tokio::test]
async fn verify_reports_index_files_an_open_ignores_and_stays_clean() {
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(dir.path(), crate::common::buffered()).unwrap();
    append(&log, "r", vec![created()]).await;
    for _ in 0..30 {
        append(&log, "r", vec![sized("s", 300)]).await;
    }
    drop(log);
    let segments = verify(dir.path()).unwrap().segments;
    assert!(segments.len() >= 2);
    let index = dir.path().join(&segments[0].file).with_extension("idx");
    let mut bytes = std::fs::read(&index).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 4;
    std::fs::write(&index, bytes).unwrap();
    let report = verify(dir.path()).unwrap();
    assert!(
        report.is_clean(),
        "an index file is derived data: {report:?}"
    );
    let ignored: Vec<_> = report.ignored_index_files.iter().collect();
    assert_eq!(ignored.len(), 1, "{ignored:?}");
    assert_eq!(ignored[0].file, segments[0].file.replace(".seg", ".idx"));
    assert!(ignored[0].reason.contains("checksum"), "{ignored:?}");
    // The next writing open scans that segment and indexes it anew.
    drop(FileLog::open(dir.path(), crate::common::buffered()).unwrap());
    assert!(verify(dir.path()).unwrap().ignored_index_files.is_empty());
    // Another segment's index file, intact, under this segment's name: it names another base.
    let second = dir.path().join(&segments[1].file).with_extension("idx");
    std::fs::copy(&index, &second).unwrap();
    let report = verify(dir.path()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    let ignored = &report.ignored_index_files;
    assert_eq!(ignored.len(), 1, "{ignored:?}");
    assert_eq!(ignored[0].file, segments[1].file.replace(".seg", ".idx"));
    assert!(
        ignored[0].reason.contains("names base event id"),
        "{ignored:?}"
    );
    let log = FileLog::open_read_only(dir.path()).unwrap();
    assert_eq!(crate::common::read_everything(&log).await.unwrap(), 31);
}

fn with_blob(step: &str, blob: &BlobRef) -> NewEvent {
    event(
        Some(step),
        EventKind::Started,
        1,
        Payload::Blob(blob.clone()),
    )
}

#[tokio::test]
async fn verify_checks_every_blob_and_every_reference_naming_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(dir.path(), crate::common::small()).unwrap();
    let damaged = log.put_blob(vec![1; 5000]).await.unwrap();
    let missing = log.put_blob(vec![2; 5000]).await.unwrap();
    let short = log.put_blob(vec![3; 5000]).await.unwrap();
    let unused = log.put_blob(vec![4; 5000]).await.unwrap();
    let fine = log.put_blob(vec![5; 5000]).await.unwrap();
    let wrong_length = BlobRef {
        bytes: 4999,
        ..short.clone()
    };
    append(&log, "a", vec![created(), with_blob("x", &damaged)]).await;
    append(&log, "b", vec![created(), with_blob("y", &missing)]).await;
    append(
        &log,
        "b",
        vec![with_blob("z", &damaged), with_blob("w", &fine)],
    )
    .await;
    log.append(
        &RunId::from("c"),
        Seq(1),
        vec![with_blob("v", &wrong_length)],
    )
    .await
    .unwrap();
    drop(log);
    assert!(
        verify(dir.path()).unwrap().blob_problems.len() == 1,
        "only the length"
    );
    let blob = |b: &BlobRef| dir.path().join("blobs").join(&b.sha256);
    std::fs::write(blob(&damaged), vec![1; 4999]).unwrap();
    std::fs::remove_file(blob(&missing)).unwrap();
    std::fs::write(blob(&unused), b"other").unwrap();
    let report = verify(dir.path()).unwrap();
    assert!(!report.is_clean());
    assert_eq!(report.blobs, 4, "every blob file is hashed");
    let uses = |file: &BlobRef| -> Vec<(String, u64, String, Option<String>)> {
        let name = format!("blobs/{}", file.sha256);
        report
            .blob_problems
            .iter()
            .filter(|p| p.file == name)
            .flat_map(|p| {
                p.used_by.iter().map(|u: &BlobUse| {
                    (
                        p.problem.clone(),
                        u.event_id,
                        u.run_id.clone(),
                        u.step.clone(),
                    )
                })
            })
            .collect()
    };
    let damaged_uses = uses(&damaged);
    assert_eq!(damaged_uses.len(), 2, "{report:?}");
    assert!(
        damaged_uses[0].0.contains("4999 bytes hash to"),
        "{damaged_uses:?}"
    );
    assert_eq!(
        damaged_uses
            .iter()
            .map(|u| (u.1, u.2.as_str(), u.3.as_deref()))
            .collect::<Vec<_>>(),
        [(2, "a", Some("x")), (5, "b", Some("z"))]
    );
    assert_eq!(
        uses(&missing),
        [(
            "missing".to_owned(),
            4,
            "b".to_owned(),
            Some("y".to_owned())
        )]
    );
    let length = uses(&short);
    assert_eq!(length.len(), 1);
    assert!(length[0].0.contains("says 4999 bytes"), "{length:?}");
    assert_eq!((length[0].1, length[0].2.as_str()), (7, "c"));
    let unused_report = report
        .blob_problems
        .iter()
        .find(|p| p.file == format!("blobs/{}", unused.sha256))
        .expect("a damaged blob no event uses is reported too");
    assert!(unused_report.used_by.is_empty());
    assert!(uses(&fine).is_empty());
    assert_eq!(report.blob_problems.len(), 4, "{report:?}");
}
