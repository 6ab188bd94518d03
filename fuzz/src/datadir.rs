//! A data dir on the simulated file system, filled with a fuzzer's files, and what must hold
//! of it whatever its bytes: no call panics; `verify`, a read-only open and a writing open
//! agree; what a writing open accepted, the next open accepts with an append more; and a
//! log `verify` finds clean opens, or one `repair` cut, reopens.

use crate::block_on;
use apollo11_core::{Event, EventId, EventKind, Payload, RunId, Seq};
use apollo11_log::{
    plan_repair_with, repair_with, verify_with, EventStore, FileLog, Fs, Mode, NewEvent, Options,
    SimFs, Snapshot, SnapshotStore, StoreError,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Where the data dir is on the simulated file system.
pub const DIR: &str = "/data";

/// Small segments, and no preallocation (the simulated disk holds every byte in memory).
pub fn options() -> Options {
    Options {
        segment_bytes_max: 4096,
        preallocate: false,
        ..Options::default()
    }
}

/// A file of the data dir: its path under [`DIR`] and its bytes.
pub type File = (String, Vec<u8>);

/// A fresh simulated file system holding `files` under [`DIR`].
pub fn with_files(files: &[File]) -> SimFs {
    let fs = SimFs::new();
    for sub in ["segments", "snapshots", "blobs"] {
        fs.create_dir_all(&Path::new(DIR).join(sub))
            .expect("a directory of the simulated disk");
    }
    for (name, bytes) in files {
        let file = fs
            .open(&Path::new(DIR).join(name), Mode::CreateNew)
            .expect("a new file of the simulated disk");
        file.write_all_at(bytes, 0)
            .expect("a write to the simulated disk");
    }
    fs
}

/// Every file of the data dir's `segments` and `snapshots` folders.
fn files_of(fs: &SimFs) -> Vec<File> {
    let mut files = Vec::new();
    for sub in ["segments", "snapshots"] {
        let dir = Path::new(DIR).join(sub);
        for name in fs.list(&dir).expect("a listed folder") {
            let bytes = fs
                .open(&dir.join(&name), Mode::Read)
                .and_then(|f| f.read_all());
            files.push((format!("{sub}/{name}"), bytes.expect("a readable file")));
        }
    }
    files
}

/// The files of a log written by the log itself on a fresh simulated disk, by `fill`, then
/// closed cleanly.
pub fn written(fill: impl FnOnce(&FileLog)) -> Vec<File> {
    let fs = SimFs::new();
    let log = FileLog::open_with(Arc::new(fs.clone()), DIR, options()).expect("a new log");
    fill(&log);
    drop(log);
    files_of(&fs)
}

/// A log written by the log itself and closed cleanly: three runs over several segments,
/// with their index files, and a snapshot. The seeds, and the ground the targets that
/// fuzz one file put it on.
pub fn template() -> &'static [File] {
    static FILES: OnceLock<Vec<File>> = OnceLock::new();
    FILES.get_or_init(|| {
        written(|log| {
            block_on(async {
                for seq in 0..30u32 {
                    let run = RunId::from(["alpha", "beta", "gamma"][seq as usize % 3]);
                    let events = vec![probe_event(seq), probe_event(seq + 1)];
                    log.append(&run, Seq(seq / 3 * 2 + 1), events)
                        .await
                        .expect("an append to a new log");
                }
                let snapshot = Snapshot {
                    watermark: EventId(40),
                    state: b"{\"runs\":3}".to_vec(),
                };
                log.save_snapshot(snapshot).await.expect("a snapshot");
            })
        })
    })
}

/// The template with `name` (a path under [`DIR`]) holding `bytes` instead.
pub fn template_with(name: &str, bytes: Vec<u8>) -> Vec<File> {
    let mut files: Vec<File> = template()
        .iter()
        .filter(|(n, _)| n != name)
        .cloned()
        .collect();
    files.push((name.to_owned(), bytes));
    files
}

fn probe_event(n: u32) -> NewEvent {
    NewEvent {
        step: Some(format!("step-{n}").as_str().into()),
        kind: EventKind::Started,
        attempt: 1,
        at_ms: u64::from(n) * 1000,
        instance: "fuzz".into(),
        payload: Payload::inline(format!("payload {n} ").repeat(10)),
    }
}

/// Every event of `log`, by id, checked against what each run's own read returns.
fn read_all(log: &FileLog) -> Result<Vec<Event>, StoreError> {
    let events = block_on(log.read_from(EventId(0), u32::MAX))?;
    for pair in events.windows(2) {
        assert!(
            pair[1].event_id > pair[0].event_id,
            "event ids in a read increase (a compacted segment may skip some): {} then {}",
            pair[0].event_id.0,
            pair[1].event_id.0
        );
    }
    for run in block_on(log.list_runs())? {
        let own = block_on(log.read_run(&run.run_id, Seq(0)))?;
        let all: Vec<&Event> = events.iter().filter(|e| e.run_id == run.run_id).collect();
        assert_eq!(own.iter().collect::<Vec<_>>(), all, "run {}", run.run_id);
    }
    Ok(events)
}

/// Checks the properties of the module's notes on `fs`. Without `strict`, a log `verify`
/// finds clean may still be refused: an index file given a valid checksum by the fuzzer
/// (no crash writes one) can point reads into the middle of a record, which only reading
/// every record at open would catch (index files exist not to), and reads then refuse.
pub fn check(fs: &SimFs, strict: bool) {
    let dir = PathBuf::from(DIR);
    let shared: Arc<dyn Fs> = Arc::new(fs.clone());
    let clean = strict && verify_with(shared.clone(), &dir).is_ok_and(|r| r.is_clean());
    let _ = plan_repair_with(shared.clone(), &dir);
    let read_only = FileLog::open_read_only_with(shared.clone(), &dir)
        .ok()
        .and_then(|log| read_all(&log).ok());
    match FileLog::open_with(shared.clone(), &dir, options()) {
        // An open checks records' framing and heads; reads decode them whole, and refuse
        // (as `verify` does) a committed record whose checksum holds over a body that is
        // no event: no crash writes one.
        Ok(log) => match read_all(&log) {
            Ok(events) => {
                if let Some(read_only) = read_only {
                    assert_eq!(read_only, events, "read-only and writing opens read alike");
                }
                append_and_reopen(log, events, shared);
            }
            Err(e) => assert!(!clean, "verify found the log clean, a read refused: {e}"),
        },
        Err(e) => {
            assert!(!clean, "verify found the log clean, its open refused: {e}");
            if matches!(e, StoreError::Corrupted { .. })
                && repair_with(shared.clone(), &dir).is_ok()
            {
                FileLog::open_with(shared, &dir, options()).expect("a repaired log opens");
            }
        }
    }
}

/// Appends one event to a writing-opened `log` holding `events`, closes it, and checks that
/// the next open finds them and the new one.
fn append_and_reopen(log: FileLog, mut events: Vec<Event>, fs: Arc<dyn Fs>) {
    let run = RunId::from("fuzz-probe");
    let seq = events.iter().filter(|e| e.run_id == run).count() as u32 + 1;
    let appended = block_on(log.append(&run, Seq(seq), vec![probe_event(seq)]));
    if let Ok(ids) = appended {
        let new = block_on(log.read_from(ids[0], 1)).expect("an appended event reads back");
        events.extend(new);
    }
    drop(log);
    let reopened = FileLog::open_with(fs, DIR, options()).expect("a log closed cleanly reopens");
    let again = read_all(&reopened).expect("a reopened log reads");
    assert_eq!(
        again, events,
        "a reopened log holds what it held, and the append"
    );
}
