//! Archive files written from a live log (`FileLog::write_archive`): the runs read back as
//! the live log has them, `verify` checks every archive file and names a damaged one, and only
//! the writer may write one.

use crate::common::{append, created, sized, HookedFs};
use apollo11_core::{RunId, Seq};
use apollo11_log::{archive, verify, EventStore, FileLog, RealFs, SimFs, StoreError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[tokio::test]
async fn archived_runs_read_back_as_live_and_verify_names_a_damaged_archive_file() {
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(dir.path(), crate::common::small()).unwrap();
    for run in ["r1", "r2", "r3"] {
        append(&log, run, vec![created()]).await;
    }
    for _ in 0..40 {
        for run in ["r1", "r2", "r3"] {
            append(&log, run, vec![sized("s", 200)]).await;
        }
    }
    let runs = [RunId::from("r3"), RunId::from("r1")];
    let written = log.write_archive(&runs).unwrap();
    assert_eq!((written.runs, written.events), (2, 82));
    for run in &runs {
        let live = log.read_run(run, Seq(1)).await.unwrap();
        let archived = archive::read_run(&RealFs, dir.path(), run, Seq(1)).unwrap();
        assert_eq!(archived, Some(live));
    }
    let report = verify(dir.path()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.archives.len(), 1);
    assert_eq!(report.archives[0].file, written.file);

    let path = dir.path().join(&written.file);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let report = verify(dir.path()).unwrap();
    assert!(!report.is_clean());
    assert_eq!(report.archive_problems.len(), 1, "{report:?}");
    assert_eq!(report.archive_problems[0].file, written.file);
    assert!(report.damage.is_none(), "the live log itself is intact");
}

#[tokio::test]
async fn only_the_writer_writes_an_archive_and_an_unknown_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(dir.path(), crate::common::small()).unwrap();
    append(&log, "r1", vec![created()]).await;
    let unknown = log.write_archive(&[RunId::from("r1"), RunId::from("nope")]);
    assert!(
        matches!(unknown, Err(StoreError::NotFound { .. })),
        "{unknown:?}"
    );
    drop(log);
    let reader = FileLog::open_read_only(dir.path()).unwrap();
    let refused = reader.write_archive(&[RunId::from("r1")]);
    assert!(matches!(refused, Err(StoreError::ReadOnly)), "{refused:?}");
    assert!(archive::files(&RealFs, dir.path()).unwrap().is_empty());
}

/// A run only the archive holds (as after `gc` moved it out of the live log; here the archive
/// file is copied into another data dir): the store's reads of it answer from the archive,
/// and the runs the live log holds are still read from it.
#[tokio::test]
async fn a_run_only_the_archive_holds_is_read_from_it() {
    let (source, target) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = FileLog::open(source.path(), crate::common::small()).unwrap();
    append(
        &log,
        "gone",
        vec![created(), sized("s", 10), sized("t", 10)],
    )
    .await;
    let gone = RunId::from("gone");
    let events = log.read_run(&gone, Seq(1)).await.unwrap();
    let written = log.write_archive(std::slice::from_ref(&gone)).unwrap();
    drop(log);
    let log = FileLog::open(target.path(), crate::common::small()).unwrap();
    append(&log, "here", vec![created()]).await;
    std::fs::create_dir(target.path().join("archive")).unwrap();
    std::fs::copy(
        source.path().join(&written.file),
        target.path().join(&written.file),
    )
    .unwrap();
    assert_eq!(log.read_run(&gone, Seq(1)).await.unwrap(), events);
    assert_eq!(log.read_run(&gone, Seq(3)).await.unwrap(), events[2..]);
    let second = log.read_event(&gone, Seq(2)).await.unwrap();
    assert_eq!(second.as_ref(), Some(&events[1]));
    assert_eq!(log.read_event(&gone, Seq(4)).await.unwrap(), None);
    let here = log.read_run(&RunId::from("here"), Seq(1)).await.unwrap();
    assert_eq!(here.len(), 1);
    let archived = log.archived_runs().await.unwrap();
    assert_eq!(archived.len(), 1);
    assert_eq!(
        (
            archived[0].run_id.as_str(),
            archived[0].last_seq,
            archived[0].last_event_id
        ),
        ("gone", Seq(3), events[2].event_id)
    );
    let live: Vec<String> = (log.list_runs().await.unwrap().into_iter())
        .map(|s| s.run_id.to_string())
        .collect();
    assert_eq!(live, ["here"], "the live list is the live log's");
}

/// An archived run takes no more events and its id no new run: the writer, which keeps the
/// archived ids' hashes from its open on, refuses both; other runs append as before.
#[tokio::test]
async fn an_archived_run_takes_no_more_events_and_its_id_no_new_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(dir.path(), crate::common::small()).unwrap();
    append(&log, "gone", vec![created(), sized("s", 10)]).await;
    // Past the live segment, so a collect moves `gone`.
    for _ in 0..40 {
        append(&log, "other", vec![sized("t", 300)]).await;
    }
    let gone = RunId::from("gone");
    assert_eq!(
        log.collect(std::slice::from_ref(&gone)).unwrap().moved,
        std::slice::from_ref(&gone)
    );
    drop(log);
    let log = FileLog::open(dir.path(), crate::common::small()).unwrap();
    let created_again = log.append(&gone, Seq(1), vec![created()]).await;
    assert!(
        matches!(
            created_again,
            Err(StoreError::Conflict { actual: Seq(2), .. })
        ),
        "{created_again:?}"
    );
    let continued = log.append(&gone, Seq(3), vec![sized("t", 1)]).await;
    assert!(
        matches!(&continued, Err(StoreError::Invalid { reason, .. }) if reason.contains("archived")),
        "{continued:?}"
    );
    append(&log, "fresh", vec![created()]).await;
    assert_eq!(log.read_run(&gone, Seq(1)).await.unwrap().len(), 2);
}

/// Power lost at each sync of `write_archive` (and after its last), under many seeds: the
/// data dir holds no archive file or the whole one (its runs, `verify` clean), a temp file
/// left by the crash included; the writing open removes it (its runs are all still live: a
/// copy nothing reads); the next archive is written whole.
#[tokio::test]
async fn power_lost_at_every_sync_of_an_archive_write_leaves_none_or_all_of_it() {
    use apollo11_log::{verify_with, Fault, SimFs};
    use std::sync::Arc;
    let runs = [RunId::from("r1"), RunId::from("r2")];
    let (mut whole, mut none) = (0, 0);
    for at in 0..4 {
        for seed in 1..=25 {
            let fs = Arc::new(SimFs::new());
            let log = FileLog::open_with(fs.clone(), "/d", crate::common::small()).unwrap();
            for run in ["r1", "r2", "r3"] {
                append(&log, run, vec![created(), sized("s", 300)]).await;
            }
            fs.set_fault(Some(Fault::PowerLossAtSync { at, seed }));
            let written = log.write_archive(&runs);
            drop(log);
            let image: Arc<SimFs> = Arc::new(fs.crashed().unwrap_or_else(|| fs.power_loss(seed)));
            // Read before a writing open, which removes it: its runs are all still live.
            let archived: Vec<(String, Seq)> =
                (apollo11_log::archive::runs(image.as_ref(), "/d".as_ref())
                    .unwrap()
                    .into_iter())
                .map(|s| (s.run_id.to_string(), s.last_seq))
                .collect();
            let log = FileLog::open_with(image.clone(), "/d", crate::common::small())
                .unwrap_or_else(|e| panic!("sync {at} seed {seed}: {e}"));
            assert!(
                log.archived_runs().await.unwrap().is_empty(),
                "a leftover copy is removed"
            );
            match archived.len() {
                0 => none += 1,
                _ => {
                    assert_eq!(archived, [("r1".into(), Seq(2)), ("r2".into(), Seq(2))]);
                    whole += 1;
                }
            }
            assert!(
                written.is_err() || archived.len() == 2,
                "sync {at} seed {seed}: an archive acknowledged was lost"
            );
            let report = verify_with(image.clone(), "/d").unwrap();
            assert!(report.is_clean(), "sync {at} seed {seed}: {report:?}");
            let again = log.write_archive(&runs).unwrap();
            let report = verify_with(image, "/d").unwrap();
            assert!(report.is_clean(), "sync {at} seed {seed}: {report:?}");
            assert!(report.archives.iter().any(|a| a.file == again.file));
        }
    }
    assert!(
        whole > 0 && none > 0,
        "{whole} whole, {none} none: the seeds miss a case"
    );
}

/// Several archive files, one run each (`gc` moved each): a writing open reads each file's
/// table once, then a read of an archived run (the oldest file's included: newest first, it
/// would be the last found) opens exactly one archive file, and a read or an append of a run
/// the archive lacks opens none.
#[tokio::test]
async fn a_read_of_an_archived_run_opens_the_one_archive_file_that_holds_it() {
    const FILES: usize = 5;
    let sim = Arc::new(SimFs::new());
    let source = FileLog::open_with(sim.clone(), "/data", crate::common::small()).unwrap();
    let mut events = Vec::new();
    for i in 0..FILES {
        let run = format!("gone{i}");
        append(&source, &run, vec![created(), sized("s", 10)]).await;
        // Past the live segment, so the collect moves it.
        for _ in 0..30 {
            append(&source, "other", vec![sized("t", 300)]).await;
        }
        let run = RunId::from(run.as_str());
        events.push(source.read_run(&run, Seq(1)).await.unwrap());
        let moved = source.collect(std::slice::from_ref(&run)).unwrap().moved;
        assert_eq!(moved, std::slice::from_ref(&run));
    }
    drop(source);
    let opens = Arc::new(AtomicUsize::new(0));
    let counted = opens.clone();
    let fs = Arc::new(HookedFs {
        sim,
        on_open: Box::new(move |path, file| {
            if path.extension().is_some_and(|e| e == "arc") {
                counted.fetch_add(1, Ordering::Relaxed);
            }
            file
        }),
    });
    let log = FileLog::open_with(fs, "/data", crate::common::small()).unwrap();
    assert_eq!(
        opens.swap(0, Ordering::Relaxed),
        FILES,
        "the tables at open"
    );
    for (i, events) in events.iter().enumerate() {
        let run = RunId::from(format!("gone{i}").as_str());
        assert_eq!(&log.read_run(&run, Seq(1)).await.unwrap(), events);
        assert_eq!(opens.swap(0, Ordering::Relaxed), 1, "gone{i}");
    }
    assert!(log
        .read_run(&RunId::from("never"), Seq(1))
        .await
        .unwrap()
        .is_empty());
    append(&log, "new", vec![created()]).await;
    assert_eq!(opens.load(Ordering::Relaxed), 0);
}
