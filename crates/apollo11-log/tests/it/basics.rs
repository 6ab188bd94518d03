//! Reopening, rolling, read-only opens, snapshots.

use crate::common::{
    all_ids, append, buffered, created, read_everything, remove_index_files, sized, small,
};
use apollo11_core::{EventId, RunId, Seq};
use apollo11_log::{verify, FileLog, Options};
use apollo11_store::{BlobStore, EventStore, Snapshot, SnapshotStore, StoreError};

#[tokio::test]
async fn events_survive_a_reopen_and_ids_and_seqs_continue() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = FileLog::open(dir.path(), Options::default()).unwrap();
        append(&log, "a", vec![created(), sized("s", 10)]).await;
        append(&log, "b", vec![created()]).await;
    }
    let log = FileLog::open(dir.path(), Options::default()).unwrap();
    assert_eq!(log.recovery().events, 3);
    assert_eq!(append(&log, "a", vec![sized("t", 5)]).await, [4]);
    let seqs: Vec<u32> = log
        .read_run(&RunId::from("a"), Seq(1))
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq.0)
        .collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert!(matches!(
        log.append(&RunId::from("b"), Seq(1), vec![created()]).await,
        Err(StoreError::Conflict { .. })
    ));
}

#[tokio::test]
async fn segments_roll_and_every_event_reads_back_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    {
        let log = FileLog::open(dir.path(), buffered()).unwrap();
        for i in 0..200 {
            let run = format!("run-{}", i % 7);
            let first = if i < 7 {
                vec![created()]
            } else {
                vec![sized("s", 300)]
            };
            for id in append(&log, &run, first).await {
                expected.push((id, run.clone()));
            }
        }
    }
    let report = verify(dir.path()).unwrap();
    assert!(
        report.segments.len() > 5,
        "8 KiB segments must roll: {report:?}"
    );
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.events, 200);
    let log = FileLog::open(dir.path(), buffered()).unwrap();
    assert_eq!(all_ids(&log).await, expected);
    let page = log.read_from(EventId(150), 10).await.unwrap();
    assert_eq!(
        page.iter().map(|e| e.event_id.0).collect::<Vec<_>>(),
        (150..160).collect::<Vec<_>>()
    );
}

/// The size of the one segment in `dir`.
fn segment_size(dir: &std::path::Path) -> u64 {
    let entries: Vec<_> = std::fs::read_dir(dir.join("segments"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .collect();
    assert_eq!(entries.len(), 1, "one segment");
    entries[0]
}

#[tokio::test]
async fn the_last_segment_grows_ahead_of_its_writes_a_step_at_a_time() {
    let step = apollo11_core::limits::SEGMENT_PREALLOCATE_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(dir.path(), buffered_large()).unwrap();
    assert_eq!(
        segment_size(dir.path()),
        24 + step,
        "a new segment: header + one step"
    );
    append(&log, "a", vec![created()]).await;
    // 3,000 events of 2 KiB: about 1.5 steps of data, appended in batches of 100.
    for batch in 0..30u32 {
        let events = (0..100).map(|_| sized("s", 2_048)).collect();
        log.append(&RunId::from("a"), Seq(batch * 100 + 2), events)
            .await
            .unwrap();
    }
    let size = segment_size(dir.path());
    assert!(
        size > 2 * step && size <= 3 * step,
        "grown once more, a step past the data: {size}"
    );
    drop(log);
    let log = FileLog::open(dir.path(), buffered_large()).unwrap();
    assert_eq!(log.recovery().events, 3_001);
    assert!(log.recovery().torn.is_none());
    append(&log, "a", vec![sized("t", 10)]).await;
    assert_eq!(
        segment_size(dir.path()),
        size,
        "no growth while the step lasts"
    );
}

/// Buffered, with segments of the default size.
fn buffered_large() -> Options {
    Options {
        durability: apollo11_log::Durability::Buffered,
        ..Options::default()
    }
}

#[tokio::test]
async fn a_writing_open_removes_snapshots_of_events_the_log_no_longer_has() {
    // Log `a` reached event 10 and was snapshotted there; log `b` is `a` as a crash in
    // buffered mode could leave it: only 5 events durable, the snapshot file durable.
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (dir, events) in [(&a, 10), (&b, 5)] {
        let log = FileLog::open(dir.path(), buffered()).unwrap();
        append(&log, "r", vec![created()]).await;
        for _ in 1..events {
            append(&log, "r", vec![sized("s", 10)]).await;
        }
    }
    let log = FileLog::open(a.path(), buffered()).unwrap();
    log.save_snapshot(Snapshot {
        watermark: EventId(10),
        state: b"of a's ten events".to_vec(),
    })
    .await
    .unwrap();
    drop(log);
    let name = "snapshots/00000000000000000010.snap";
    std::fs::copy(a.path().join(name), b.path().join(name)).unwrap();
    let log = FileLog::open(b.path(), buffered()).unwrap();
    assert!(!b.path().join(name).exists(), "removed at the writing open");
    for _ in 5..12 {
        append(&log, "r", vec![sized("t", 10)]).await;
    }
    assert_eq!(
        log.load_snapshot().await.unwrap(),
        None,
        "never loaded for b's events"
    );
}

#[tokio::test]
async fn a_read_only_open_reads_while_the_writer_runs_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let writer = FileLog::open(dir.path(), small()).unwrap();
    append(&writer, "a", vec![created(), sized("s", 10)]).await;
    let reader = FileLog::open_read_only(dir.path()).unwrap();
    assert_eq!(
        reader
            .read_run(&RunId::from("a"), Seq(1))
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(matches!(
        reader
            .append(&RunId::from("a"), Seq(3), vec![sized("t", 1)])
            .await,
        Err(StoreError::ReadOnly)
    ));
    append(&writer, "a", vec![sized("t", 1)]).await;
    let later = FileLog::open_read_only(dir.path()).unwrap();
    assert_eq!(later.last_event_id().await.unwrap(), EventId(3));
}

#[tokio::test]
async fn a_damaged_snapshot_falls_back_to_an_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(dir.path(), small()).unwrap();
    append(&log, "a", vec![created(), sized("s", 1), sized("t", 1)]).await;
    for w in 1..=3 {
        log.save_snapshot(Snapshot {
            watermark: EventId(w),
            state: format!("state-{w}").into_bytes(),
        })
        .await
        .unwrap();
    }
    assert!(
        log.save_snapshot(Snapshot {
            watermark: EventId(9),
            state: vec![]
        })
        .await
        .is_err(),
        "past the log"
    );
    let newest = dir.path().join("snapshots/00000000000000000003.snap");
    let mut bytes = std::fs::read(&newest).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&newest, bytes).unwrap();
    let loaded = log.load_snapshot().await.unwrap().unwrap();
    assert_eq!(
        (loaded.watermark, loaded.state),
        (EventId(2), b"state-2".to_vec())
    );
    let report = verify(dir.path()).unwrap();
    assert!(!report.is_clean());
    let bad: Vec<&str> = report
        .snapshots
        .iter()
        .filter(|s| s.problem.is_some())
        .map(|s| s.file.as_str())
        .collect();
    assert_eq!(bad, ["snapshots/00000000000000000003.snap"]);
}

#[tokio::test]
async fn old_snapshots_are_pruned_to_the_configured_count() {
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(
        dir.path(),
        Options {
            snapshots_kept: 2,
            ..small()
        },
    )
    .unwrap();
    append(
        &log,
        "a",
        vec![created(), sized("s", 1), sized("t", 1), sized("u", 1)],
    )
    .await;
    for w in 1..=4 {
        log.save_snapshot(Snapshot {
            watermark: EventId(w),
            state: vec![w as u8],
        })
        .await
        .unwrap();
    }
    let mut names: Vec<String> = std::fs::read_dir(dir.path().join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["00000000000000000003.snap", "00000000000000000004.snap"]
    );
}

#[test]
fn options_outside_the_format_limits_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        Options {
            segment_bytes_max: 100,
            ..Options::default()
        },
        Options {
            segment_bytes_max: 1 << 40,
            ..Options::default()
        },
        Options {
            snapshots_kept: 0,
            ..Options::default()
        },
    ] {
        assert!(matches!(
            FileLog::open(dir.path(), bad),
            Err(StoreError::Invalid { .. })
        ));
    }
}

#[tokio::test]
async fn repair_cuts_the_log_at_mid_log_damage_and_keeps_the_cut_bytes() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = FileLog::open(dir.path(), buffered()).unwrap();
        append(&log, "a", vec![created()]).await;
        for _ in 0..60 {
            append(&log, "a", vec![sized("s", 300)]).await;
        }
    }
    let before = verify(dir.path()).unwrap();
    assert!(before.segments.len() >= 3);
    let second = &before.segments[1];
    let path = dir.path().join(&second.file);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[second.bytes as usize / 2] ^= 0x10;
    std::fs::write(&path, bytes).unwrap();
    // The damaged segment is sealed and indexed: the open trusts its index file, reading
    // the log finds the damage, and so does verify.
    {
        let log = FileLog::open(dir.path(), buffered()).unwrap();
        let read = read_everything(&log).await;
        assert!(
            matches!(&read, Err(StoreError::Corrupted { file, .. }) if *file == second.file),
            "{read:?}"
        );
    }
    let found = verify(dir.path())
        .unwrap()
        .damage
        .expect("verify finds the damage");
    assert_eq!(found.file, second.file);
    // Without index files, opening scans every segment and refuses.
    remove_index_files(&apollo11_log::RealFs, dir.path());
    let refused = FileLog::open(dir.path(), buffered())
        .err()
        .expect("mid-log damage must refuse to open");
    assert!(
        matches!(&refused, StoreError::Corrupted { file, .. } if *file == second.file),
        "{refused}"
    );
    // A library error names the damage; what to do about it is the front end's to say.
    assert!(!refused.to_string().contains("apollo11"), "{refused}");
    let plan = apollo11_log::plan_repair(dir.path()).unwrap();
    assert_eq!(plan.cuts.len(), before.segments.len() - 1, "{plan:?}");
    assert_eq!(plan.cuts[0].file, second.file);
    assert!(
        plan.cuts[1..].iter().all(|c| c.at == 0),
        "moved aside whole"
    );
    let report = apollo11_log::repair(dir.path()).unwrap();
    assert_eq!(
        (report.events_kept, &report.dropped),
        (plan.events_kept, &plan.drops)
    );
    let kept = report.events_kept;
    assert!(
        kept >= before.segments[0].events && kept < before.events,
        "{report:?}"
    );
    assert_eq!(
        report.kept_in.len(),
        before.segments.len() - 1,
        "the damaged segment's tail and every later segment"
    );
    let log = FileLog::open(dir.path(), buffered()).unwrap();
    assert_eq!(log.last_event_id().await.unwrap(), EventId(kept));
    append(&log, "a", vec![sized("again", 1)]).await;
    assert!(verify(dir.path()).unwrap().torn_files.len() >= report.kept_in.len());
}

/// Storing a blob again only checks that its file is there with its size (a 64 MiB output
/// stored twice is not read back and hashed); reading it always checks its hash.
#[tokio::test]
async fn a_blob_stored_again_is_found_by_name_and_size_and_checked_when_read() {
    use apollo11_store::BlobStore;
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(dir.path(), buffered()).unwrap();
    let bytes = vec![5u8; 20_000];
    let blob = log.put_blob(bytes.clone()).await.unwrap();
    let path = dir.path().join("blobs").join(&blob.sha256);
    // Same size, other bytes: storing the blob again does not read the file, so it does not
    // notice; reading the blob does.
    std::fs::write(&path, vec![6u8; 20_000]).unwrap();
    assert_eq!(log.put_blob(bytes.clone()).await.unwrap(), blob);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        vec![6u8; 20_000],
        "not rewritten"
    );
    assert!(matches!(
        log.get_blob(&blob).await,
        Err(StoreError::Corrupted { .. })
    ));
    // Another size is not the blob: it is written again, whole.
    std::fs::write(&path, [5u8; 10]).unwrap();
    assert_eq!(log.put_blob(bytes.clone()).await.unwrap(), blob);
    assert_eq!(log.get_blob(&blob).await.unwrap(), bytes);
    std::fs::remove_file(&path).unwrap();
    log.put_blob(bytes.clone()).await.unwrap();
    assert_eq!(log.get_blob(&blob).await.unwrap(), bytes);
}

/// Found by the crash test once the child started its runs concurrently: every run pins the
/// same large definition, and two puts of one blob at once shared its temp file, so one
/// rename failed and poisoned the log. Puts of one blob at once all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_puts_of_one_blob_all_succeed_and_the_log_stays_writable() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(FileLog::open(dir.path(), buffered()).unwrap());
    let bytes = vec![7u8; 200_000];
    for _ in 0..20 {
        let puts: Vec<_> = (0..8)
            .map(|_| {
                let (log, bytes) = (log.clone(), bytes.clone());
                tokio::spawn(async move { log.put_blob(bytes).await })
            })
            .collect();
        for put in puts {
            put.await.unwrap().unwrap();
        }
        let blob = log.put_blob(bytes.clone()).await.unwrap();
        std::fs::remove_file(dir.path().join("blobs").join(&blob.sha256)).unwrap();
    }
    append(&log, "a", vec![created()]).await;
}

/// What a server's readiness asks: a writing open accepts appends, a read-only one does not.
#[test]
fn check_writable_tells_a_writer_from_a_reader() {
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(dir.path(), Options::default()).unwrap();
    assert!(log.check_writable().is_ok());
    drop(log);
    let reader = FileLog::open_read_only(dir.path()).unwrap();
    assert!(matches!(reader.check_writable(), Err(StoreError::ReadOnly)));
}
