//! The in-memory store: the reference behaviour for the conformance suite, and the store
//! for tests and for embedding without persistence. It can assign event ids with gaps, as a
//! database sequence does, so that the suite and the engine are checked against the
//! contract (ids strictly increase) and not against one backend's habit (dense ids).

mod leases;

use crate::blob::check_blob;
use crate::feed::Published;
use crate::{
    sha256_hex, validate, BlobStore, Clock, Control, ControlStore, Controls, EventStore, NewEvent,
    RunSummary, Snapshot, SnapshotStore, StoreError, Subscription, SystemClock,
};
use apollo11_core::{limits, BlobRef, Event, EventId, RunId, Seq};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::broadcast;

/// Everything in memory, behind one mutex; appended events are pushed to subscribers.
#[derive(Debug)]
pub struct MemStore {
    inner: Mutex<Inner>,
    /// The change feed; sent to under the lock, so a subscription taken under the lock
    /// knows exactly which events it will be pushed.
    feed: broadcast::Sender<Published>,
    /// What leases expire by.
    clock: Arc<dyn Clock>,
}

impl Default for MemStore {
    fn default() -> MemStore {
        MemStore::with_id_gaps(IdGaps::None)
    }
}

/// How a [`MemStore`] assigns event ids. Every mode gives strictly increasing ids.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IdGaps {
    /// 1, 2, 3…: what the file log does.
    #[default]
    None,
    /// 2, 4, 6…
    Even,
    /// Each id 1 to 8 past the previous one, decided by `seed` (the same seed, the same ids).
    Random {
        /// Seeds the generator.
        seed: u64,
    },
}

#[derive(Debug, Default)]
struct Inner {
    gaps: IdGaps,
    /// The generator state of `IdGaps::Random`.
    rng: u64,
    /// Id of the last event (0 before the first).
    last_id: u64,
    /// Every event, in id order.
    events: Vec<Event>,
    /// Indices into `events` of each run's events, in seq order.
    runs: BTreeMap<RunId, Vec<usize>>,
    snapshot: Option<Snapshot>,
    blobs: BTreeMap<String, Vec<u8>>,
    /// Each leased run's lease; its epoch stays when it is released.
    leases: BTreeMap<RunId, LeaseRow>,
    /// Each instance's heartbeat: until when it is alive.
    instances: BTreeMap<String, u64>,
    controls: Controls,
}

/// A run's lease as the store keeps it.
#[derive(Debug)]
struct LeaseRow {
    epoch: u64,
    /// `None` once released.
    holder: Option<(String, u64)>,
    /// Parked: the run needs no driver until it is acquired again.
    parked: bool,
}

impl MemStore {
    /// An empty store with dense ids.
    pub fn new() -> MemStore {
        MemStore::default()
    }

    /// An empty store that assigns ids as `gaps` says.
    pub fn with_id_gaps(gaps: IdGaps) -> MemStore {
        let rng = match gaps {
            IdGaps::Random { seed } => seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            IdGaps::None | IdGaps::Even => 0,
        };
        MemStore {
            inner: Mutex::new(Inner {
                gaps,
                rng,
                ..Inner::default()
            }),
            feed: broadcast::channel(limits::CHANGE_FEED_EVENTS_MAX as usize).0,
            clock: Arc::new(SystemClock),
        }
    }

    /// The same store with leases expiring by `clock` instead of the system's.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> MemStore {
        self.clock = clock;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave `Inner` half-updated: every mutation
        // is a push after all checks passed.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Inner {
    /// The id of the next event appended.
    fn next_id(&mut self) -> EventId {
        let step = match self.gaps {
            IdGaps::None => 1,
            IdGaps::Even => 2,
            IdGaps::Random { .. } => {
                // xorshift64*: deterministic for a seed.
                self.rng ^= self.rng >> 12;
                self.rng ^= self.rng << 25;
                self.rng ^= self.rng >> 27;
                1 + self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % 8
            }
        };
        self.last_id += step;
        EventId(self.last_id)
    }
}

impl MemStore {
    /// An append, fenced by `epoch` when there is one: the epoch, the seq and the write
    /// under one lock.
    fn append_checked(
        &self,
        run_id: &RunId,
        epoch: Option<u64>,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        validate(run_id, &events)?;
        let mut inner = self.lock();
        if let Some(epoch) = epoch {
            let current = inner.leases.get(run_id).map_or(0, |l| l.epoch);
            if epoch != current {
                return Err(StoreError::Fenced {
                    run_id: run_id.clone(),
                    epoch,
                    current,
                });
            }
        }
        let actual = inner.runs.get(run_id).map_or(0, |ix| ix.len() as u32);
        if expected_seq.0 != actual + 1 {
            return Err(StoreError::Conflict {
                run_id: run_id.clone(),
                expected: expected_seq,
                actual: Seq(actual),
            });
        }
        let mut ids = Vec::with_capacity(events.len());
        for (i, new) in events.into_iter().enumerate() {
            let id = inner.next_id();
            let seq = Seq(expected_seq.0 + i as u32);
            let index = inner.events.len();
            inner.events.push(new.into_event(id, run_id.clone(), seq));
            inner.runs.entry(run_id.clone()).or_default().push(index);
            ids.push(id);
        }
        if self.feed.receiver_count() > 0 {
            let appended = &inner.events[inner.events.len() - ids.len()..];
            for event in appended {
                // No subscriber is no error: there is nobody to tell.
                let _ = self.feed.send(Ok(Arc::new(event.clone())));
            }
        }
        Ok(ids)
    }
}

#[async_trait]
impl EventStore for MemStore {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        self.append_checked(run_id, None, expected_seq, events)
    }

    async fn subscribe<'s>(&'s self, after: EventId) -> Result<Subscription<'s>, StoreError> {
        let inner = self.lock();
        let live = self.feed.subscribe();
        Ok(Subscription::pushed(
            self,
            after,
            EventId(inner.last_id),
            live,
        ))
    }

    async fn read_run(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError> {
        let inner = self.lock();
        let Some(indices) = inner.runs.get(run_id) else {
            return Ok(Vec::new());
        };
        let skip = from_seq.0.saturating_sub(1) as usize;
        Ok(indices
            .iter()
            .skip(skip)
            .map(|&i| inner.events[i].clone())
            .collect())
    }

    async fn read_from(&self, from: EventId, max_events: u32) -> Result<Vec<Event>, StoreError> {
        let inner = self.lock();
        let start = inner.events.partition_point(|e| e.event_id < from);
        Ok(inner.events[start..]
            .iter()
            .take(max_events as usize)
            .cloned()
            .collect())
    }

    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .runs
            .iter()
            .map(|(run_id, ix)| {
                let last = &inner.events[*ix.last().expect("a listed run has events")];
                RunSummary {
                    run_id: run_id.clone(),
                    last_seq: last.seq,
                    last_event_id: last.event_id,
                }
            })
            .collect())
    }

    async fn last_event_id(&self) -> Result<EventId, StoreError> {
        Ok(EventId(self.lock().last_id))
    }
}

#[async_trait]
impl SnapshotStore for MemStore {
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.lock().snapshot = Some(snapshot);
        Ok(())
    }

    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        Ok(self.lock().snapshot.clone())
    }
}

#[async_trait]
impl BlobStore for MemStore {
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
        let blob = BlobRef {
            sha256: sha256_hex(&bytes),
            bytes: bytes.len() as u64,
        };
        self.lock()
            .blobs
            .entry(blob.sha256.clone())
            .or_insert(bytes);
        Ok(blob)
    }

    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
        let inner = self.lock();
        let bytes = inner
            .blobs
            .get(&blob.sha256)
            .ok_or_else(|| StoreError::NotFound {
                what: format!("blob {}", blob.sha256),
            })?;
        check_blob(blob, bytes, "memory")?;
        Ok(bytes.clone())
    }
}

#[async_trait]
impl ControlStore for MemStore {
    async fn list_controls(&self, prefix: &str) -> Result<Vec<Control>, StoreError> {
        Ok(self.lock().controls.list(prefix))
    }

    async fn put_control(
        &self,
        key: &str,
        expected: u64,
        value: Vec<u8>,
    ) -> Result<u64, StoreError> {
        let mut inner = self.lock();
        let (next, version) = inner.controls.put(key, expected, value)?;
        inner.controls = next;
        Ok(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LeaseStore, ManualClock};
    use std::time::Duration;

    #[tokio::test]
    async fn a_lease_expires_exactly_at_its_ttl_on_the_injected_clock() {
        let clock = ManualClock::at(1_000);
        let store = MemStore::new().with_clock(Arc::new(clock.clone()));
        let r = RunId::from("r");
        let ttl = Duration::from_secs(10);
        let a = store.acquire(&r, "a", ttl).await.unwrap().unwrap();
        assert_eq!(a.expires_at_ms, 11_000);
        clock.advance(Duration::from_millis(9_999));
        assert_eq!(
            store.acquire(&r, "b", ttl).await.unwrap(),
            None,
            "1 ms left"
        );
        clock.advance(Duration::from_millis(1));
        let b = store.acquire(&r, "b", ttl).await.unwrap().unwrap();
        assert_eq!((b.epoch, b.expires_at_ms), (2, 21_000));
    }
}
