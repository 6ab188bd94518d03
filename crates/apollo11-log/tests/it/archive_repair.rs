//! `repair` against archive files, again and again: an archive file set aside is never
//! overwritten (by a later one set aside, or by a `gc` taking its generation), every archive
//! file holding another run's id is set aside at once, a torn tail is cut before the ids past
//! the end are reserved, and `verify` reports ids past the end beside an empty last segment.

use crate::archive_left::{archive_names, copy_in, flip};
use crate::common::{append, created, read, remove_index_files, small, write};
use crate::gc::{built, ids, DONE};
use apollo11_log::{repair_with, verify_with, FileLog, Fs, SimFs, StoreError};
use std::path::Path;
use std::sync::Arc;

/// `gc` moves `runs` out of the log in `/data` of `fs` and a byte of a run's batch in the
/// archive file it wrote flips; returns that file.
fn collect_and_damage(fs: &Arc<SimFs>, runs: &[&str]) -> String {
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    let archive = log.collect(&ids(runs)).unwrap().archive.unwrap();
    drop(log);
    flip(fs.as_ref(), &Path::new("/data").join(&archive), 40);
    archive
}

/// The name of `file` (relative to the data directory) in the archive folder.
fn in_folder(file: &str) -> String {
    file.strip_prefix("archive/").unwrap().to_owned()
}

/// Two archive files damaged and set aside one after the other: the second `gc` takes a new
/// generation (not the first one's, set aside), and a file already at the name the second
/// would be set aside as (put there by hand) is not overwritten: `.damaged.1` is taken.
#[tokio::test]
async fn an_archive_file_set_aside_is_never_overwritten() {
    let (fs, _, _) = built(small()).await;
    let first = collect_and_damage(&fs, &DONE[..1]);
    let repaired = repair_with(fs.clone(), "/data").unwrap();
    let first_aside = format!("{first}.damaged");
    assert_eq!(repaired.set_aside, std::slice::from_ref(&first_aside));
    let kept = read(fs.as_ref(), &Path::new("/data").join(&first_aside));
    let second = collect_and_damage(&fs, &DONE[1..]);
    assert_ne!(
        second, first,
        "a gc took the generation of a file set aside"
    );
    let by_hand = Path::new("/data").join(format!("{second}.damaged"));
    fs.open(&by_hand, apollo11_log::Mode::CreateNew).unwrap();
    write(fs.as_ref(), &by_hand, b"kept by hand");
    let repaired = repair_with(fs.clone(), "/data").unwrap();
    assert_eq!(repaired.set_aside, [format!("{second}.damaged.1")]);
    assert_eq!(read(fs.as_ref(), &by_hand), b"kept by hand");
    assert_eq!(
        read(fs.as_ref(), &Path::new("/data").join(&first_aside)),
        kept
    );
    let mut expected = [
        in_folder(&first_aside),
        format!("{}.damaged", in_folder(&second)),
        format!("{}.damaged.1", in_folder(&second)),
    ];
    expected.sort();
    assert_eq!(archive_names(fs.as_ref()), expected);
    drop(FileLog::open_with(fs.clone(), "/data", small()).unwrap());
    assert!(verify_with(fs, "/data").unwrap().is_clean());
}

/// Two archive files each holding ids the live log holds for another run: `verify` reports
/// both, `repair` sets both aside (and returns), and the log opens clean.
#[tokio::test]
async fn every_archive_file_holding_another_runs_id_is_set_aside() {
    let (source, _, _) = built(small()).await;
    let log = FileLog::open_with(source.clone(), "/data", small()).unwrap();
    let archives: Vec<String> = [&DONE[..1], &DONE[1..]]
        .iter()
        .map(|runs| log.collect(&ids(runs)).unwrap().archive.unwrap())
        .collect();
    drop(log);
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    append(&log, "other", vec![created(); 80]).await;
    drop(log);
    for archive in &archives {
        copy_in(source.as_ref(), fs.as_ref(), archive);
    }
    let report = verify_with(fs.clone(), "/data").unwrap();
    let problems: Vec<&String> = report.archive_problems.iter().map(|d| &d.file).collect();
    assert_eq!(problems, archives.iter().collect::<Vec<_>>(), "{report:?}");
    let repaired = repair_with(fs.clone(), "/data").unwrap();
    assert_eq!(repaired.set_aside.len(), 2, "{repaired:?}");
    drop(FileLog::open_with(fs.clone(), "/data", small()).unwrap());
    assert!(verify_with(fs, "/data").unwrap().is_clean());
}

/// A log of 3 events, one more batch torn at its end (as a crash leaves it), and the archive file `archive` of
/// `source` copied in (its runs not in the log, its ids past its end).
async fn short_log_with(source: &SimFs, archive: &str) -> Arc<SimFs> {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    append(&log, "short", vec![created(); 3]).await;
    append(&log, "torn", vec![created()]).await;
    drop(log);
    // As a crash would leave it: no index file saved at a clean close.
    remove_index_files(fs.as_ref(), Path::new("/data"));
    let segments = verify_with(fs.clone(), "/data").unwrap().segments;
    let last = segments.last().unwrap();
    let path = Path::new("/data").join(&last.file);
    let mut bytes = read(fs.as_ref(), &path);
    let end = last.bytes as usize;
    bytes[end - 4..end].fill(0);
    write(fs.as_ref(), &path, &bytes);
    copy_in(source, fs.as_ref(), archive);
    fs
}

/// gc's archive files of `DONE[..1]` and `DONE[1..]` (the second's ids the higher).
async fn two_archives() -> (Arc<SimFs>, [String; 2]) {
    let (source, _, _) = built(small()).await;
    let log = FileLog::open_with(source.clone(), "/data", small()).unwrap();
    let first = log.collect(&ids(&DONE[..1])).unwrap().archive.unwrap();
    let second = log.collect(&ids(&DONE[1..])).unwrap().archive.unwrap();
    drop(log);
    (source, [first, second])
}

/// Ids an archive holds past the end of a log ending in a torn tail: the open refuses;
/// `repair` cuts the tail (kept in a `.torn` file) before it reserves the ids, and the log
/// opens clean, its next id past the archived ones.
#[tokio::test]
async fn a_torn_tail_is_cut_before_archived_ids_are_reserved() {
    let (source, [first, _]) = two_archives().await;
    let fs = short_log_with(&source, &first).await;
    let report = verify_with(fs.clone(), "/data").unwrap();
    assert!(
        report.torn_tail.is_some() && report.ids_past_end.is_some(),
        "{report:?}"
    );
    let refused = FileLog::open_with(fs.clone(), "/data", small());
    assert!(matches!(&refused, Err(StoreError::Corrupted { file, .. }) if *file == first));
    let repaired = repair_with(fs.clone(), "/data").unwrap();
    assert_eq!(repaired.kept_in.len(), 1, "{repaired:?}");
    assert!(repaired.reserved.is_some(), "{repaired:?}");
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    let fresh = append(&log, "fresh", vec![created()]).await;
    assert_eq!(fresh[0], report.archives[0].last_event_id + 1);
    drop(log);
    assert!(verify_with(fs, "/data").unwrap().is_clean());
}

/// After a repair that reserved ids, and an open that started an empty segment after them,
/// an archive file holding higher ids: the open refuses it, and `verify` says so too.
#[tokio::test]
async fn verify_reports_ids_past_the_end_beside_an_empty_last_segment() {
    let (source, [first, second]) = two_archives().await;
    let fs = short_log_with(&source, &first).await;
    repair_with(fs.clone(), "/data").unwrap();
    drop(FileLog::open_with(fs.clone(), "/data", small()).unwrap());
    copy_in(source.as_ref(), fs.as_ref(), &second);
    let refused = FileLog::open_with(fs.clone(), "/data", small());
    assert!(
        matches!(&refused, Err(StoreError::Corrupted { file, .. }) if *file == second),
        "{:?}",
        refused.err()
    );
    let report = verify_with(fs.clone(), "/data").unwrap();
    let past = report.ids_past_end.as_ref().map(|d| &d.file);
    assert_eq!(past, Some(&second), "{report:?}");
    assert!(!report.is_clean());
}

/// A damaged archive file holding ids past the log's end, its table still read: `repair`
/// sets it aside and reserves its ids too, so that it holds none given again if it is ever
/// renamed back.
#[tokio::test]
async fn the_ids_of_an_archive_file_set_aside_are_reserved() {
    let (source, [first, _]) = two_archives().await;
    let fs = short_log_with(&source, &first).await;
    flip(fs.as_ref(), &Path::new("/data").join(&first), 40);
    let top = verify_with(source.clone(), "/data").unwrap().archives[0].last_event_id;
    let repaired = repair_with(fs.clone(), "/data").unwrap();
    assert_eq!(repaired.set_aside, [format!("{first}.damaged")]);
    assert!(repaired.reserved.is_some(), "{repaired:?}");
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    let fresh = append(&log, "fresh", vec![created()]).await;
    assert_eq!(fresh[0], top + 1);
}
