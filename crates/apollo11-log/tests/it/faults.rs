//! T6: an fsync error at every sync site poisons the store: the failing append (or snapshot,
//! or blob) is not acknowledged, every later call errors, no sync is retried, and reopening
//! recovers every acknowledged event. T7: a full disk is a clear error, acknowledges nothing
//! partial, and once space is freed the log reopens with no manual repair.

use crate::common::{created, sized};
use apollo11_core::{BlobRef, EventId, RunId, Seq};
use apollo11_log::{Fault, FileLog, Fs, Options, SimFs};
use apollo11_store::{BlobStore, EventStore, Snapshot, SnapshotStore, StoreError};
use std::sync::Arc;

fn options() -> Options {
    Options {
        segment_bytes_max: 4096,
        ..Options::default()
    }
}

/// Opens, appends across several segments, saves a snapshot and a blob; stops at the first
/// error. Returns the ids acknowledged and the error, if any.
async fn workload(fs: Arc<SimFs>) -> (Vec<u64>, Option<StoreError>, Option<FileLog>) {
    let log = match FileLog::open_with(fs, "/d", options()) {
        Ok(log) => log,
        Err(e) => return (Vec::new(), Some(e), None),
    };
    let mut acked = Vec::new();
    let run = RunId::from("r");
    for seq in 1..=12u32 {
        let event = if seq == 1 { created() } else { sized("s", 900) };
        match log.append(&run, Seq(seq), vec![event]).await {
            Ok(ids) => acked.extend(ids.iter().map(|id| id.0)),
            Err(e) => return (acked, Some(e), Some(log)),
        }
        let extra = match seq {
            6 => log
                .save_snapshot(Snapshot {
                    watermark: EventId(6),
                    state: b"s".to_vec(),
                })
                .await
                .err(),
            9 => log.put_blob(vec![9; 5000]).await.err(),
            _ => None,
        };
        if let Some(e) = extra {
            return (acked, Some(e), Some(log));
        }
    }
    (acked, None, Some(log))
}

/// Every call on a poisoned store must fail.
async fn assert_everything_fails(log: &FileLog) {
    let run = RunId::from("r");
    let blob = BlobRef {
        sha256: "0".repeat(64),
        bytes: 1,
    };
    assert!(matches!(
        log.append(&run, Seq(99), vec![sized("x", 1)]).await,
        Err(StoreError::Poisoned { .. })
    ));
    assert!(matches!(
        log.read_run(&run, Seq(1)).await,
        Err(StoreError::Poisoned { .. })
    ));
    assert!(matches!(
        log.read_from(EventId(1), 10).await,
        Err(StoreError::Poisoned { .. })
    ));
    assert!(matches!(
        log.list_runs().await,
        Err(StoreError::Poisoned { .. })
    ));
    assert!(matches!(
        log.last_event_id().await,
        Err(StoreError::Poisoned { .. })
    ));
    assert!(matches!(
        log.save_snapshot(Snapshot {
            watermark: EventId(0),
            state: vec![]
        })
        .await,
        Err(StoreError::Poisoned { .. })
    ));
    assert!(matches!(
        log.load_snapshot().await,
        Err(StoreError::Poisoned { .. })
    ));
    assert!(matches!(
        log.put_blob(vec![1]).await,
        Err(StoreError::Poisoned { .. })
    ));
    assert!(matches!(
        log.get_blob(&blob).await,
        Err(StoreError::Poisoned { .. })
    ));
}

async fn assert_recovers(fs: Arc<SimFs>, acked: &[u64], site: u32) {
    let log = FileLog::open_with(fs, "/d", options())
        .unwrap_or_else(|e| panic!("sync site {site}: reopen failed: {e}"));
    let last = log.last_event_id().await.unwrap().0;
    assert!(
        last >= acked.len() as u64,
        "sync site {site}: {} acknowledged, {last} recovered",
        acked.len()
    );
    let found = log.read_from(EventId(1), u32::MAX).await.unwrap();
    assert!(
        found.iter().map(|e| e.event_id.0).eq(1..=last),
        "sync site {site}"
    );
}

#[tokio::test]
async fn an_fsync_error_at_every_sync_site_poisons_the_store_and_loses_nothing_acknowledged() {
    let clean = Arc::new(SimFs::new());
    let (acked, error, log) = workload(clean.clone()).await;
    assert!(error.is_none() && acked.len() == 12);
    let sites = clean.syncs();
    drop(log);
    assert_eq!(
        clean.syncs(),
        sites + 1,
        "a clean close syncs the last segment"
    );
    // That sync failing cannot be reported (the log is being dropped): the close then saves
    // no index file of the last segment, and nothing acknowledged depends on it.
    let fs = Arc::new(SimFs::new());
    fs.set_fault(Some(Fault::FailSync(sites)));
    let (acked_before_close, _, log) = workload(fs.clone()).await;
    drop(log);
    let listed = fs.list(std::path::Path::new("/d/segments")).unwrap();
    let last = listed.iter().filter(|n| n.ends_with(".seg")).max().unwrap();
    assert!(
        !listed.contains(&last.replace(".seg", ".idx")),
        "{listed:?}"
    );
    fs.set_fault(None);
    assert_recovers(fs, &acked_before_close, sites).await;
    assert!(
        sites > 20,
        "the workload syncs at open, on appends, rolls, snapshots and blobs: {sites}"
    );
    for site in 0..sites {
        let fs = Arc::new(SimFs::new());
        fs.set_fault(Some(Fault::FailSync(site)));
        let (acked, error, log) = workload(fs.clone()).await;
        let error = error.unwrap_or_else(|| panic!("sync site {site}: the failure went unnoticed"));
        assert!(
            matches!(error, StoreError::Poisoned { .. } | StoreError::Io { .. }),
            "sync site {site}: {error}"
        );
        if let Some(log) = log {
            assert_everything_fails(&log).await;
        }
        assert_eq!(
            fs.syncs(),
            site + 1,
            "sync site {site}: a failed sync was retried or work went on"
        );
        // A restarted process (page cache intact) and a machine that lost power both recover.
        fs.set_fault(None);
        assert_recovers(Arc::new(fs.power_loss(u64::from(site))), &acked, site).await;
        assert_recovers(fs, &acked, site).await;
    }
}

#[tokio::test]
async fn a_full_disk_is_a_clear_error_and_the_log_reopens_without_repair() {
    for limit in [3_000u64, 5_000, 7_777, 12_000] {
        let fs = Arc::new(SimFs::new());
        fs.set_fault(Some(Fault::DiskFull(limit)));
        let (acked, error, _) = workload(fs.clone()).await;
        let error = error.unwrap_or_else(|| panic!("limit {limit}: the full disk went unnoticed"));
        assert!(
            error.to_string().contains("no space left"),
            "limit {limit}: unclear error: {error}"
        );
        fs.set_fault(None);
        let log = FileLog::open_with(fs.clone(), "/d", options()).unwrap();
        assert_eq!(
            log.last_event_id().await.unwrap().0,
            acked.len() as u64,
            "limit {limit}: nothing partial is kept"
        );
        log.append(
            &RunId::from("r"),
            Seq(acked.len() as u32 + 1),
            vec![sized("again", 10)],
        )
        .await
        .unwrap();
    }
}

/// A panic on the writer thread (a bug, not an IO error) poisons the store like an fsync
/// error: every appender waiting is answered, every later call fails, a subscriber waiting
/// is told, nothing hangs, and the log reopens with every acknowledged event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_on_the_writer_thread_poisons_the_store_and_nothing_hangs() {
    let fs = Arc::new(SimFs::new());
    let log = Arc::new(FileLog::open_with(fs.clone(), "/d", options()).unwrap());
    log.append(&RunId::from("r"), Seq(1), vec![created()])
        .await
        .unwrap();
    let mut subscription = log.subscribe(EventId(1)).await.unwrap();
    fs.set_fault(Some(Fault::PanicAtSync(0)));
    // Appenders to several runs at once: the writer groups them into the batch it panics on,
    // and the others wait in its queue.
    let appends: Vec<_> = (0..8)
        .map(|i| {
            let log = log.clone();
            tokio::spawn(async move {
                let run = RunId::from(format!("a{i}").as_str());
                log.append(&run, Seq(1), vec![created()]).await
            })
        })
        .collect();
    for append in appends {
        let answered = within("an appender", append).await.unwrap();
        assert!(
            matches!(&answered, Err(StoreError::Poisoned { .. })),
            "{answered:?}"
        );
    }
    let told = within("the subscriber", subscription.next()).await;
    assert!(
        matches!(&told, Err(StoreError::Poisoned { cause }) if cause.contains("panicked")),
        "{told:?}"
    );
    assert_everything_fails(&log).await;
    match log.read_run(&RunId::from("r"), Seq(1)).await {
        Err(StoreError::Poisoned { cause }) => {
            assert!(cause.contains("the log writer panicked"), "{cause}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        log.subscribe(EventId(0)).await.err(),
        Some(StoreError::Poisoned { .. })
    ));
    // Dropping the log joins the writer thread: it must have ended.
    drop(subscription);
    let log = Arc::into_inner(log).expect("no task holds the log any more");
    within("closing", tokio::task::spawn_blocking(move || drop(log)))
        .await
        .unwrap();
    fs.set_fault(None);
    let reopened = FileLog::open_with(fs, "/d", options()).unwrap();
    assert!(reopened.last_event_id().await.unwrap() >= EventId(1));
}

/// Awaits `f`, failing the test after 30 s rather than hanging.
async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("{what} hung"))
}
