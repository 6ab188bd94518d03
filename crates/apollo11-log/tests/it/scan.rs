//! Reading a log whose runs interleave over several segments: `read_run` reads back each
//! run whole (one read per stretch of consecutive events); `scan_runs` hands every event to
//! exactly one visitor, all of a run's events to the same one and in order, and still checks
//! every record: a flip in any byte of a batch (its event or its commit record) fails the
//! scan whichever visitor its run belongs to.

use crate::common::{append, created, read, sized, small, write};
use apollo11_core::{Event, EventId, EventRef, RunId, Seq};
use apollo11_log::{verify_with, FileLog, SimFs};
use apollo11_store::{EventStore, StoreError};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

/// Seven runs appending in turns, over several segments.
async fn interleaved() -> (Arc<SimFs>, FileLog) {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/d", small()).unwrap();
    let runs: Vec<String> = (0..7).map(|r| format!("run-{r}")).collect();
    for run in &runs {
        append(&log, run, vec![created()]).await;
    }
    for turn in 0..12 {
        for (r, run) in runs.iter().enumerate() {
            let events = (0..=(turn + r) % 3).map(|i| sized(&format!("s{i}"), 200));
            append(&log, run, events.collect()).await;
        }
    }
    (fs, log)
}

/// What each of `threads` visitors was handed.
fn scan(log: &FileLog, threads: usize) -> Result<Vec<Vec<Event>>, StoreError> {
    let mut seen: Vec<Vec<Event>> = vec![Vec::new(); threads];
    let mut visitors: Vec<_> = seen
        .iter_mut()
        .map(|events| move |e: &EventRef<'_>| events.push(e.to_event()))
        .collect();
    log.scan_runs(&mut visitors)?;
    drop(visitors);
    Ok(seen)
}

#[tokio::test]
async fn each_run_goes_whole_and_in_order_to_one_visitor() {
    let (fs, log) = interleaved().await;
    let segments = verify_with(fs, "/d").unwrap().segments.len();
    assert!(segments > 2, "the log spans {segments} segments");
    let everything = log.read_from(EventId(1), u32::MAX).await.unwrap();
    for r in 0..7 {
        let run = RunId(format!("run-{r}"));
        let of_run: Vec<&Event> = everything.iter().filter(|e| e.run_id == run).collect();
        for from in [1, 2, 9, of_run.len() as u32 + 1] {
            let read = log.read_run(&run, Seq(from)).await.unwrap();
            let skip = from as usize - 1;
            assert_eq!(
                read.iter().collect::<Vec<_>>(),
                of_run[skip..],
                "{run} from {from}"
            );
        }
    }
    for threads in 1..=3 {
        let seen = scan(&log, threads).unwrap();
        let mut all: Vec<Event> = seen.iter().flatten().cloned().collect();
        all.sort_by_key(|e| e.event_id);
        assert_eq!(all, everything, "{threads} visitors see every event once");
        let mut runs_seen = BTreeSet::new();
        for events in &seen {
            let ids: Vec<u64> = events.iter().map(|e| e.event_id.0).collect();
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "in id order: {ids:?}");
            let runs: BTreeSet<&str> = events.iter().map(|e| e.run_id.as_str()).collect();
            assert!(runs_seen.is_disjoint(&runs), "a run went to two visitors");
            runs_seen.extend(runs);
        }
        if threads > 1 {
            assert!(
                seen.iter().all(|e| !e.is_empty()),
                "the runs are shared out"
            );
        }
    }
}

#[tokio::test]
async fn a_flip_anywhere_in_a_batch_fails_the_scan_whichever_visitor_has_the_run() {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/d", small()).unwrap();
    append(&log, "a", vec![created()]).await;
    append(&log, "b", vec![created()]).await;
    let file = "segments/00000000000000000001.seg";
    let before = verify_with(fs.clone(), "/d").unwrap().segments[0].bytes as usize;
    append(&log, "b", vec![sized("s", 40)]).await;
    let after = verify_with(fs.clone(), "/d").unwrap().segments[0].bytes as usize;
    append(&log, "a", vec![sized("s", 40)]).await;
    drop(log); // a clean close indexes the segment: a flipped one still opens
    let path = Path::new("/d").join(file);
    let original = read(fs.as_ref(), &path);
    // Run "b" goes to the second of two visitors, which checks its events and the commit
    // records of its batches; the first steps over them.
    for byte in before..after {
        let mut flipped = original.clone();
        flipped[byte] ^= 0x10;
        write(fs.as_ref(), &path, &flipped);
        let log = FileLog::open_read_only_with(fs.clone(), "/d").unwrap();
        match scan(&log, 2) {
            Err(StoreError::Corrupted {
                file: f, offset, ..
            }) => {
                assert_eq!(f, file);
                assert!((before..after).contains(&(offset as usize)), "{offset}");
            }
            other => panic!("flip at {byte} not reported: {other:?}"),
        }
        drop(log);
        write(fs.as_ref(), &path, &original);
    }
    let log = FileLog::open_read_only_with(fs.clone(), "/d").unwrap();
    assert_eq!(scan(&log, 2).unwrap().concat().len(), 4);
}

/// `scan_from` reads chunk after chunk ahead of its decoding: over several segments and
/// several chunks, from any id and with any bound, it hands on exactly what `read_from`
/// returns, and a flipped bit in a chunk read ahead still fails it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_over_many_chunks_and_segments_equals_a_read() {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/d", small()).unwrap();
    append(&log, "r", vec![created()]).await;
    for _ in 0..30 {
        append(&log, "r", (0..100).map(|_| sized("s", 20)).collect()).await;
    }
    let segments = verify_with(fs.clone(), "/d").unwrap().segments;
    assert!(segments.len() > 3, "{} segments", segments.len());
    for (from, max) in [
        (1, 3001),
        (1, 1024),
        (1, 1025),
        (500, 2100),
        (1023, 2),
        (3000, 50),
    ] {
        let mut scanned = Vec::new();
        let last = log
            .scan_from(EventId(from), max, &mut |e| scanned.push(e.to_event()))
            .await
            .unwrap();
        let read = log.read_from(EventId(from), max).await.unwrap();
        assert_eq!(scanned, read, "from {from}, at most {max}");
        assert_eq!(last, read.last().map(|e| e.event_id));
    }
    let path = Path::new("/d").join(&segments[2].file);
    let mut bytes = read(fs.as_ref(), &path);
    let middle = segments[2].bytes as usize / 2;
    bytes[middle] ^= 0x08;
    write(fs.as_ref(), &path, &bytes);
    let scanned = log.scan_from(EventId(1), u32::MAX, &mut |_| {}).await;
    assert!(
        matches!(&scanned, Err(StoreError::Corrupted { file, .. }) if *file == segments[2].file),
        "{scanned:?}"
    );
}
