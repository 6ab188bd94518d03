//! The storage traits. Async so that network backends fit; the file log answers from its
//! own writer thread and page cache.

use crate::{StoreError, Subscription};
use apollo11_core::{BlobRef, Event, EventId, EventKind, EventRef, Payload, RunId, Seq, StepName};
use async_trait::async_trait;

/// An event before the store assigns it an id; its run and seq come from the append call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEvent {
    /// The step, or `None` for run-level events.
    pub step: Option<StepName>,
    /// What happened.
    pub kind: EventKind,
    /// Attempt number.
    pub attempt: u32,
    /// Wall-clock milliseconds.
    pub at_ms: u64,
    /// Writer instance.
    pub instance: String,
    /// Payload (inline up to the store's limit, else a blob reference).
    pub payload: Payload,
}

impl NewEvent {
    /// The stored event, once the store assigned its id.
    pub fn into_event(self, event_id: EventId, run_id: RunId, seq: Seq) -> Event {
        Event {
            event_id,
            run_id,
            seq,
            step: self.step,
            kind: self.kind,
            attempt: self.attempt,
            at_ms: self.at_ms,
            instance: self.instance,
            payload: self.payload,
        }
    }
}

impl From<Event> for NewEvent {
    /// The event without what the store assigns (id, run, seq): to append a history built
    /// elsewhere, or copy events from one store to another.
    fn from(e: Event) -> NewEvent {
        NewEvent {
            step: e.step,
            kind: e.kind,
            attempt: e.attempt,
            at_ms: e.at_ms,
            instance: e.instance,
            payload: e.payload,
        }
    }
}

/// A run as listed by [`EventStore::list_runs`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSummary {
    /// The run.
    pub run_id: RunId,
    /// Its last seq.
    pub last_seq: Seq,
    /// Id of its last event.
    pub last_event_id: EventId,
}

/// What `EventStore::scan_from` hands each event to, borrowed.
pub type Visitor<'v> = dyn for<'r, 'e> FnMut(&'r EventRef<'e>) + Send + 'v;

/// The append-only event log.
///
/// Event ids are assigned by the store, **strictly increasing** in the order appends become
/// visible, and **not dense**: a backend may skip ids (a database sequence does, and so does
/// a transaction that rolls back). Never compute an id from another (`last + n`), nor a
/// count from ids; read from a watermark with `read_from(last + 1)`, which is right with or
/// without gaps. Each run's `seq` is dense: 1, 2, 3…
#[async_trait]
pub trait EventStore: Send + Sync {
    /// Appends `events` to `run_id`, the first getting seq `expected_seq` and the others the
    /// following seqs. Fails with `Conflict`, writing nothing, unless the run's last seq is
    /// `expected_seq - 1` (0 for a new run). On success every event is durable (in the
    /// store's durability mode) and the assigned ids are returned, strictly increasing.
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError>;

    /// Events of `run_id` with seq ≥ `from_seq`, in seq order. Empty for an unknown run.
    async fn read_run(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError>;

    /// The event of `run_id` with seq `seq`, if there is one.
    async fn read_event(&self, run_id: &RunId, seq: Seq) -> Result<Option<Event>, StoreError> {
        if seq.0 == 0 {
            return Ok(None);
        }
        let mut events = self.read_run(run_id, seq).await?;
        events.truncate(1);
        Ok(events.pop())
    }

    /// At most `max_events` events with id ≥ `from`, in id order: for tailing the log from
    /// a watermark without re-reading it. `from` need not be the id of an event.
    async fn read_from(&self, from: EventId, max_events: u32) -> Result<Vec<Event>, StoreError>;

    /// The events `read_from` would return, handed to `visit` one by one, borrowed; returns
    /// the id of the last one (`None` when there was none). A store that decodes in place
    /// (the file log) allocates nothing per event, which is what a fold of the whole log wants.
    async fn scan_from(
        &self,
        from: EventId,
        max_events: u32,
        visit: &mut Visitor<'_>,
    ) -> Result<Option<EventId>, StoreError> {
        let events = self.read_from(from, max_events).await?;
        events.iter().for_each(|e| visit(&e.view()));
        Ok(events.last().map(|e| e.event_id))
    }

    /// Every event with id > `after`, in id order, each once, as it becomes visible (after
    /// it is durable): a change feed, for live views. A subscriber that falls too far behind
    /// a pushing store is told so ([`Change::FellBehind`](crate::Change::FellBehind)) instead of making the writer wait.
    /// The default polls [`EventStore::read_from`] every
    /// [`POLL_INTERVAL_MS`](crate::feed::POLL_INTERVAL_MS), which adds up to that latency and
    /// never falls behind; stores that can push override it.
    async fn subscribe<'s>(&'s self, after: EventId) -> Result<Subscription<'s>, StoreError> {
        Ok(Subscription::polling(self, after))
    }

    /// Every run, ordered by run id.
    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError>;

    /// Id of the last event in the store (0 when empty); not the number of events.
    async fn last_event_id(&self) -> Result<EventId, StoreError>;
}

/// A cached fold of the log: opaque bytes and the last event id they cover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The last event id folded into `state`.
    pub watermark: EventId,
    /// The serialized state (the runtime's business).
    pub state: Vec<u8>,
}

/// Where snapshots live.
#[async_trait]
pub trait SnapshotStore: Send + Sync {
    /// Saves a snapshot atomically: after a crash either it or the previous one is loaded.
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError>;

    /// The newest valid snapshot, if any; a damaged one is skipped for an older one.
    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError>;
}

/// Content-addressed storage for payloads over the inline limit.
#[async_trait]
pub trait BlobStore: Send + Sync {
    /// Stores `bytes` durably and returns their address. Storing the same bytes twice
    /// returns the same reference.
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError>;

    /// The bytes of a blob, checked against its hash.
    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError>;
}
