//! Index files of sealed segments: opening trusts one only when it matches its segment;
//! otherwise the segment is scanned, as it always was.

use crate::common::{append, buffered, created, sized};
use apollo11_log::{verify, FileLog};
use apollo11_store::StoreError;
use std::path::{Path, PathBuf};

/// A log of 60 events in 8 KiB segments, every event of step `step`.
async fn build(dir: &Path, step: &str) {
    let log = FileLog::open(dir, buffered()).unwrap();
    append(&log, "r", vec![created()]).await;
    for _ in 0..60 {
        append(&log, "r", vec![sized(step, 300)]).await;
    }
}

fn index_of(dir: &Path, segment: &str) -> PathBuf {
    dir.join(segment).with_extension("idx")
}

#[tokio::test]
async fn an_index_file_that_does_not_match_its_segment_is_ignored() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    build(a.path(), "s").await;
    build(b.path(), "t").await;
    let segments = verify(a.path()).unwrap().segments;
    assert!(segments.len() >= 3, "{segments:?}");
    let (first, second) = (&segments[0].file, &segments[1].file);
    let index = index_of(a.path(), second);
    let original = std::fs::read(&index).expect("rolling past a segment indexes it");
    let other_log = std::fs::read(index_of(b.path(), second)).unwrap();
    assert_eq!(other_log.len(), original.len(), "the same layout");
    assert_ne!(other_log, original, "other events");
    // A flipped bit in the middle of the segment: only a scan can see it.
    let segment = a.path().join(second);
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[segments[1].bytes as usize / 2] ^= 0x10;
    std::fs::write(&segment, &bytes).unwrap();
    assert!(
        FileLog::open(a.path(), buffered()).is_ok(),
        "a matching index file is trusted"
    );
    let mut garbled = original.clone();
    garbled[original.len() / 2] ^= 1;
    let mut grown = bytes.clone();
    grown.extend_from_slice(&[0; 4096]);
    let cases = [
        ("garbled", garbled, &bytes),
        (
            "another segment's",
            std::fs::read(index_of(a.path(), first)).unwrap(),
            &bytes,
        ),
        ("another log's", other_log, &bytes),
        ("of a segment that since grew", original.clone(), &grown),
        ("empty", Vec::new(), &bytes),
    ];
    for (case, index_bytes, segment_bytes) in cases {
        std::fs::write(&index, &index_bytes).unwrap();
        std::fs::write(&segment, segment_bytes).unwrap();
        match FileLog::open(a.path(), buffered()) {
            Err(StoreError::Corrupted { file, .. }) => assert_eq!(&file, second, "{case}"),
            Err(other) => panic!("an index file {case}: {other}"),
            Ok(_) => panic!("an index file {case} was trusted: the segment was not scanned"),
        }
    }
    std::fs::remove_file(&index).unwrap();
    std::fs::write(&segment, &bytes).unwrap();
    assert!(
        FileLog::open(a.path(), buffered()).is_err(),
        "no index file"
    );
}

#[tokio::test]
async fn a_writing_open_indexes_sealed_segments_and_a_clean_close_the_last_one() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "s").await;
    let segments = verify(dir.path()).unwrap().segments;
    let indexed = |s: &apollo11_log::SegmentReport| index_of(dir.path(), &s.file).exists();
    assert!(
        segments.iter().all(indexed),
        "rolls and the clean close index every segment"
    );
    for s in &segments {
        std::fs::remove_file(index_of(dir.path(), &s.file)).unwrap();
    }
    drop(FileLog::open_read_only(dir.path()).unwrap());
    assert!(
        !segments.iter().any(indexed),
        "read-only opens write nothing"
    );
    let log = FileLog::open(dir.path(), buffered()).unwrap();
    let (last, sealed) = segments.split_last().unwrap();
    assert!(sealed.iter().all(indexed), "indexed at the writing open");
    assert!(
        !indexed(last),
        "the last segment grows while the log is open"
    );
    append(&log, "r", vec![sized("s", 300)]).await;
    drop(log);
    let segments = verify(dir.path()).unwrap().segments;
    assert!(
        segments.iter().all(indexed),
        "the clean close indexed the last one"
    );
    let log = FileLog::open(dir.path(), buffered()).unwrap();
    assert!(!index_of(dir.path(), &segments.last().unwrap().file).exists());
    assert_eq!(log.recovery().events, 62);
    assert_eq!(crate::common::all_ids(&log).await.len(), 62);
}

#[tokio::test]
async fn the_last_segment_indexed_at_a_clean_close_is_trusted_and_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "s").await;
    let segments = verify(dir.path()).unwrap().segments;
    let last = dir.path().join(&segments.last().unwrap().file);
    // A flip in the last segment's first record: only a scan could see it at open.
    let mut bytes = std::fs::read(&last).unwrap();
    bytes[30] ^= 1;
    std::fs::write(&last, &bytes).unwrap();
    let log = FileLog::open_read_only(dir.path()).unwrap();
    assert_eq!(log.recovery().events, 61, "taken from the index file");
    let read = crate::common::read_everything(&log).await;
    assert!(
        matches!(read, Err(StoreError::Corrupted { .. })),
        "{read:?}"
    );
}

/// Found by the `index_file` fuzz target: an index file whose checksum holds but whose
/// events do not follow from the segments before it (a seq out of step) was trusted, and
/// every open refused the log as damaged at an offset where the segment is intact, while
/// `verify`, which scans segments, found it clean. Such a file is now distrusted and its
/// segment scanned, as when it fails its own checks.
#[tokio::test]
async fn an_index_file_whose_seqs_do_not_follow_is_distrusted_and_its_segment_scanned() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "s").await;
    let report = verify(dir.path()).unwrap();
    let second = &report.segments[1];
    let before = all_events(&FileLog::open_read_only(dir.path()).unwrap()).await;
    let index = index_of(dir.path(), &second.file);
    let mut bytes = std::fs::read(&index).unwrap();
    let crc_at = bytes.len() - 4;
    // The seq of the segment's first event (entries: id u64, offset, seq and run u32), then
    // the file's checksum made valid again.
    let seq_at = crc_at - 20 * second.events as usize + 12;
    bytes[seq_at] ^= 1;
    let crc = crc32fast::hash(&bytes[..crc_at]).to_le_bytes();
    bytes[crc_at..].copy_from_slice(&crc);
    std::fs::write(&index, &bytes).unwrap();
    assert!(verify(dir.path()).unwrap().is_clean());
    let read_only = FileLog::open_read_only(dir.path()).expect("a read-only open scans instead");
    assert_eq!(all_events(&read_only).await, before);
    let log = FileLog::open(dir.path(), buffered()).expect("a writing open scans instead");
    assert_eq!(all_events(&log).await, before);
    drop(log);
    assert_ne!(
        std::fs::read(&index).unwrap(),
        bytes,
        "the writing open rewrote it"
    );
}

async fn all_events(log: &FileLog) -> Vec<apollo11_core::Event> {
    use apollo11_store::EventStore;
    let events = log
        .read_from(apollo11_core::EventId(1), u32::MAX)
        .await
        .unwrap();
    assert_eq!(events.len(), 61);
    events
}
