//! The write path's failures, typed: a full disk is told apart from another IO error, which
//! keeps its source, and a poisoned log reports its first cause to every later call.

use crate::common::{created, sized};
use apollo11_core::{EventId, RunId, Seq};
use apollo11_log::{Fault, FileLog, Options, SimFs, WriteError};
use apollo11_store::{BlobStore, EventStore, Snapshot, SnapshotStore, StoreError};
use std::io;
use std::sync::Arc;

fn options() -> Options {
    Options {
        segment_bytes_max: 4096,
        ..Options::default()
    }
}

/// Appends 900-byte events to one run until an append fails, and returns its error.
async fn append_until_failure(log: &FileLog) -> StoreError {
    let run = RunId::from("r");
    for seq in 1..=40u32 {
        let event = if seq == 1 { created() } else { sized("s", 900) };
        if let Err(error) = log.append(&run, Seq(seq), vec![event]).await {
            return error;
        }
    }
    panic!("40 appends went through the fault")
}

/// The cause a `Poisoned` error names.
fn cause_of(error: StoreError) -> String {
    match error {
        StoreError::Poisoned { cause } => cause,
        other => panic!("not poisoned: {other}"),
    }
}

/// A log poisoned by a full disk (`limit` bytes written in all), on `fs`.
async fn poisoned_by_a_full_disk(fs: &Arc<SimFs>, limit: u64) -> (FileLog, String) {
    let log = FileLog::open_with(fs.clone(), "/d", options()).unwrap();
    fs.set_fault(Some(Fault::DiskFull(limit)));
    let cause = cause_of(append_until_failure(&log).await);
    (log, cause)
}

#[tokio::test]
async fn a_write_to_a_full_disk_is_reported_as_disk_full() {
    for limit in [3_000u64, 5_000, 9_000] {
        let fs = Arc::new(SimFs::new());
        let (log, cause) = poisoned_by_a_full_disk(&fs, limit).await;
        assert!(cause.contains("the disk is full"), "limit {limit}: {cause}");
        assert!(
            cause.contains("segments/"),
            "limit {limit}: no file named: {cause}"
        );
        match log.poison_cause().as_deref() {
            Some(WriteError::DiskFull { source, .. }) => {
                assert_eq!(source.kind(), io::ErrorKind::StorageFull, "limit {limit}")
            }
            other => panic!("limit {limit}: not a full disk: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_failed_sync_is_reported_as_io_with_its_source() {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/d", options()).unwrap();
    assert!(log.poison_cause().is_none());
    fs.set_fault(Some(Fault::FailSync(fs.syncs())));
    let cause = cause_of(append_until_failure(&log).await);
    match log.poison_cause().as_deref() {
        Some(WriteError::Io { doing, source }) => {
            assert!(doing.starts_with("syncing segments/"), "{doing}");
            assert!(
                source.to_string().contains("injected sync failure"),
                "{source}"
            );
            assert_eq!(cause, format!("{doing}: {source}"));
        }
        other => panic!("not an IO error: {other:?}"),
    }
}

#[tokio::test]
async fn a_poisoned_log_reports_its_first_cause_to_every_later_call() {
    let fs = Arc::new(SimFs::new());
    let (log, first) = poisoned_by_a_full_disk(&fs, 5_000).await;
    // Space comes back and syncs fail instead: nothing is tried, the first cause stays.
    fs.set_fault(Some(Fault::FailSync(fs.syncs())));
    let other = RunId::from("other");
    let appended = log.append(&other, Seq(1), vec![created()]).await;
    assert_eq!(cause_of(appended.unwrap_err()), first);
    let snapshot = Snapshot {
        watermark: EventId(1),
        state: b"s".to_vec(),
    };
    assert_eq!(
        cause_of(log.save_snapshot(snapshot).await.unwrap_err()),
        first
    );
    assert_eq!(
        cause_of(log.put_blob(vec![1; 10]).await.unwrap_err()),
        first
    );
    assert_eq!(cause_of(log.check_writable().unwrap_err()), first);
    assert!(matches!(
        log.poison_cause().as_deref(),
        Some(WriteError::DiskFull { .. })
    ));
}
