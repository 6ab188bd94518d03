//! T4: a torn write at every byte offset of the last record, with the rest of the segment
//! zero-filled or random-filled: every reopen recovers exactly the records before it, cuts
//! the rest into a `.torn` file, and then keeps 10 more appends across another reopen.

use crate::common::{all_ids, append, created, read, sized, write};
use apollo11_log::{verify_with, FileLog, Fs, Mode, Options, SimFs};
use std::path::Path;
use std::sync::Arc;

const SEGMENT: &str = "/d/segments/00000000000000000001.seg";

fn options() -> Options {
    Options {
        segment_bytes_max: 16 * 1024,
        ..Options::default()
    }
}

/// A segment holding two committed single-event batches and a third one with a payload of
/// `payload` bytes; returns the segment bytes and where the third batch starts and ends.
async fn three_batches(payload: usize) -> (Vec<u8>, usize, usize) {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/d", options()).unwrap();
    append(&log, "r", vec![created()]).await;
    append(&log, "r", vec![sized("a", 64)]).await;
    let start = verify_with(fs.clone(), "/d").unwrap().segments[0].bytes as usize;
    append(&log, "r", vec![sized("b", payload)]).await;
    let end = verify_with(fs.clone(), "/d").unwrap().segments[0].bytes as usize;
    drop(log);
    (read(fs.as_ref(), Path::new(SEGMENT)), start, end)
}

/// A file system holding only `segment` as the data directory's single segment.
fn with_segment(segment: &[u8]) -> Arc<SimFs> {
    let fs = Arc::new(SimFs::new());
    fs.create_dir_all(Path::new("/d/segments")).unwrap();
    drop(fs.open(Path::new(SEGMENT), Mode::CreateNew).unwrap());
    write(fs.as_ref(), Path::new(SEGMENT), segment);
    fs
}

async fn torn_at_every_offset(payload: usize) {
    let (bytes, start, end) = three_batches(payload).await;
    let mut noise = 0x1234_5678_9abc_def0u64;
    let mut cases = 0;
    for cut in start..end {
        for random_rest in [false, true] {
            let mut torn = bytes.clone();
            for b in &mut torn[cut..] {
                *b = if random_rest {
                    noise ^= noise << 13;
                    noise ^= noise >> 7;
                    noise ^= noise << 17;
                    noise as u8
                } else {
                    0
                };
            }
            let fs = with_segment(&torn);
            let log = FileLog::open_with(fs.clone(), "/d", options())
                .unwrap_or_else(|e| panic!("cut at {cut}, random {random_rest}: {e}"));
            // A cut that only drops bytes that were zero anyway leaves the batch intact.
            let intact = torn[start..end] == bytes[start..end];
            let kept = if intact { 3 } else { 2 };
            assert_eq!(
                log.recovery().events,
                kept,
                "cut at {cut}, random rest {random_rest}"
            );
            let recovered_end = if intact { end } else { start };
            let garbage_after = torn[recovered_end..].iter().any(|&b| b != 0);
            assert_eq!(log.recovery().torn.is_some(), garbage_after, "cut at {cut}");
            for i in 0..10 {
                append(&log, "r", vec![sized(&format!("after{i}"), 8)]).await;
            }
            drop(log);
            let log = FileLog::open_with(fs.clone(), "/d", options()).unwrap();
            let ids: Vec<u64> = all_ids(&log).await.into_iter().map(|(id, _)| id).collect();
            assert_eq!(
                ids,
                (1..=kept + 10).collect::<Vec<_>>(),
                "cut at {cut}, random rest {random_rest}"
            );
            assert!(
                log.recovery().torn.is_none(),
                "the second open finds nothing to cut"
            );
            cases += 1;
        }
    }
    assert_eq!(cases, 2 * (end - start));
}

#[tokio::test]
async fn a_torn_64_byte_record_at_every_offset_recovers_the_records_before_it() {
    torn_at_every_offset(64).await;
}

#[tokio::test]
async fn a_torn_4_kib_record_at_every_offset_recovers_the_records_before_it() {
    torn_at_every_offset(4096).await;
}

#[tokio::test]
async fn the_cut_bytes_are_kept_in_a_torn_file() {
    let (bytes, start, end) = three_batches(64).await;
    let cut = (start + end) / 2;
    let mut torn = bytes.clone();
    torn[cut..].fill(0);
    let fs = with_segment(&torn);
    let log = FileLog::open_with(fs.clone(), "/d", options()).unwrap();
    let info = log.recovery().torn.clone().unwrap();
    assert_eq!(
        (info.offset, info.bytes),
        (start as u64, (cut - start) as u64)
    );
    assert_eq!(info.kept_in, format!("{SEGMENT}.{start}.torn"));
    assert_eq!(
        read(fs.as_ref(), Path::new(&info.kept_in)),
        bytes[start..cut]
    );
}

#[tokio::test]
async fn a_torn_batch_of_a_new_run_leaves_no_trace_of_that_run() {
    use apollo11_store::EventStore;
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/d", options()).unwrap();
    append(&log, "a", vec![created()]).await;
    let start = verify_with(fs.clone(), "/d").unwrap().segments[0].bytes as usize;
    append(&log, "b", vec![created(), sized("x", 100)]).await;
    drop(log);
    let mut bytes = read(fs.as_ref(), Path::new(SEGMENT));
    // Keep the batch's first record (it names run `b`) intact; tear the second.
    let first_len = u32::from_le_bytes(bytes[start..start + 4].try_into().unwrap()) as usize;
    bytes[start + 8 + first_len + 12..].fill(0);
    let fs = with_segment(&bytes);
    let log = FileLog::open_with(fs, "/d", options()).unwrap();
    let runs: Vec<String> = log
        .list_runs()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.run_id.0)
        .collect();
    assert_eq!(runs, ["a"], "run `b` only ever had a torn batch");
    assert!(log
        .read_run(&apollo11_core::RunId::from("b"), apollo11_core::Seq(1))
        .await
        .unwrap()
        .is_empty());
}
