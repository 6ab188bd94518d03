//! What the engine runs on: a store wrapper that keeps every acknowledged append (I1), and
//! the media a scenario's generations open it on, with the faults each can suffer.

use crate::scenario::Crash;
use apollo11_core::{BlobRef, Event, EventId, RunId, Seq};
use apollo11_log::{Fault, FileLog, Fs, Options, SimFs};
use apollo11_store::{
    BlobStore, EventStore, IdGaps, MemStore, NewEvent, RunSummary, Snapshot, SnapshotStore,
    StoreError, Visitor,
};
use async_trait::async_trait;
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

/// A store that records each append it acknowledges.
pub struct Acked<S> {
    inner: Arc<S>,
    acks: Acks,
}

impl<S> Acked<S> {
    /// `inner`, recording into `acks`.
    pub fn new(inner: Arc<S>, acks: Acks) -> Acked<S> {
        Acked { inner, acks }
    }
}

#[async_trait]
impl<S: EventStore + 'static> EventStore for Acked<S> {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        let kinds = events.iter().map(|e| e.kind.name()).collect();
        let ids = self.inner.append(run_id, expected_seq, events).await?;
        let ack = Ack {
            run: run_id.clone(),
            seq: expected_seq,
            kinds,
        };
        self.acks
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(ack);
        Ok(ids)
    }
    async fn read_run(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError> {
        self.inner.read_run(run_id, from_seq).await
    }
    async fn read_from(&self, from: EventId, max_events: u32) -> Result<Vec<Event>, StoreError> {
        self.inner.read_from(from, max_events).await
    }
    async fn scan_from(
        &self,
        from: EventId,
        max_events: u32,
        visit: &mut Visitor<'_>,
    ) -> Result<Option<EventId>, StoreError> {
        self.inner.scan_from(from, max_events, visit).await
    }
    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.inner.list_runs().await
    }
    async fn last_event_id(&self) -> Result<EventId, StoreError> {
        self.inner.last_event_id().await
    }
}

#[async_trait]
impl<S: SnapshotStore + 'static> SnapshotStore for Acked<S> {
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.inner.save_snapshot(snapshot).await
    }
    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        self.inner.load_snapshot().await
    }
}

#[async_trait]
impl<S: BlobStore + 'static> BlobStore for Acked<S> {
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
        self.inner.put_blob(bytes).await
    }
    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
        self.inner.get_blob(blob).await
    }
}

/// Where a scenario's generations keep their events, and what a crash does to it.
pub trait Medium {
    /// The store opened on it.
    type Store: EventStore + SnapshotStore + BlobStore + 'static;

    /// Opens the store as a new process would.
    ///
    /// # Errors
    ///
    /// Why it does not open (I5 when crashes are all it suffered).
    fn open(&mut self) -> Result<Arc<Self::Store>, StoreError>;

    /// Arms `crash` for the generation about to run; returns false when this medium cannot
    /// suffer it (the generation is then killed instead, at a time drawn from it).
    fn arm(&mut self, crash: Crash) -> bool;

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

    fn open(&mut self) -> Result<Arc<FileLog>, StoreError> {
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

    fn open(&mut self) -> Result<Arc<MemStore>, StoreError> {
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
