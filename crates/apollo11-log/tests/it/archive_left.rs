//! Archive files a `gc` or damage left behind: ids an archive holds past a `repair`'s cut are
//! never given again, a copy a `gc` stopped before its swap left is removed by the next
//! writing open (power lost at every sync of it), and a damaged archive file is set aside by
//! `repair`.

use crate::common::{append, created, read, small};
use crate::gc::{build, built, commit_of, ids, runs_of, segment_files, DONE};
use apollo11_core::{RunId, Seq};
use apollo11_log::{
    plan_repair_with, repair_with, verify_with, EventStore, Fault, FileLog, Fs, SimFs, StoreError,
};
use std::path::Path;
use std::sync::Arc;

/// Flips the lowest bit of the byte at `at` of the file at `path`, synced.
pub(crate) fn flip(fs: &dyn Fs, path: &Path, at: u64) {
    let file = fs.open(path, apollo11_log::Mode::Write).unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 1], at).unwrap();
    file.sync_data().unwrap();
}

pub(crate) fn archive_names(fs: &dyn Fs) -> Vec<String> {
    fs.list(Path::new("/data/archive")).unwrap_or_default()
}

/// Copies the archive file `archive` (relative to the data directory) of the log in `/data`
/// of `from` into the log in `/data` of `to`, under the same name.
pub(crate) fn copy_in(from: &dyn Fs, to: &dyn Fs, archive: &str) {
    let path = Path::new("/data").join(archive);
    to.create_dir_all(Path::new("/data/archive")).unwrap();
    let file = to.open(&path, apollo11_log::Mode::CreateNew).unwrap();
    file.write_all_at(&read(from, &path), 0).unwrap();
    file.sync_data().unwrap();
}

/// A `gc` stopped once its archive file was in place (a copy of the done runs, no
/// manifest), then the live log cut by `repair` before the done runs: the ids up to the
/// highest archived one are reserved, so the next append takes an id above it; the runs cut
/// are read from the archive whole, and `verify` is clean.
#[tokio::test]
async fn ids_an_archive_holds_past_a_repairs_cut_are_never_given_again() {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    build(&log).await;
    let before = runs_of(&log).await;
    log.write_archive(&ids(&DONE)).unwrap();
    drop(log);
    // done0's first batch (the log's first) damaged: the cut keeps nothing.
    let first = Path::new("/data/segments").join(segment_files(fs.as_ref()).remove(0));
    flip(
        fs.as_ref(),
        &first,
        commit_of(&read(fs.as_ref(), &first), 0) as u64 + 9,
    );
    let report = verify_with(fs.clone(), "/data").unwrap();
    let top = report
        .archives
        .iter()
        .map(|a| a.last_event_id)
        .max()
        .unwrap();
    let plan = plan_repair_with(fs.clone(), "/data").unwrap();
    assert_eq!((plan.events_kept, plan.reserve), (0, Some(top)), "{plan:?}");
    let repaired = repair_with(fs.clone(), "/data").unwrap();
    assert!(repaired.reserved.is_some(), "{repaired:?}");
    let report = verify_with(fs.clone(), "/data").unwrap();
    assert!(report.is_clean(), "{report:?}");
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    let fresh = append(&log, "fresh", vec![created()]).await;
    assert!(
        fresh[0] > top,
        "id {} given again (archived up to {top})",
        fresh[0]
    );
    for run in DONE {
        let events = log.read_run(&RunId::from(run), Seq(1)).await.unwrap();
        assert_eq!(events, before[run], "{run} read from the archive");
    }
    drop(log);
    let report = verify_with(fs.clone(), "/data").unwrap();
    assert!(report.is_clean(), "{report:?}");
}

/// An archive file holding an id the live log holds for another run (what a log reusing ids
/// wrote): a writing open refuses it, `verify` reports it, `repair` sets it aside.
#[tokio::test]
async fn an_id_held_by_an_archive_and_the_live_log_for_other_runs_is_damage() {
    let (source, _, _) = built(small()).await;
    let log = FileLog::open_with(source.clone(), "/data", small()).unwrap();
    let written = log.collect(&ids(&DONE)).unwrap();
    drop(log);
    let archive = written.archive.unwrap();
    // Another log whose ids are another run's: the archive copied into it.
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    append(&log, "other", vec![created(); 80]).await;
    drop(log);
    copy_in(source.as_ref(), fs.as_ref(), &archive);
    let refused = FileLog::open_with(fs.clone(), "/data", small());
    assert!(
        matches!(&refused, Err(StoreError::Corrupted { file, .. }) if *file == archive),
        "{:?}",
        refused.err()
    );
    let report = verify_with(fs.clone(), "/data").unwrap();
    assert!(!report.is_clean());
    assert_eq!(report.archive_problems[0].file, archive, "{report:?}");
    repair_with(fs.clone(), "/data").unwrap();
    drop(FileLog::open_with(fs.clone(), "/data", small()).unwrap());
    assert!(verify_with(fs, "/data").unwrap().is_clean());
}

/// A `gc` killed after its archive file's rename, before its manifest: a copy of runs all
/// still live. `verify` names it (clean); the next writing open removes it, and only it: an
/// archive holding runs the live log no longer has stays. Power lost at every sync of that
/// open leaves the copy or nothing, the runs read the same either way.
#[tokio::test]
async fn a_copy_a_gc_left_before_its_swap_is_removed_by_the_next_open() {
    let (fs, before, _) = built(small()).await;
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    let moved = log.collect(&ids(&DONE[..1])).unwrap().archive.unwrap();
    let copy = log.write_archive(&ids(&DONE[1..])).unwrap().file;
    drop(log);
    let report = verify_with(fs.clone(), "/data").unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.leftover_archives, [copy]);
    let mut met = Vec::new();
    for at in 0.. {
        let mut settled = false;
        for seed in 0..8 {
            let image = Arc::new(fs.power_loss(0));
            image.set_fault(Some(Fault::PowerLossAtSync { at, seed }));
            let opened = FileLog::open_with(image.clone(), "/data", small());
            let crashed = image.crashed();
            settled = crashed.is_none();
            drop(opened);
            let after = Arc::new(crashed.unwrap_or_else(|| image.power_loss(seed)));
            met.push(archive_names(after.as_ref()).len());
            let log = FileLog::open_with(after.clone(), "/data", small()).unwrap();
            assert_eq!(runs_of(&log).await, before, "power lost at sync {at}");
            drop(log);
            let names = archive_names(after.as_ref());
            assert_eq!(names, [moved.strip_prefix("archive/").unwrap()]);
            let report = verify_with(after, "/data").unwrap();
            assert!(
                report.is_clean() && report.leftover_archives.is_empty(),
                "{report:?}"
            );
        }
        if settled {
            break;
        }
    }
    assert!(
        met.contains(&1),
        "the copy removed at a writing open: {met:?}"
    );
}

/// A byte flipped in an archive file, in its end record or in a run's batch: a writing open
/// refuses it (when its table is hit) naming the file, the repair plan names it and the runs
/// it loses (when its table still reads), and `repair` renames it `.damaged`; then a writing
/// open works and `verify` is clean.
#[tokio::test]
async fn a_damaged_archive_file_is_set_aside_by_repair() {
    for near_end in [true, false] {
        let (fs, _, _) = built(small()).await;
        let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
        let archive = log.collect(&ids(&DONE)).unwrap().archive.unwrap();
        drop(log);
        let path = Path::new("/data").join(&archive);
        let len = read(fs.as_ref(), &path).len() as u64;
        flip(fs.as_ref(), &path, if near_end { len - 10 } else { 40 });
        let opened = FileLog::open_with(fs.clone(), "/data", small());
        if near_end {
            assert!(
                matches!(&opened, Err(StoreError::Corrupted { file, .. }) if *file == archive),
                "{:?}",
                opened.err()
            );
        }
        drop(opened);
        let plan = plan_repair_with(fs.clone(), "/data").unwrap();
        assert_eq!(plan.damage, None);
        assert_eq!(plan.set_aside.len(), 1, "{plan:?}");
        assert_eq!(plan.set_aside[0].damage.file, archive);
        let runs = (!near_end).then(|| ids(&DONE));
        assert_eq!(plan.set_aside[0].runs, runs, "{plan:?}");
        let repaired = repair_with(fs.clone(), "/data").unwrap();
        assert_eq!(repaired.set_aside, [format!("{archive}.damaged")]);
        let names = archive_names(fs.as_ref());
        assert_eq!(
            names,
            [format!(
                "{}.damaged",
                archive.strip_prefix("archive/").unwrap()
            )]
        );
        let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
        append(&log, "fresh", vec![created()]).await;
        drop(log);
        assert!(verify_with(fs, "/data").unwrap().is_clean());
    }
}
