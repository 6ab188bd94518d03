//! T5: every single-bit flip in a record (its header included) is detected. In a segment
//! that has its index file (a sealed one, or the last after a clean close), the open trusts
//! the index and does not read the segment: a read of the flipped event fails, and `verify`
//! reports the flip, with the file and offset; without an index file, the open is refused
//! with them. Before two later
//! complete batches in the last segment, the open is refused. In the last two batches of the
//! log after a crash (the writer writes a batch while the one before is being synced) the
//! flip is indistinguishable from a torn write, so it is cut, kept in a `.torn` file and
//! reported, never read as data; after a clean close, the index file of the last segment
//! proves those batches were committed, and the flip is damage.

use crate::common::{append, created, read, read_everything, remove_index_files, sized, write};
use apollo11_core::EventId;
use apollo11_log::{verify_with, FileLog, Options, SimFs};
use apollo11_store::{EventStore, StoreError};
use std::path::Path;
use std::sync::Arc;

const FIRST: &str = "segments/00000000000000000001.seg";

struct Layout {
    fs: Arc<SimFs>,
    /// `(segment file, start, end)` of each single-event batch, in order.
    batches: Vec<(String, usize, usize)>,
}

fn options() -> Options {
    Options {
        segment_bytes_max: 4096,
        ..Options::default()
    }
}

/// Five single-event batches: two in the first segment, three in the second (the last).
async fn layout() -> Layout {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/d", options()).unwrap();
    let mut batches = Vec::new();
    let events = [
        created(),
        sized("a", 3000),
        sized("b", 3000),
        sized("c", 64),
        sized("d", 64),
    ];
    for event in events {
        let before = verify_with(fs.clone(), "/d").unwrap().segments;
        append(&log, "r", vec![event]).await;
        let after = verify_with(fs.clone(), "/d").unwrap().segments;
        let last = after.last().unwrap();
        let start = if after.len() > before.len() {
            24
        } else {
            before.last().unwrap().bytes
        };
        batches.push((last.file.clone(), start as usize, last.bytes as usize));
    }
    assert_eq!(batches[1].0, FIRST);
    assert_ne!(
        batches[2].0, FIRST,
        "the third batch rolled to a new segment"
    );
    Layout { fs, batches }
}

/// Flips every bit of `range` of `file` in turn and hands the outcome of a writing open.
fn each_flip(
    layout: &Layout,
    file: &str,
    range: std::ops::Range<usize>,
    check: impl Fn(usize, Result<FileLog, StoreError>),
) {
    let path = Path::new("/d").join(file);
    let original = read(layout.fs.as_ref(), &path);
    for byte in range {
        for bit in 0..8 {
            let mut flipped = original.clone();
            flipped[byte] ^= 1 << bit;
            write(layout.fs.as_ref(), &path, &flipped);
            check(byte, FileLog::open_with(layout.fs.clone(), "/d", options()));
            write(layout.fs.as_ref(), &path, &original);
        }
    }
}

fn assert_refused<T>(
    result: Result<T, StoreError>,
    file: &str,
    byte: usize,
    range: (usize, usize),
) {
    match result {
        Err(StoreError::Corrupted {
            file: f,
            offset,
            reason,
        }) => {
            assert_eq!(f, file, "flip at {byte}: {reason}");
            assert!(
                (range.0 as u64..range.1 as u64).contains(&offset),
                "flip at {byte} reported at {offset}: {reason}"
            );
        }
        Err(other) => panic!("flip at {byte}: wrong error {other}"),
        Ok(_) => panic!("flip at byte {byte} of {file} was not detected"),
    }
}

#[tokio::test]
async fn a_flip_in_an_indexed_sealed_segment_fails_the_read_of_its_event_and_verify() {
    let layout = layout().await;
    let (file, start, end) = layout.batches[0].clone();
    let path = Path::new("/d").join(&file);
    let original = read(layout.fs.as_ref(), &path);
    for byte in (0..24).chain(start..end) {
        for bit in 0..8 {
            let mut flipped = original.clone();
            flipped[byte] ^= 1 << bit;
            write(layout.fs.as_ref(), &path, &flipped);
            let log = FileLog::open_with(layout.fs.clone(), "/d", options())
                .unwrap_or_else(|e| panic!("flip at {byte}: an indexed segment opens: {e}"));
            let read = log.read_from(EventId(1), 1).await;
            // A read checks the records of the batches it reads: the event's own and the
            // commit record that closes its batch (read with it, as another event follows
            // in the segment); the segment header is off every read's path.
            if (start..end).contains(&byte) {
                assert_refused(read.map(|_| ()), &file, byte, (start, end));
            } else {
                assert!(read.is_ok(), "flip at {byte} is off this read's path");
            }
            let everything = read_everything(&log).await;
            assert_eq!(
                everything.is_err(),
                byte >= start,
                "flip at {byte}: {everything:?}"
            );
            drop(log);
            let damage = verify_with(layout.fs.clone(), "/d")
                .unwrap()
                .damage
                .unwrap_or_else(|| panic!("verify missed the flip at {byte}"));
            let range = if byte < 24 { 0..1 } else { start..end };
            assert_eq!(damage.file, file);
            assert!(range.contains(&(damage.offset as usize)), "{damage:?}");
            write(layout.fs.as_ref(), &path, &original);
        }
    }
}

#[tokio::test]
async fn a_flip_in_a_sealed_segment_without_its_index_file_refuses_to_open() {
    let layout = layout().await;
    remove_index_files(layout.fs.as_ref(), Path::new("/d"));
    let (file, start, end) = layout.batches[0].clone();
    each_flip(&layout, &file, start..end, |byte, r| {
        assert_refused(r, &file, byte, (start, end))
    });
    each_flip(&layout, &file, 0..24, |byte, r| {
        assert_refused(r, &file, byte, (0, 1))
    });
}

#[tokio::test]
async fn a_flip_followed_by_two_complete_batches_in_the_last_segment_refuses_to_open() {
    let layout = layout().await;
    // What a crash leaves: no index file of the last segment (only a clean close saves one).
    remove_index_files(layout.fs.as_ref(), Path::new("/d"));
    let (file, start, end) = layout.batches[2].clone();
    each_flip(&layout, &file, start..end, |byte, r| {
        if let Err(StoreError::Corrupted { reason, .. }) = &r {
            assert!(reason.contains("complete batch follows"), "{reason}");
        }
        assert_refused(r, &file, byte, (start, end));
    });
}

#[tokio::test]
async fn a_flip_in_the_last_batch_is_cut_as_a_torn_tail_and_reported() {
    let layout = layout().await;
    let (file, start, end) = layout.batches[4].clone();
    let path = Path::new("/d").join(&file);
    let mut flipped = read(layout.fs.as_ref(), &path);
    flipped[(start + end) / 2] ^= 1;
    write(layout.fs.as_ref(), &path, &flipped);
    // After the clean close that ended `layout`, the last segment's index file records the
    // batch as committed: not a torn write.
    let report = verify_with(layout.fs.clone(), "/d").unwrap();
    let damage = report
        .damage
        .expect("the index file proves the batch was committed");
    assert_eq!(
        (damage.file.as_str(), damage.offset),
        (file.as_str(), start as u64)
    );
    assert!(
        damage.reason.contains("committed data is missing"),
        "{damage:?}"
    );
    assert!(report.torn_tail.is_none());
    flipped[(start + end) / 2] ^= 1;
    write(layout.fs.as_ref(), &path, &flipped);
    // What a crash leaves: no index file of the last segment (only a clean close saves one).
    remove_index_files(layout.fs.as_ref(), Path::new("/d"));
    assert_every_flip_is_cut(&layout, 4);
}

#[tokio::test]
async fn a_flip_in_the_second_to_last_batch_is_cut_with_the_last_as_a_torn_tail() {
    let layout = layout().await;
    remove_index_files(layout.fs.as_ref(), Path::new("/d"));
    // The last batch may have been written while this one was being synced: a crash can
    // leave it torn and the last one whole, so both are cut.
    assert_every_flip_is_cut(&layout, 3);
}

/// Flips every bit of batch `batch` in turn: `verify` reports a torn tail from that batch
/// on, and only the events of the batches before it (one each) as data.
fn assert_every_flip_is_cut(layout: &Layout, batch: usize) {
    let (file, start, end) = layout.batches[batch].clone();
    let path = Path::new("/d").join(&file);
    let original = read(layout.fs.as_ref(), &path);
    for byte in start..end {
        for bit in 0..8 {
            let mut flipped = original.clone();
            flipped[byte] ^= 1 << bit;
            write(layout.fs.as_ref(), &path, &flipped);
            let report = verify_with(layout.fs.clone(), "/d").unwrap();
            let torn = report
                .torn_tail
                .unwrap_or_else(|| panic!("flip at {byte}.{bit} not reported"));
            assert_eq!(
                (torn.file.as_str(), torn.offset),
                (file.as_str(), start as u64)
            );
            assert_eq!(
                report.events, batch as u64,
                "the flipped batch is never read as data"
            );
            write(layout.fs.as_ref(), &path, &original);
        }
    }
    assert_eq!(verify_with(layout.fs.clone(), "/d").unwrap().events, 5);
}
