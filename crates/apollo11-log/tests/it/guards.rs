//! Where recovery may cut and where it must refuse: only the last segment can have a torn
//! tail, and only one with no complete batch after the damage. Each case checks that a
//! writing open refuses with the damaged file and offset and leaves every file as it was.

use crate::common::{append, created, read, remove_index_files, sized, write};
use apollo11_log::{verify_with, FileLog, Fs, Options, SimFs};
use apollo11_store::StoreError;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

fn options() -> Options {
    Options {
        segment_bytes_max: 4096,
        preallocate: false,
        ..Options::default()
    }
}

/// A log of `events` events of 1 KiB, as a crash leaves it (no index files).
async fn crashed_log(events: u32) -> Arc<SimFs> {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/d", options()).unwrap();
    append(&log, "r", vec![created()]).await;
    for _ in 1..events {
        append(&log, "r", vec![sized("s", 1000)]).await;
    }
    drop(log);
    remove_index_files(fs.as_ref(), Path::new("/d"));
    fs
}

fn files(fs: &SimFs) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for sub in ["/d/segments", "/d/snapshots", "/d/blobs"] {
        for name in fs.list(Path::new(sub)).unwrap() {
            let path = Path::new(sub).join(&name);
            out.insert(path.display().to_string(), read(fs, &path));
        }
    }
    out
}

/// A writing open must refuse, naming `file` at `offset`, and change nothing.
fn assert_refused(fs: &Arc<SimFs>, file: &str, offset: u64) {
    let before = files(fs);
    match FileLog::open_with(fs.clone(), "/d", options()) {
        Err(StoreError::Corrupted {
            file: f, offset: o, ..
        }) => assert_eq!((f.as_str(), o), (file, offset)),
        Err(other) => panic!("wrong error: {other}"),
        Ok(log) => panic!(
            "opened ({:?}): damage taken for a torn tail",
            log.recovery().torn
        ),
    }
    assert_eq!(files(fs), before, "the refused open changed files");
}

#[tokio::test]
async fn bytes_after_the_last_batch_of_a_segment_that_is_not_the_last_refuse_to_open() {
    let fs = crashed_log(8).await;
    let segments = verify_with(fs.clone(), "/d").unwrap().segments;
    assert!(segments.len() >= 2, "{segments:?}");
    let first = &segments[0];
    let path = Path::new("/d").join(&first.file);
    let mut bytes = read(fs.as_ref(), &path);
    assert_eq!(
        bytes.len() as u64,
        first.bytes,
        "sealed segments are trimmed"
    );
    bytes.extend_from_slice(&[0x5a; 100]);
    write(fs.as_ref(), &path, &bytes);
    assert_refused(&fs, &first.file, first.bytes);
}

#[tokio::test]
async fn an_unreadable_header_of_a_segment_that_is_not_the_last_refuses_to_open() {
    let fs = crashed_log(8).await;
    let segments = verify_with(fs.clone(), "/d").unwrap().segments;
    assert!(segments.len() >= 2, "{segments:?}");
    let first = &segments[0].file;
    // Nothing but a damaged header: no complete batch follows it either.
    write(fs.as_ref(), &Path::new("/d").join(first), &[0x5a; 24]);
    assert_refused(&fs, first, 0);
}

#[tokio::test]
async fn an_unreadable_header_of_the_last_segment_before_a_complete_batch_refuses_to_open() {
    let fs = crashed_log(3).await;
    let segments = verify_with(fs.clone(), "/d").unwrap().segments;
    assert_eq!(segments.len(), 1, "{segments:?}");
    let path = Path::new("/d").join(&segments[0].file);
    let mut bytes = read(fs.as_ref(), &path);
    bytes[3] ^= 1;
    write(fs.as_ref(), &path, &bytes);
    assert_refused(&fs, &segments[0].file, 0);
}
