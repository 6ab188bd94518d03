//! Cold segments: sealed segments rewritten zstd-compressed read back as they were, through
//! every kind of open, verify and repair; a crash at any sync of a compression leaves one
//! readable copy; damage in a compressed file is named; the background compactor compresses
//! what the writer seals.

use crate::common::{all_ids, append, created, read, sized, small, write};
use apollo11_log::{verify_with, Fault, FileLog, Fs, Options, SimFs, StoreError};
use std::path::Path;
use std::sync::Arc;

/// The first bytes of a zstd frame, which a compressed segment starts with.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// A log of 121 events of 300 bytes in 8 KiB segments (6 of them), closed cleanly.
async fn build(fs: &Arc<SimFs>) {
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    append(&log, "r", vec![created()]).await;
    for i in 0..60 {
        append(&log, "r", vec![sized("s", 300)]).await;
        append(&log, &format!("q{}", i % 3), vec![sized("t", 300)]).await;
    }
}

/// The segment files, and whether each is compressed.
fn segments(fs: &dyn Fs) -> Vec<(String, bool)> {
    let dir = Path::new("/data/segments");
    let names = fs.list(dir).unwrap();
    (names.into_iter().filter(|n| n.ends_with(".seg")))
        .map(|n| {
            let cold = read(fs, &dir.join(&n)).starts_with(&ZSTD_MAGIC);
            (n, cold)
        })
        .collect()
}

fn cold_count(fs: &dyn Fs) -> usize {
    segments(fs).iter().filter(|(_, cold)| *cold).count()
}

#[tokio::test]
async fn compressed_segments_read_back_byte_for_byte_through_every_open() {
    let fs = Arc::new(SimFs::new());
    build(&fs).await;
    let before = all_ids(&FileLog::open_read_only_with(fs.clone(), "/data").unwrap()).await;
    let plain: Vec<Vec<u8>> = (segments(fs.as_ref()).iter())
        .map(|(n, _)| read(fs.as_ref(), &Path::new("/data/segments").join(n)))
        .collect();
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    let done = log.compress_cold(1).unwrap();
    let count = segments(fs.as_ref()).len();
    assert!(count >= 5, "{count} segments");
    assert_eq!(
        done.len(),
        count - 2,
        "all but the last and the newest sealed one"
    );
    assert!(
        done.iter().all(|c| c.stored_bytes * 2 < c.plain_bytes),
        "{done:?}"
    );
    assert_eq!(all_ids(&log).await, before, "the open log reads them");
    assert!(log.compress_cold(1).unwrap().is_empty(), "compressed once");
    append(&log, "r", vec![sized("s", 300)]).await;
    drop(log);
    let report = verify_with(fs.clone(), "/data").unwrap();
    assert!(report.is_clean(), "{report:?}");
    let stored: Vec<bool> = report
        .segments
        .iter()
        .map(|s| s.stored_bytes.is_some())
        .collect();
    let on_disk: Vec<bool> = segments(fs.as_ref())
        .iter()
        .map(|(_, cold)| *cold)
        .collect();
    assert_eq!(stored, on_disk);
    // Every open: index files, scans (no index files), read-only, writing.
    for index_files in [true, false] {
        if !index_files {
            crate::common::remove_index_files(fs.as_ref(), Path::new("/data"));
        }
        let read_only = FileLog::open_read_only_with(fs.clone(), "/data").unwrap();
        assert_eq!(all_ids(&read_only).await[..before.len()], before[..]);
        let writing = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
        assert_eq!(all_ids(&writing).await.len(), before.len() + 1);
    }
    // What `zstd -d` would give back: the segment as it was written.
    let first = Path::new("/data/segments").join(&segments(fs.as_ref())[0].0);
    let decoded = zstd::decode_all(read(fs.as_ref(), &first).as_slice()).unwrap();
    assert_eq!(decoded, plain[0]);
}

#[tokio::test]
async fn a_power_loss_at_any_sync_of_a_compression_leaves_one_readable_copy() {
    let base = Arc::new(SimFs::new());
    build(&base).await;
    let before = all_ids(&FileLog::open_read_only_with(base.clone(), "/data").unwrap()).await;
    let mut crashes = 0;
    for at in 0.. {
        // A copy of the log as it is durably (it was closed cleanly: all of it).
        let fs = Arc::new(base.power_loss(0));
        let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
        fs.set_fault(Some(Fault::PowerLossAtSync {
            at,
            seed: at.into(),
        }));
        let outcome = log.compress_cold(0);
        // Before the clean close, whose sync would be the next one.
        let crashed = fs.crashed();
        drop(log);
        let Some(after) = crashed else {
            assert!(outcome.is_ok(), "{outcome:?}");
            break;
        };
        assert!(outcome.is_err(), "a compression that lost power reports it");
        crashes += 1;
        let after = Arc::new(after);
        let report = verify_with(after.clone(), "/data").unwrap();
        assert!(report.is_clean(), "power loss at sync {at}: {report:?}");
        let reopened = FileLog::open_with(after.clone(), "/data", small()).unwrap();
        assert_eq!(all_ids(&reopened).await, before, "power loss at sync {at}");
        // What was compressed stays so; the rest is compressed by the next pass.
        reopened.compress_cold(0).unwrap();
        assert_eq!(
            cold_count(after.as_ref()),
            segments(after.as_ref()).len() - 1
        );
    }
    assert!(crashes >= 8, "{crashes} syncs: two per segment compressed");
}

#[tokio::test]
async fn damage_in_a_compressed_segment_is_named_and_repair_cuts_it_there() {
    // A flip in the second segment's one zstd frame, and one in its block table.
    for (case, from_end) in [("a block", false), ("the block table", true)] {
        let fs = Arc::new(SimFs::new());
        let kept_events = compressed(&fs).await;
        let names = segments(fs.as_ref());
        let second = Path::new("/data/segments").join(&names[1].0);
        let mut bytes = read(fs.as_ref(), &second);
        let at = if from_end {
            bytes.len() - 30
        } else {
            bytes.len() / 3
        };
        bytes[at] ^= 0x40;
        write(fs.as_ref(), &second, &bytes);
        let report = verify_with(fs.clone(), "/data").unwrap();
        let damage = report.damage.clone().expect(case);
        assert_eq!(damage.file, format!("segments/{}", names[1].0), "{case}");
        assert_eq!(damage.offset, 0, "{case}: nothing of it decompresses");
        let reason = &damage.reason;
        assert!(
            reason.starts_with("compressed segment damaged"),
            "{case}: {reason}"
        );
        let expected = if from_end {
            "block table"
        } else {
            "compressed block 0 (segment bytes 0.."
        };
        assert!(reason.contains(expected), "{case}: {reason}");
        assert_eq!(
            report.events, kept_events,
            "{case}: the first segment is intact"
        );
        let refused = FileLog::open_with(fs.clone(), "/data", small()).map(|_| ());
        assert!(
            matches!(&refused, Err(StoreError::Corrupted { file, .. }) if *file == damage.file),
            "{case}: {refused:?}"
        );
        let repaired = apollo11_log::repair_with(fs.clone(), "/data").unwrap();
        assert_eq!(repaired.events_kept, kept_events, "{case}");
        let kept = Path::new(&repaired.kept_in[0]);
        assert_eq!(
            read(fs.as_ref(), kept),
            bytes,
            "{case}: kept whole, compressed"
        );
        let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
        assert_eq!(all_ids(&log).await.len() as u64, kept_events, "{case}");
        append(&log, "r", vec![sized("s", 300)]).await;
    }
}

/// Compresses every sealed segment of a log built in `fs`; returns how many events its first
/// segment holds.
async fn compressed(fs: &Arc<SimFs>) -> u64 {
    build(fs).await;
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    log.compress_cold(0).unwrap();
    drop(log);
    let report = verify_with(fs.clone(), "/data").unwrap();
    report.segments[0].events
}

#[tokio::test]
async fn a_compressed_last_segment_is_followed_by_a_new_one() {
    let fs = Arc::new(SimFs::new());
    compressed(&fs).await;
    // The last (plain) segment gone with every index file, so nothing proves it existed:
    // what `repair` leaves when it cuts a log after a compressed segment.
    let names = segments(fs.as_ref());
    let (last, _) = names.last().unwrap();
    fs.remove(&Path::new("/data/segments").join(last)).unwrap();
    crate::common::remove_index_files(fs.as_ref(), Path::new("/data"));
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    let before = all_ids(&log).await.len();
    append(&log, "r", vec![sized("s", 300)]).await;
    drop(log);
    let log = FileLog::open_with(fs.clone(), "/data", small()).unwrap();
    assert_eq!(all_ids(&log).await.len(), before + 1);
    assert_eq!(
        segments(fs.as_ref()).len(),
        names.len(),
        "a new last segment"
    );
}

#[tokio::test]
async fn the_writer_seals_and_a_thread_of_its_own_compresses() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        compress_after: Some(1),
        ..crate::common::buffered()
    };
    let log = FileLog::open(dir.path(), options.clone()).unwrap();
    append(&log, "r", vec![created()]).await;
    for _ in 0..200 {
        append(&log, "r", vec![sized("s", 300)]).await;
    }
    let expected = all_ids(&log).await;
    let on_disk = || {
        let mut names: Vec<_> = std::fs::read_dir(dir.path().join("segments"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "seg"))
            .collect();
        names.sort();
        let cold = names
            .iter()
            .map(|p| std::fs::read(p).unwrap().starts_with(&ZSTD_MAGIC));
        cold.collect::<Vec<bool>>()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let cold = on_disk();
        let sealed_past_one = cold.len().saturating_sub(2);
        if cold.iter().filter(|&&c| c).count() == sealed_past_one && sealed_past_one >= 3 {
            assert!(cold[..sealed_past_one].iter().all(|&c| c), "{cold:?}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not compressed: {cold:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        all_ids(&log).await,
        expected,
        "reads go to the compressed files"
    );
    drop(log);
    let reopened = FileLog::open(dir.path(), options).unwrap();
    assert_eq!(all_ids(&reopened).await, expected);
}
