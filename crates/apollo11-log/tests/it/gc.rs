//! `gc`'s swap (`FileLog::collect`): finished runs moved out of the live segments into an
//! archive file read back byte for byte, through every open, with appenders going on; a power
//! loss at every sync (and so at every rename) of a collect, or a failing sync, leaves the old
//! state or the new one, finished by the next open; compressed segments stay compressed.

use crate::common::{all_ids, append, created, read, remove_index_files, sized, small};
use apollo11_core::{Event, EventId, RunId, Seq};
use apollo11_log::{
    plan_repair_with, repair_with, verify_with, EventStore, Fault, FileLog, Fs, Options, SimFs,
    StoreError,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub(crate) const DONE: [&str; 3] = ["done0", "done1", "done2"];
const KEPT: [&str; 2] = ["kept0", "kept1"];

/// Runs `done*` (finished early, interleaved with `kept*`), then `kept*` growing over several
/// 8 KiB segments, so the done runs lie in sealed segments only.
pub(crate) async fn build(log: &FileLog) {
    for run in DONE.iter().chain(&KEPT) {
        append(log, run, vec![created()]).await;
    }
    for _ in 0..6 {
        for run in DONE.iter().chain(&KEPT) {
            append(log, run, vec![sized("s", 300)]).await;
        }
    }
    for i in 0..40 {
        append(log, KEPT[i % 2], vec![sized("t", 300)]).await;
    }
}

pub(crate) fn ids(runs: &[&str]) -> Vec<RunId> {
    runs.iter().map(|r| RunId::from(*r)).collect()
}

/// Every run's events, as `read_run` gives them.
pub(crate) async fn runs_of(log: &FileLog) -> BTreeMap<String, Vec<Event>> {
    let mut out = BTreeMap::new();
    for run in DONE.iter().chain(&KEPT) {
        out.insert(
            run.to_string(),
            log.read_run(&RunId::from(*run), Seq(1)).await.unwrap(),
        );
    }
    out
}

/// What `all_ids` gives without the done runs.
fn without_done(all: &[(u64, String)]) -> Vec<(u64, String)> {
    (all.iter())
        .filter(|(_, run)| !DONE.contains(&run.as_str()))
        .cloned()
        .collect()
}

pub(crate) fn segment_files(fs: &dyn Fs) -> Vec<String> {
    let names = fs.list(Path::new("/data/segments")).unwrap();
    names.into_iter().filter(|n| n.ends_with(".seg")).collect()
}

/// A log built and closed cleanly, what it reads, and its ids.
pub(crate) async fn built(
    options: Options,
) -> (Arc<SimFs>, BTreeMap<String, Vec<Event>>, Vec<(u64, String)>) {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/data", options).unwrap();
    build(&log).await;
    let (runs, all) = (runs_of(&log).await, all_ids(&log).await);
    drop(log);
    (fs, runs, all)
}

/// The live log read 7 events at a time, each page full but the last (the ids a compacted
/// segment skips are not counted), and every page's events scanned as read.
async fn paged(log: &FileLog) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = Vec::new();
    loop {
        let from = EventId(out.last().map_or(0, |(id, _)| *id) + 1);
        let mut scanned = Vec::new();
        let last = log
            .scan_from(from, 7, &mut |e| scanned.push(e.event_id.0))
            .await
            .unwrap();
        let page = log.read_from(from, 7).await.unwrap();
        let ids: Vec<u64> = page.iter().map(|e| e.event_id.0).collect();
        assert_eq!(ids, scanned);
        assert_eq!(last.map(|id| id.0), ids.last().copied());
        let full = page.len() == 7;
        out.extend(page.into_iter().map(|e| (e.event_id.0, e.run_id.0)));
        if !full {
            return out;
        }
    }
}

/// What must hold of a log after a collect of the done runs, whether it happened or not
/// (`moved`): every run reads back as before, the live log lists what it should, verify is
/// clean, appends go on (and never to a moved run).
async fn check(
    fs: &Arc<SimFs>,
    before: &BTreeMap<String, Vec<Event>>,
    all: &[(u64, String)],
    moved: bool,
    at: &str,
) {
    let report = verify_with(fs.clone(), "/data").unwrap();
    assert!(report.is_clean(), "{at}: {report:?}");
    for index_files in [true, false] {
        if !index_files {
            remove_index_files(fs.as_ref(), Path::new("/data"));
        }
        let reader = FileLog::open_read_only_with(fs.clone(), "/data").unwrap();
        let expected = if moved {
            without_done(all)
        } else {
            all.to_vec()
        };
        assert_eq!(all_ids(&reader).await, expected, "{at}: the live log");
        assert_eq!(paged(&reader).await, expected, "{at}: pages of 7 events");
        assert_eq!(
            &runs_of(&reader).await,
            before,
            "{at}: every run, live or archived"
        );
    }
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    assert_eq!(&runs_of(&log).await, before, "{at}: through a writing open");
    let listed: Vec<String> = (log.list_runs().await.unwrap().into_iter())
        .map(|r| r.run_id.0)
        .collect();
    assert_eq!(
        listed.iter().any(|r| r.starts_with("done")),
        !moved,
        "{at}: {listed:?}"
    );
    append(&log, "kept0", vec![sized("after", 10)]).await;
    append(&log, "new", vec![created()]).await;
    if moved {
        let refused = log
            .append(&RunId::from("done0"), Seq(8), vec![sized("x", 1)])
            .await;
        assert!(
            matches!(refused, Err(StoreError::Invalid { .. })),
            "{at}: {refused:?}"
        );
    }
}

/// Whether a writing open of `fs` (which settles any unfinished swap) finds the done runs
/// gone from the live log.
async fn done_moved(fs: &Arc<SimFs>) -> bool {
    let reopened = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    let live = all_ids(&reopened).await;
    !live.iter().any(|(_, r)| r.starts_with("done"))
}

#[tokio::test]
async fn collected_runs_leave_the_live_segments_and_read_back_byte_for_byte() {
    let (fs, before, all) = built(small()).await;
    let segments = segment_files(fs.as_ref());
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    let collected = log.collect(&ids(&DONE)).unwrap();
    assert_eq!(collected.moved, ids(&DONE));
    assert_eq!((collected.events, collected.left.len()), (21, 0));
    assert!(collected.segments >= 2, "{collected:?}");
    assert!(
        collected.live_bytes_after + 21 * 300 < collected.live_bytes_before,
        "{collected:?}"
    );
    assert_eq!(
        collected.archive.as_deref(),
        Some("archive/00000000000000000001.arc")
    );
    assert_eq!(all_ids(&log).await, without_done(&all), "the open log");
    assert_eq!(
        runs_of(&log).await,
        before,
        "the moved runs from the archive"
    );
    assert_eq!(
        segment_files(fs.as_ref()),
        segments,
        "every segment keeps its name"
    );
    // Collecting them again finds them gone from the live log.
    let again = log.collect(&ids(&DONE[..1]));
    assert!(
        matches!(again, Err(StoreError::NotFound { .. })),
        "{again:?}"
    );
    // Compacted segments compress like any sealed segment and read the same.
    assert!(!log.compress_cold(0).unwrap().is_empty());
    assert_eq!(all_ids(&log).await, without_done(&all), "compressed");
    assert_eq!(runs_of(&log).await, before);
    drop(log);
    let leftovers = fs.list(Path::new("/data/archive")).unwrap();
    assert_eq!(leftovers, ["00000000000000000001.arc"], "no manifest left");
    check(&fs, &before, &all, true, "after a collect").await;
}

#[tokio::test]
async fn runs_in_the_live_segment_are_left_and_unknown_runs_change_nothing() {
    let (fs, before, all) = built(small()).await;
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    let unknown = log.collect(&ids(&["done0", "nope"]));
    assert!(
        matches!(unknown, Err(StoreError::NotFound { .. })),
        "{unknown:?}"
    );
    let collected = log.collect(&ids(&["kept0", "kept1"])).unwrap();
    assert_eq!(collected.left, ids(&KEPT));
    assert_eq!((collected.archive, collected.segments), (None, 0));
    assert_eq!(all_ids(&log).await, all);
    assert_eq!(runs_of(&log).await, before);
    // A kept run takes appends again once its collect is over.
    append(&log, "kept1", vec![sized("again", 10)]).await;
}

#[tokio::test]
async fn compressed_segments_are_rewritten_compressed() {
    let (fs, before, all) = built(small()).await;
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    let compressed = log.compress_cold(0).unwrap();
    assert!(!compressed.is_empty());
    let collected = log.collect(&ids(&DONE)).unwrap();
    assert!(collected.segments >= 2, "{collected:?}");
    assert_eq!(runs_of(&log).await, before);
    drop(log);
    let zstd = [0x28, 0xb5, 0x2f, 0xfd];
    let cold: Vec<bool> = (segment_files(fs.as_ref()).iter())
        .map(|n| read(fs.as_ref(), &Path::new("/data/segments").join(n)).starts_with(&zstd))
        .collect();
    assert_eq!(
        cold.iter().filter(|c| **c).count(),
        compressed.len(),
        "{cold:?}"
    );
    check(&fs, &before, &all, true, "compressed").await;
}

/// A collect of the done runs on a copy of `base`, the power lost at its sync `at` (`seed`
/// choosing which pending renames survive): what it answered, and the disk after the power
/// loss (`None` when the collect synced fewer times).
fn collect_losing_power(
    base: &SimFs,
    at: u32,
    seed: u64,
) -> (
    Result<apollo11_log::Collected, StoreError>,
    Option<Arc<SimFs>>,
) {
    let fs = Arc::new(base.power_loss(0));
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    fs.set_fault(Some(Fault::PowerLossAtSync { at, seed }));
    let outcome = log.collect(&ids(&DONE));
    let crashed = fs.crashed();
    drop(log);
    (outcome, crashed.map(Arc::new))
}

#[tokio::test]
async fn a_power_loss_at_every_sync_of_a_collect_leaves_the_old_or_the_new_state() {
    let (base, before, all) = built(small()).await;
    let mut outcomes = BTreeMap::new();
    // Seeds decide which of the renames pending at the sync survive: every subset is met.
    for seed in 0..8 {
        for at in 0.. {
            let (outcome, crashed) = collect_losing_power(&base, at, seed);
            let Some(after) = crashed else {
                assert!(outcome.is_ok(), "{outcome:?}");
                break;
            };
            assert!(outcome.is_err(), "a collect that lost power reports it");
            let manifest = after.list(Path::new("/data/archive")).unwrap_or_default();
            let manifest = manifest.iter().any(|n| n.ends_with(".gc"));
            if manifest {
                // verify names the unfinished swap (or, when its half-done state reads as
                // damage, reports the gc in progress); a repair plan is refused until it is
                // finished, and `repair` finishes it rather than cut anything.
                match verify_with(after.clone(), "/data") {
                    Ok(report) => assert_eq!(report.unfinished_gc.len(), 1, "{report:?}"),
                    Err(e) => assert!(matches!(e, StoreError::GcInProgress { .. }), "{e:?}"),
                }
                let plan = plan_repair_with(after.clone(), "/data");
                assert!(
                    matches!(
                        plan,
                        Err(StoreError::Invalid { .. } | StoreError::GcInProgress { .. })
                    ),
                    "{plan:?}"
                );
                if seed % 2 == 1 {
                    let repaired = repair_with(after.clone(), "/data").unwrap();
                    assert_eq!(repaired.damage, None, "nothing to cut: {repaired:?}");
                    assert!(repaired.kept_in.is_empty(), "{repaired:?}");
                }
            }
            // The writing open decides: the swap finished or forgotten.
            let moved = done_moved(&after).await;
            // A manifest left means the archive was in place: the open finishes the swap.
            assert!(
                moved || !manifest,
                "power loss at sync {at}: a manifest left, not moved"
            );
            let at = format!("power loss at sync {at}, seed {seed}");
            check(&after, &before, &all, moved, &at).await;
            *outcomes.entry(moved).or_insert(0) += 1;
        }
    }
    assert_eq!(
        outcomes.len(),
        2,
        "old and new states both met: {outcomes:?}"
    );
}

/// A swap left half done by a power loss (its manifest there, some segments renamed over,
/// others not): a read-only open and `verify` never call that damage. They read the state
/// when it reads whole, else report the gc in progress, naming its manifest; a writing open
/// then finishes the swap and they read the new state.
#[tokio::test]
async fn a_read_only_open_and_verify_beside_a_half_done_swap_report_a_gc_in_progress() {
    let (base, before, all) = built(small()).await;
    let mut in_progress = 0;
    for seed in 0..8 {
        for at in 0.. {
            let Some(after) = collect_losing_power(&base, at, seed).1 else {
                break;
            };
            let Some(manifest) = (after.list(Path::new("/data/archive")).unwrap_or_default())
                .into_iter()
                .find(|n| n.ends_with(".gc"))
            else {
                continue;
            };
            let manifest = format!("archive/{manifest}");
            let opened = FileLog::open_read_only_with(after.clone(), "/data");
            let verified = verify_with(after.clone(), "/data");
            match (&opened, &verified) {
                (Ok(_), Ok(report)) => assert!(report.is_clean(), "{report:?}"),
                (
                    Err(StoreError::GcInProgress { manifest: named }),
                    Err(StoreError::GcInProgress { .. }),
                ) => {
                    assert_eq!(named, &manifest);
                    let said = opened.as_ref().err().unwrap().to_string();
                    assert!(said.contains("a gc is in progress (archive/"), "{said}");
                    in_progress += 1;
                }
                _ => panic!("seed {seed}, sync {at}: {:?} / {verified:?}", opened.err()),
            }
            drop(opened);
            assert!(
                done_moved(&after).await,
                "the writing open finished the swap"
            );
            let reader = FileLog::open_read_only_with(after.clone(), "/data").unwrap();
            assert_eq!(runs_of(&reader).await, before);
            assert_eq!(all_ids(&reader).await, without_done(&all));
        }
    }
    assert!(in_progress > 0, "no power loss left a swap half done");
}

/// A copy of `base` where a collect failed at sync `failing` (and every later one), its
/// process then gone: what it did not sync still pending. `None` when the collect succeeded.
fn failed_collect(base: &SimFs, failing: u32) -> Option<Arc<SimFs>> {
    let fs = Arc::new(base.power_loss(0));
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    fs.set_fault(Some(Fault::FailSync(failing)));
    let outcome = log.collect(&ids(&DONE));
    drop(log);
    fs.set_fault(None);
    outcome.is_err().then_some(fs)
}

#[tokio::test]
async fn a_failing_sync_anywhere_in_a_collect_leaves_a_log_the_next_open_settles() {
    let (base, before, all) = built(small()).await;
    for at in 0.. {
        let Some(fs) = failed_collect(&base, at) else {
            assert!(at > 5, "a collect syncs more than {at} times");
            break;
        };
        let moved = done_moved(&fs).await;
        check(&fs, &before, &all, moved, &format!("sync {at} failing")).await;
    }
}

#[tokio::test]
async fn a_power_loss_while_an_open_settles_a_failed_collect_leaves_the_old_or_the_new_state() {
    let (base, before, all) = built(small()).await;
    for failing in 0.. {
        if failed_collect(&base, failing).is_none() {
            break;
        }
        // Power lost at every sync of the open that finishes (or forgets) the swap, or once
        // it syncs no more: the renames a failed directory sync left pending survive in any
        // number (seeds enough that some keep only part of them), so the manifest must stay
        // until they are durable.
        for at in 0.. {
            let mut settled = false;
            for seed in 0..32 {
                let fs = failed_collect(&base, failing).expect("fails as before");
                fs.set_fault(Some(Fault::PowerLossAtSync { at, seed }));
                let opened = FileLog::open_with(fs.clone(), "/data", small());
                let crashed = fs.crashed();
                settled = crashed.is_none();
                assert!(opened.is_ok() || !settled, "{:?}", opened.err());
                let after = Arc::new(crashed.unwrap_or_else(|| fs.power_loss(seed)));
                drop(opened);
                let moved = done_moved(&after).await;
                let at = format!("sync {failing} failing, power lost at sync {at}, seed {seed}");
                check(&after, &before, &all, moved, &at).await;
            }
            if settled {
                break;
            }
        }
    }
}

/// Creates a file through `fs`, synced with its directory.
fn create(fs: &dyn Fs, path: &Path, bytes: &[u8]) {
    let file = fs.open(path, apollo11_log::Mode::CreateNew).unwrap();
    file.write_all_at(bytes, 0).unwrap();
    file.sync_data().unwrap();
    fs.sync_dir(path.parent().unwrap()).unwrap();
}

#[tokio::test]
async fn leftovers_without_a_manifest_are_removed_by_the_next_open() {
    let (fs, before, all) = built(small()).await;
    let first = segment_files(fs.as_ref()).remove(0);
    let torn = Path::new("/data/segments").join(format!("{first}.gc"));
    create(fs.as_ref(), &torn, b"APOLLO11 torn");
    fs.create_dir_all(Path::new("/data/archive")).unwrap();
    let tmp = Path::new("/data/archive/00000000000000000001.arc.tmp");
    create(fs.as_ref(), tmp, b"half an archive");
    let manifest_tmp = Path::new("/data/archive/00000000000000000001.tmp");
    create(fs.as_ref(), manifest_tmp, b"half a manifest");
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    drop(log);
    let names = fs.list(Path::new("/data/segments")).unwrap();
    assert!(!names.iter().any(|n| n.ends_with(".gc")), "{names:?}");
    assert!(fs.list(Path::new("/data/archive")).unwrap().is_empty());
    check(&fs, &before, &all, false, "leftovers removed").await;
}

#[tokio::test]
async fn a_moved_run_takes_no_append_in_the_process_that_appended_to_it() {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    // The writer remembers the last seq of each run it appended to.
    build(&log).await;
    let (before, all) = (runs_of(&log).await, all_ids(&log).await);
    log.collect(&ids(&DONE)).unwrap();
    // done0 holds seqs 1..=7: the next one is refused as it is after a reopen.
    let refused = log
        .append(&RunId::from("done0"), Seq(8), vec![sized("x", 1)])
        .await;
    assert!(
        matches!(refused, Err(StoreError::Invalid { .. })),
        "{refused:?}"
    );
    assert_eq!(all_ids(&log).await, without_done(&all), "nothing written");
    assert_eq!(runs_of(&log).await, before, "done0 read from the archive");
    drop(log);
    check(&fs, &before, &all, true, "an append to a moved run refused").await;
}

/// The offset of the commit record of batch `n` (from 0) in a version 1 segment (after its
/// 24-byte header).
pub(crate) fn commit_of(segment: &[u8], n: usize) -> usize {
    let mut at = 24;
    let mut commits = 0;
    loop {
        let len = u32::from_le_bytes(segment[at..at + 4].try_into().unwrap()) as usize;
        if segment[at + 8] == 2 {
            if commits == n {
                return at;
            }
            commits += 1;
        }
        at += 8 + len;
    }
}

#[tokio::test]
async fn a_damaged_segment_fails_a_collect_leaving_the_old_state_for_repair() {
    let (fs, _, _) = built(small()).await;
    let first = segment_files(fs.as_ref()).remove(0);
    let path = Path::new("/data/segments").join(&first);
    let index_file = first.replace(".seg", ".idx");
    assert!(fs
        .list(Path::new("/data/segments"))
        .unwrap()
        .contains(&index_file));
    // A bit flipped in the count of kept0's first batch's commit record (batches: done0,
    // done1, done2, kept0): what no read of the done runs (for their archive) meets, nor the
    // index file's fingerprint covers.
    let at = commit_of(&read(fs.as_ref(), &path), 3) + 9;
    let file = fs.open(&path, apollo11_log::Mode::Write).unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at as u64).unwrap();
    file.write_all_at(&[byte[0] ^ 1], at as u64).unwrap();
    file.sync_data().unwrap();
    drop(file);
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    let failed = log.collect(&ids(&DONE));
    let Err(StoreError::Corrupted { file, offset, .. }) = &failed else {
        panic!("{failed:?}");
    };
    assert_eq!(file, &format!("segments/{first}"), "{failed:?}");
    assert_eq!(*offset, (at - 9) as u64, "{failed:?}");
    // No manifest, and no archive file either: a copy of runs all still live goes with the
    // failed collect.
    let archive = fs.list(Path::new("/data/archive")).unwrap();
    assert!(archive.is_empty(), "{archive:?}");
    // The old state, not poisoned: appends go on (kept0 reads damaged now), and the next
    // open works.
    append(&log, "new", vec![created()]).await;
    drop(log);
    drop(FileLog::open_with(fs.clone(), "/data", small()).unwrap());
    let repaired = repair_with(fs.clone(), "/data").unwrap();
    let damage = repaired.damage.expect("the flipped bit found");
    assert_eq!(damage.file, format!("segments/{first}"), "{damage:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appenders_go_on_during_a_collect() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FileLog::open(dir.path(), small()).unwrap());
    build(&log).await;
    let before = runs_of(&log).await;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let appender = {
        let (log, done) = (log.clone(), done.clone());
        tokio::spawn(async move {
            let mut appended = 0;
            // Until the collect is over, and at least 50 (across the segments' rolls).
            while appended < 50 || !done.load(std::sync::atomic::Ordering::Acquire) {
                append(&log, "busy", vec![sized("b", 100)]).await;
                appended += 1;
            }
            appended
        })
    };
    // A reader paging through the live log all along: a swap between a page's read and its
    // decoding (a read ahead at stale positions) is read again, never misread.
    let reader = {
        let (log, done) = (log.clone(), done.clone());
        tokio::spawn(async move {
            let mut passes = 0;
            while passes < 3 || !done.load(std::sync::atomic::Ordering::Acquire) {
                let mut ids: Vec<u64> = Vec::new();
                let mut from = EventId(1);
                while let Some(last) = log
                    .scan_from(from, 50, &mut |e| ids.push(e.event_id.0))
                    .await
                    .unwrap()
                {
                    from = EventId(last.0 + 1);
                }
                assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase");
                passes += 1;
            }
            passes
        })
    };
    let collector = log.clone();
    let collected = tokio::task::spawn_blocking(move || collector.collect(&ids(&DONE)))
        .await
        .unwrap()
        .unwrap();
    done.store(true, std::sync::atomic::Ordering::Release);
    let appended = appender.await.unwrap();
    assert!(reader.await.unwrap() >= 3);
    assert_eq!(collected.moved, ids(&DONE));
    assert!(
        collected.pause < std::time::Duration::from_secs(1),
        "{collected:?}"
    );
    assert_eq!(runs_of(&log).await, before);
    let busy = log.read_run(&RunId::from("busy"), Seq(1)).await.unwrap();
    assert_eq!(
        busy.len(),
        appended,
        "every acknowledged append, in the rebuilt index"
    );
    drop(log);
    let reopened = FileLog::open(dir.path(), small()).unwrap();
    assert_eq!(runs_of(&reopened).await, before);
    let busy = reopened
        .read_run(&RunId::from("busy"), Seq(1))
        .await
        .unwrap();
    assert_eq!(busy.len(), appended);
}
