//! [`DynStore`]: any backend behind one type, chosen at run time (the file log or a
//! database), for front ends that hold one engine whatever the store.

use crate::{
    BlobStore, EventStore, LeaseStore, NewEvent, RunSummary, Snapshot, SnapshotStore, StoreError,
    Subscription, Visitor,
};
use apollo11_core::{BlobRef, Event, EventId, RunId, Seq};
use async_trait::async_trait;
use std::sync::Arc;

/// What an engine needs of a store, as one object.
pub trait FullStore: EventStore + SnapshotStore + BlobStore + 'static {}
impl<T: EventStore + SnapshotStore + BlobStore + 'static> FullStore for T {}

/// A backend chosen at run time; its leases, when it has them (a store several instances
/// share). Every call goes to the backend's own implementation.
#[derive(Clone)]
pub struct DynStore {
    inner: Arc<dyn FullStore>,
    leases: Option<Arc<dyn LeaseStore>>,
}

impl std::fmt::Debug for DynStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynStore")
            .field("leases", &self.leases.is_some())
            .finish_non_exhaustive()
    }
}

impl DynStore {
    /// A store used by one instance (the file log, whose lock keeps others out).
    pub fn new(store: Arc<impl FullStore>) -> DynStore {
        DynStore {
            inner: store,
            leases: None,
        }
    }

    /// A store shared by instances through its leases.
    pub fn leased<S: FullStore + LeaseStore>(store: Arc<S>) -> DynStore {
        DynStore {
            inner: store.clone(),
            leases: Some(store),
        }
    }

    /// The backend's leases, when it is shared.
    pub fn leases(&self) -> Option<Arc<dyn LeaseStore>> {
        self.leases.clone()
    }
}

#[async_trait]
impl EventStore for DynStore {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        self.inner.append(run_id, expected_seq, events).await
    }

    async fn read_run(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError> {
        self.inner.read_run(run_id, from_seq).await
    }

    async fn read_event(&self, run_id: &RunId, seq: Seq) -> Result<Option<Event>, StoreError> {
        self.inner.read_event(run_id, seq).await
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

    async fn subscribe<'s>(&'s self, after: EventId) -> Result<Subscription<'s>, StoreError> {
        self.inner.subscribe(after).await
    }

    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.inner.list_runs().await
    }

    async fn last_event_id(&self) -> Result<EventId, StoreError> {
        self.inner.last_event_id().await
    }
}

#[async_trait]
impl SnapshotStore for DynStore {
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.inner.save_snapshot(snapshot).await
    }

    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        self.inner.load_snapshot().await
    }
}

#[async_trait]
impl BlobStore for DynStore {
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
        self.inner.put_blob(bytes).await
    }

    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
        self.inner.get_blob(blob).await
    }
}
