//! A store that records every acknowledged append in the ack ledger: the file log, or the
//! PostgreSQL store with its leases (whose fenced appends are recorded the same way).

use apollo11_core::{BlobRef, Event, EventId, RunId, Seq};
use apollo11_store::{
    BlobStore, EventStore, Fence, Lease, LeaseStore, NewEvent, RunSummary, Snapshot, SnapshotStore,
    StoreError, Visitor,
};
use async_trait::async_trait;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// Appends a line to a ledger file and fsyncs it.
pub fn ledger_line(file: &Mutex<std::fs::File>, line: &str) {
    let mut f = file.lock().unwrap();
    f.write_all(line.as_bytes())
        .and_then(|()| f.sync_data())
        .expect("ledger write");
}

pub fn open_ledger(path: &Path) -> Mutex<std::fs::File> {
    Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("ledger open"),
    )
}

/// `store`, recording every acknowledged append in the ack ledger `acks`.
pub struct Acked<S> {
    pub store: S,
    pub acks: Mutex<std::fs::File>,
}

impl<S> Acked<S> {
    /// Records `kinds`, appended to `run_id` from `expected_seq`, as acknowledged.
    fn record(&self, run_id: &RunId, expected_seq: Seq, kinds: &[&str]) {
        let lines: String = kinds
            .iter()
            .enumerate()
            .map(|(i, k)| format!("{run_id} {} {k}\n", expected_seq.0 + i as u32))
            .collect();
        ledger_line(&self.acks, &lines);
    }
}

fn kinds(events: &[NewEvent]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.name()).collect()
}

#[async_trait]
impl<S: EventStore> EventStore for Acked<S> {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        let kinds = kinds(&events);
        let ids = self.store.append(run_id, expected_seq, events).await?;
        self.record(run_id, expected_seq, &kinds);
        Ok(ids)
    }
    async fn read_run(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError> {
        self.store.read_run(run_id, from_seq).await
    }
    async fn read_from(&self, from: EventId, max_events: u32) -> Result<Vec<Event>, StoreError> {
        self.store.read_from(from, max_events).await
    }
    async fn scan_from(
        &self,
        from: EventId,
        max_events: u32,
        visit: &mut Visitor<'_>,
    ) -> Result<Option<EventId>, StoreError> {
        self.store.scan_from(from, max_events, visit).await
    }
    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.store.list_runs().await
    }
    async fn last_event_id(&self) -> Result<EventId, StoreError> {
        self.store.last_event_id().await
    }
}

#[async_trait]
impl<S: SnapshotStore> SnapshotStore for Acked<S> {
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.store.save_snapshot(snapshot).await
    }
    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        self.store.load_snapshot().await
    }
}

#[async_trait]
impl<S: BlobStore> BlobStore for Acked<S> {
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
        self.store.put_blob(bytes).await
    }
    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
        self.store.get_blob(blob).await
    }
}

#[async_trait]
impl<S: LeaseStore> LeaseStore for Acked<S> {
    async fn acquire(
        &self,
        run_id: &RunId,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        self.store.acquire(run_id, owner, ttl).await
    }
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        self.store.renew(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.store.release(lease).await
    }
    async fn lease(&self, run_id: &RunId) -> Result<Option<Lease>, StoreError> {
        self.store.lease(run_id).await
    }
    async fn park(&self, lease: &Lease) -> Result<(), StoreError> {
        self.store.park(lease).await
    }
    async fn heartbeat(&self, owner: &str, ttl: Duration) -> Result<u32, StoreError> {
        self.store.heartbeat(owner, ttl).await
    }
    async fn unclaimed(&self) -> Result<u32, StoreError> {
        self.store.unclaimed().await
    }
    async fn claim(&self, owner: &str, ttl: Duration, max: u32) -> Result<Vec<Lease>, StoreError> {
        self.store.claim(owner, ttl, max).await
    }
    async fn append_fenced(
        &self,
        fence: &Fence,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        let kinds = kinds(&events);
        let ids = self
            .store
            .append_fenced(fence, expected_seq, events)
            .await?;
        self.record(&fence.run_id, expected_seq, &kinds);
        Ok(ids)
    }
}
