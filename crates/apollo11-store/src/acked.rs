//! [`Acked`] (feature `testing`): a store that tells an [`AckLog`] of every append it
//! acknowledged, fenced ones too, and forwards everything else to the store it wraps. What
//! crash tests and simulations check the final log against: every acknowledged append is
//! in it (I1 of docs/reliability.md).

use crate::forward::{forward_event_store, forward_snapshots_and_blobs};
use crate::{BlobStore, EventStore, Fence, Lease, LeaseStore, NewEvent, SnapshotStore, StoreError};
use apollo11_core::{EventId, RunId, Seq};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// Where an [`Acked`] store records what it acknowledged.
pub trait AckLog: Send + Sync {
    /// The events of `kinds` (each event's kind name, in order) were appended to `run_id`,
    /// the first at `first_seq`, and the store acknowledged them. Called after the answer,
    /// before the caller sees it.
    fn acknowledged(&self, run_id: &RunId, first_seq: Seq, kinds: &[&'static str]);
}

/// `store`, recording every append it acknowledges in `log`.
pub struct Acked<S: ?Sized, L> {
    store: Arc<S>,
    log: L,
}

impl<S: ?Sized, L> Acked<S, L> {
    /// `store`, recording into `log`.
    pub fn new(store: Arc<S>, log: L) -> Acked<S, L> {
        Acked { store, log }
    }

    /// The store wrapped.
    pub fn inner(&self) -> &Arc<S> {
        &self.store
    }

    /// Where the acknowledged appends are recorded.
    pub fn log(&self) -> &L {
        &self.log
    }
}

impl<S: ?Sized, L: AckLog> Acked<S, L> {
    /// An append's `answer`, recorded when it acknowledges `kinds`.
    fn recorded(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        kinds: &[&'static str],
        answer: Result<Vec<EventId>, StoreError>,
    ) -> Result<Vec<EventId>, StoreError> {
        if answer.is_ok() {
            self.log.acknowledged(run_id, expected_seq, kinds);
        }
        answer
    }
}

fn kinds(events: &[NewEvent]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.name()).collect()
}

forward_event_store!(impl[S: EventStore + ?Sized, L: AckLog] for Acked<S, L>, to store, {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        let kinds = kinds(&events);
        let answer = self.store.append(run_id, expected_seq, events).await;
        self.recorded(run_id, expected_seq, &kinds, answer)
    }
});

forward_snapshots_and_blobs!(
    impl[S: SnapshotStore + ?Sized, L: AckLog] SnapshotStore,
    impl[S: BlobStore + ?Sized, L: AckLog] BlobStore,
    for Acked<S, L>, to store
);

#[async_trait]
impl<S: LeaseStore + ?Sized, L: AckLog> LeaseStore for Acked<S, L> {
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
        let answer = self.store.append_fenced(fence, expected_seq, events).await;
        self.recorded(&fence.run_id, expected_seq, &kinds, answer)
    }
}
