//! What the engine runs on: the store wrapped to keep every acknowledged append (I1), and
//! the media a scenario's generations open it on, with the faults each can suffer.

use crate::scenario::Crash;
use apollo11_core::{RunId, Seq};
use apollo11_log::{Fault, FileLog, Fs, Options, SimFs};
use apollo11_runtime::Leasing;
use apollo11_store::{
    AckLog, Acked, BlobStore, EventStore, IdGaps, MemStore, SnapshotStore, StoreError,
};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// An acknowledged append: its run, its first seq and its events' kinds.
#[derive(Clone, Debug)]
pub struct Ack {
    /// The run.
    pub run: RunId,
    /// The seq of its first event.
    pub seq: Seq,
    /// Each event's kind name, in order.
    pub kinds: Vec<&'static str>,
}

/// Every append acknowledged, over all generations.
#[derive(Clone, Default)]
pub struct Acks(Arc<Mutex<Vec<Ack>>>);

impl Acks {
    /// The acknowledged appends so far.
    pub fn all(&self) -> Vec<Ack> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl AckLog for Acks {
    fn acknowledged(&self, run_id: &RunId, first_seq: Seq, kinds: &[&'static str]) {
        let ack = Ack {
            run: run_id.clone(),
            seq: first_seq,
            kinds: kinds.to_vec(),
        };
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(ack);
    }
}

/// A medium's store as the engine sees it: each acknowledged append recorded.
pub type Recorded<S> = Acked<S, Acks>;

/// Where a scenario's generations keep their events, and what a crash does to it.
// The simulation runs on one current-thread runtime: its futures need not be `Send`.
#[allow(async_fn_in_trait)]
pub trait Medium {
    /// The store opened on it.
    type Store: EventStore + SnapshotStore + BlobStore + 'static;

    /// Whether the engine runs on tokio's paused clock, so that a seed replays exactly; a
    /// medium doing real IO runs on real time instead (a paused clock would jump while the
    /// runtime waits on a socket, and every timeout would strike).
    const SIMULATED_TIME: bool = true;

    /// Opens the store as a new process would.
    ///
    /// # Errors
    ///
    /// Why it does not open (I5 when crashes are all it suffered).
    async fn open(&mut self) -> Result<Arc<Self::Store>, StoreError>;

    /// The leases the engine drives under, when the store is shared (none by default).
    ///
    /// # Errors
    ///
    /// The leases' refusal of their ttl.
    fn leasing(&self, store: &Arc<Recorded<Self::Store>>) -> Result<Option<Leasing>, StoreError> {
        let _ = store;
        Ok(None)
    }

    /// Arms `crash` for the generation about to run; returns false when this medium cannot
    /// suffer it (the generation is then killed instead, at a time drawn from it).
    fn arm(&mut self, crash: Crash) -> bool;

    /// What the death of the process does to `store` at the instant a generation ends, its
    /// drivers aborted (nothing by default: a simulated disk's faults struck already).
    ///
    /// # Errors
    ///
    /// Why the crash could not be brought about.
    async fn crash(&mut self, store: &Self::Store) -> Result<(), String> {
        let _ = store;
        Ok(())
    }

    /// What the next process finds after `crash` (the store is closed).
    fn recover(&mut self, crash: Crash);

    /// Checks what a scrub would: no damage.
    ///
    /// # Errors
    ///
    /// The damage found, named.
    fn verify(&self) -> Result<(), String>;
}

const DATA: &str = "/data";

/// The file log on a simulated disk, in deterministic mode, with small segments so that
/// runs roll segments.
#[derive(Default)]
pub struct SimDisk {
    fs: SimFs,
}

impl Medium for SimDisk {
    type Store = FileLog;

    async fn open(&mut self) -> Result<Arc<FileLog>, StoreError> {
        let options = Options {
            segment_bytes_max: 16 * 1024,
            deterministic: true,
            ..Options::default()
        };
        FileLog::open_with(Arc::new(self.fs.clone()), DATA, options).map(Arc::new)
    }

    fn arm(&mut self, crash: Crash) -> bool {
        let fault = match crash {
            Crash::PowerLoss { at_sync, seed } => Fault::PowerLossAtSync { at: at_sync, seed },
            Crash::SyncError { at_sync } => Fault::FailSync(at_sync),
            Crash::Kill { .. } => return true,
        };
        self.fs.set_fault(Some(fault));
        true
    }

    fn recover(&mut self, crash: Crash) {
        if let Crash::PowerLoss { .. } = crash {
            if let Some(image) = self.fs.crashed() {
                self.fs = image;
            }
        }
        self.fs.set_fault(None);
    }

    fn verify(&self) -> Result<(), String> {
        let report = apollo11_log::verify_with(Arc::new(self.fs.clone()), DATA)
            .map_err(|e| format!("I5: verify fails: {e}"))?;
        match report.damage {
            Some(damage) => Err(format!("I2/I5: verify finds damage: {damage:?}")),
            None => Ok(()),
        }
    }
}

impl SimDisk {
    /// The durable bytes of the event log's segments, each after its name: what two runs of
    /// a seed must agree on byte for byte.
    pub fn log_bytes(&self) -> Vec<u8> {
        let dir = Path::new(DATA).join("segments");
        let mut names = self.fs.list(&dir).unwrap_or_default();
        names.sort();
        let mut bytes = Vec::new();
        for name in names {
            let content = self
                .fs
                .durable_content(&dir.join(&name))
                .unwrap_or_default();
            bytes.extend_from_slice(name.as_bytes());
            bytes.extend_from_slice(&content);
        }
        bytes
    }
}

/// The in-memory store with random gaps between ids: it cannot lose power or fail a sync,
/// so its crashes are kills (its content survives them, as a database's would).
pub struct Memory {
    store: Arc<MemStore>,
}

impl Memory {
    /// An empty store whose id gaps are drawn from `seed`.
    pub fn new(seed: u64) -> Memory {
        Memory {
            store: Arc::new(MemStore::with_id_gaps(IdGaps::Random { seed })),
        }
    }
}

impl Medium for Memory {
    type Store = MemStore;

    async fn open(&mut self) -> Result<Arc<MemStore>, StoreError> {
        Ok(self.store.clone())
    }

    fn arm(&mut self, crash: Crash) -> bool {
        matches!(crash, Crash::Kill { .. })
    }

    fn recover(&mut self, _crash: Crash) {}

    fn verify(&self) -> Result<(), String> {
        Ok(())
    }
}
