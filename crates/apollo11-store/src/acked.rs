//! [`Acked`] (feature `testing`): a store that tells an [`AckLog`] of every append it
//! acknowledged, fenced ones too, and forwards everything else to the store it wraps. What
//! crash tests and simulations check the final log against: every acknowledged append is
//! in it (I1 of docs/reliability.md).

use crate::{
    BlobStore, EventStore, Fence, Lease, LeaseStore, NewEvent, RunSummary, Snapshot, SnapshotStore,
    StoreError, Subscription, Visitor,
};
use apollo11_core::{BlobRef, Event, EventId, RunId, Seq};
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

#[async_trait]
impl<S: EventStore + ?Sized, L: AckLog> EventStore for Acked<S, L> {
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

    async fn read_run(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError> {
        self.store.read_run(run_id, from_seq).await
    }

    async fn read_event(&self, run_id: &RunId, seq: Seq) -> Result<Option<Event>, StoreError> {
        self.store.read_event(run_id, seq).await
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

    async fn subscribe<'s>(&'s self, after: EventId) -> Result<Subscription<'s>, StoreError> {
        self.store.subscribe(after).await
    }

    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.store.list_runs().await
    }

    async fn last_event_id(&self) -> Result<EventId, StoreError> {
        self.store.last_event_id().await
    }
}

#[async_trait]
impl<S: SnapshotStore + ?Sized, L: AckLog> SnapshotStore for Acked<S, L> {
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.store.save_snapshot(snapshot).await
    }

    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        self.store.load_snapshot().await
    }
}

#[async_trait]
impl<S: BlobStore + ?Sized, L: AckLog> BlobStore for Acked<S, L> {
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
        self.store.put_blob(bytes).await
    }

    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
        self.store.get_blob(blob).await
    }
}

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
