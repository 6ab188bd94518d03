//! [`DynStore`]: any backend behind one type, chosen at run time (the file log or a
//! database), for front ends that hold one engine whatever the store.

use crate::forward::{forward_event_store, forward_snapshots_and_blobs};
use crate::{
    BlobStore, Control, ControlStore, EventStore, LeaseStore, NewEvent, SnapshotStore, StoreError,
};
use apollo11_core::{EventId, RunId, Seq};
use std::sync::Arc;

/// What an engine needs of a store, as one object.
pub trait FullStore: EventStore + SnapshotStore + BlobStore + 'static {}
impl<T: EventStore + SnapshotStore + BlobStore + 'static> FullStore for T {}

/// A backend chosen at run time; its controls; its leases, when it has them (a store
/// several instances share). Every call goes to the backend's own implementation.
#[derive(Clone)]
pub struct DynStore {
    inner: Arc<dyn FullStore>,
    controls: Arc<dyn ControlStore>,
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
    pub fn new(store: Arc<impl FullStore + ControlStore>) -> DynStore {
        DynStore {
            inner: store.clone(),
            controls: store,
            leases: None,
        }
    }

    /// A store shared by instances through its leases.
    pub fn leased<S: FullStore + ControlStore + LeaseStore>(store: Arc<S>) -> DynStore {
        DynStore {
            inner: store.clone(),
            controls: store.clone(),
            leases: Some(store),
        }
    }

    /// The backend's leases, when it is shared.
    pub fn leases(&self) -> Option<Arc<dyn LeaseStore>> {
        self.leases.clone()
    }
}

forward_event_store!(impl[] for DynStore, to inner, {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        self.inner.append(run_id, expected_seq, events).await
    }
});

forward_snapshots_and_blobs!(impl[] SnapshotStore, impl[] BlobStore, for DynStore, to inner);

#[async_trait::async_trait]
impl ControlStore for DynStore {
    async fn list_controls(&self, prefix: &str) -> Result<Vec<Control>, StoreError> {
        self.controls.list_controls(prefix).await
    }

    async fn put_control(
        &self,
        key: &str,
        expected: u64,
        value: Vec<u8>,
    ) -> Result<u64, StoreError> {
        self.controls.put_control(key, expected, value).await
    }
}
