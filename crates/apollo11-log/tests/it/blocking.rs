//! The store traits never hold an async worker on disk IO or an fsync. With every read and
//! sync of the simulated file system held (`Fault::Stall`), each operation is started on a
//! single-threaded runtime, and this test's own task, on that same and only worker, must
//! see the operation held: it could not run if the operation held the worker.

use crate::common::{append, created, sized, small};
use apollo11_core::{EventId, RunId, Seq};
use apollo11_log::{Fault, FileLog, SimFs};
use apollo11_store::{BlobStore, EventStore, Snapshot, SnapshotStore};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Starts `op` with the file system stalled and checks this task runs while it is held.
async fn held_off_the_worker<T: Send + 'static>(
    fs: &SimFs,
    what: &str,
    op: impl Future<Output = T> + Send + 'static,
) {
    fs.set_fault(Some(Fault::Stall));
    let op = tokio::spawn(op);
    let deadline = Instant::now() + Duration::from_secs(30);
    while fs.stalled() == 0 {
        assert!(
            !op.is_finished(),
            "{what} finished, and only then did this task run: it held the async worker"
        );
        assert!(
            Instant::now() < deadline,
            "{what} never reached the file system"
        );
        tokio::task::yield_now().await;
    }
    fs.release();
    op.await.unwrap();
    fs.set_fault(None);
}

#[tokio::test(flavor = "current_thread")]
async fn reads_snapshots_and_blobs_never_hold_the_async_worker() {
    let fs = SimFs::new();
    let log = Arc::new(FileLog::open_with(Arc::new(fs.clone()), "/data", small()).unwrap());
    append(&log, "r", vec![created(), sized("s", 100)]).await;
    let snapshot = Snapshot {
        watermark: EventId(2),
        state: b"view".to_vec(),
    };
    log.save_snapshot(snapshot.clone()).await.unwrap();
    let blob = log.put_blob(vec![7; 10_000]).await.unwrap();
    let r = || RunId::from("r");

    let l = log.clone();
    held_off_the_worker(&fs, "read_run", async move {
        assert_eq!(l.read_run(&r(), Seq(1)).await.unwrap().len(), 2);
    })
    .await;
    let l = log.clone();
    held_off_the_worker(&fs, "read_event", async move {
        assert!(l.read_event(&r(), Seq(2)).await.unwrap().is_some());
    })
    .await;
    let l = log.clone();
    held_off_the_worker(&fs, "read_from", async move {
        assert_eq!(l.read_from(EventId(1), 10).await.unwrap().len(), 2);
    })
    .await;
    let l = log.clone();
    held_off_the_worker(&fs, "scan_from", async move {
        let mut seen = 0;
        l.scan_from(EventId(1), 10, &mut |_| seen += 1)
            .await
            .unwrap();
        assert_eq!(seen, 2);
    })
    .await;
    let l = log.clone();
    held_off_the_worker(&fs, "load_snapshot", async move {
        assert_eq!(l.load_snapshot().await.unwrap(), Some(snapshot));
    })
    .await;
    let l = log.clone();
    held_off_the_worker(&fs, "save_snapshot (its fsyncs)", async move {
        let newer = Snapshot {
            watermark: EventId(2),
            state: b"newer".to_vec(),
        };
        l.save_snapshot(newer).await.unwrap();
    })
    .await;
    let l = log.clone();
    held_off_the_worker(&fs, "get_blob", async move {
        assert_eq!(l.get_blob(&blob).await.unwrap(), vec![7; 10_000]);
    })
    .await;
    let l = log.clone();
    held_off_the_worker(&fs, "put_blob (its fsyncs)", async move {
        l.put_blob(vec![8; 10_000]).await.unwrap();
    })
    .await;
}
