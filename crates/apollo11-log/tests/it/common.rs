//! Helpers shared by the log tests.

use apollo11_core::{EventId, EventKind, Payload, RunId, Seq};
use apollo11_log::{Durability, FileLog, Fs, FsFile, FsLock, Mode, Options, SimFs};
use apollo11_store::{conformance::event, EventStore, NewEvent, StoreError};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// A fresh log in a temporary directory that lives as long as the test process.
pub fn real_log() -> Arc<FileLog> {
    let dir = tempfile::tempdir().unwrap().keep();
    Arc::new(FileLog::open(dir, Options::default()).unwrap())
}

/// A fresh log on a fresh simulated file system.
pub fn sim_log() -> Arc<FileLog> {
    Arc::new(FileLog::open_with(Arc::new(SimFs::new()), "/data", small()).unwrap())
}

/// Options with small segments, so tests roll often.
pub fn small() -> Options {
    Options {
        segment_bytes_max: 8 * 1024,
        ..Options::default()
    }
}

/// Options for tests on the real file system that do not test durability.
pub fn buffered() -> Options {
    Options {
        durability: Durability::Buffered,
        ..small()
    }
}

/// A step event with a payload of `bytes` bytes.
pub fn sized(step: &str, bytes: usize) -> NewEvent {
    let payload = if bytes == 0 {
        Payload::Empty
    } else {
        Payload::inline("x".repeat(bytes))
    };
    event(Some(step), EventKind::Started, 1, payload)
}

pub fn created() -> NewEvent {
    event(
        None,
        EventKind::RunCreated {
            workflow: "wf".into(),
        },
        0,
        Payload::Empty,
    )
}

/// Appends `events` as the next seqs of `run`.
pub async fn append(log: &FileLog, run: &str, events: Vec<NewEvent>) -> Vec<u64> {
    let run = RunId::from(run);
    let next = Seq(log.read_run(&run, Seq(1)).await.unwrap().len() as u32 + 1);
    log.append(&run, next, events)
        .await
        .unwrap()
        .into_iter()
        .map(|id| id.0)
        .collect()
}

/// Every event id and run in the log, in order.
pub async fn all_ids(log: &FileLog) -> Vec<(u64, String)> {
    let events = log
        .read_from(apollo11_core::EventId(1), u32::MAX)
        .await
        .unwrap();
    events
        .into_iter()
        .map(|e| (e.event_id.0, e.run_id.0))
        .collect()
}

/// Reads a whole file through `fs`.
pub fn read(fs: &dyn Fs, path: &Path) -> Vec<u8> {
    fs.open(path, apollo11_log::Mode::Read)
        .unwrap()
        .read_all()
        .unwrap()
}

/// Overwrites a whole file through `fs` (synced, so it is what a crash would find too).
pub fn write(fs: &dyn Fs, path: &Path, bytes: &[u8]) {
    let file = fs.open(path, apollo11_log::Mode::Write).unwrap();
    file.set_len(0).unwrap();
    file.write_all_at(bytes, 0).unwrap();
    file.sync_data().unwrap();
}

/// Removes every segment index file of the log in `dir`, as if it had never written any.
pub fn remove_index_files(fs: &dyn Fs, dir: &Path) {
    let segments = dir.join("segments");
    for name in fs.list(&segments).unwrap() {
        if name.ends_with(".idx") {
            fs.remove(&segments.join(name)).unwrap();
        }
    }
}

/// Reads every event of the log from the start; returns how many, or the first error.
pub async fn read_everything(log: &FileLog) -> Result<u64, StoreError> {
    let mut from = 1;
    loop {
        let page = log.read_from(EventId(from), 1_000).await?;
        match page.last() {
            Some(last) => from = last.event_id.0 + 1,
            None => return Ok(from - 1),
        }
    }
}

/// What [`HookedFs`] does with each file it opens: the path, and the file `SimFs` opened.
pub type OpenHook = Box<dyn Fn(&Path, Box<dyn FsFile>) -> Box<dyn FsFile> + Send + Sync>;

/// `SimFs` with a hook on every open (to count opens, or to wrap some files).
pub struct HookedFs {
    pub sim: Arc<SimFs>,
    pub on_open: OpenHook,
}

impl Fs for HookedFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.sim.create_dir_all(dir)
    }
    fn open(&self, path: &Path, mode: Mode) -> io::Result<Box<dyn FsFile>> {
        Ok((self.on_open)(path, self.sim.open(path, mode)?))
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.sim.list(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.sim.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.sim.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.sim.sync_dir(dir)
    }
    fn try_lock(&self, path: &Path, holder: &str) -> io::Result<Option<Box<dyn FsLock>>> {
        self.sim.try_lock(path, holder)
    }
}
