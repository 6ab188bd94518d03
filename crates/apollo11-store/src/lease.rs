//! Leases with fencing: which instance drives a run, for how long, and at which epoch.
//!
//! A run's lease is held by one owner until it expires (`ttl` after it was taken or last
//! renewed, on the store's clock). Every time the lease changes hands its **epoch** grows, and
//! an append that carries a [`Fence`] is accepted only while its epoch is the run's current
//! one ([`LeaseStore::append_fenced`]; a stale one is [`StoreError::Fenced`]): an instance
//! that lost its lease (paused, partitioned, slow) can no longer write for that run, whatever
//! it believes. The file log's writer lock is the single-node form of the same thing: one
//! lease on the whole data directory, held for the life of the process.

use crate::{EventStore, NewEvent, StoreError};
use apollo11_core::{check_name, limits, EventId, NameKind, RunId, Seq};
use async_trait::async_trait;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A run's lease as its owner holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The run.
    pub run_id: RunId,
    /// Who holds it (an instance name).
    pub owner: String,
    /// Grows by one each time the lease is acquired by an owner that did not hold it.
    pub epoch: u64,
    /// When it expires, in milliseconds since the Unix epoch on the store's clock.
    pub expires_at_ms: u64,
}

impl Lease {
    /// The token that fences this owner's appends.
    pub fn fence(&self) -> Fence {
        Fence {
            run_id: self.run_id.clone(),
            epoch: self.epoch,
        }
    }

    /// The error every backend answers a renew or release of this lease with once its owner
    /// no longer holds it: [`StoreError::LeaseLost`].
    pub fn lost(&self) -> StoreError {
        StoreError::LeaseLost {
            run_id: self.run_id.clone(),
            owner: self.owner.clone(),
            epoch: self.epoch,
        }
    }
}

/// What a fenced append carries: the run and the epoch its writer holds the lease at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fence {
    /// The run.
    pub run_id: RunId,
    /// The writer's epoch.
    pub epoch: u64,
}

/// Where a store reads the time leases expire by: the database's `now()` for PostgreSQL, an
/// injected clock for [`MemStore`](crate::MemStore) in tests.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock that moves only when told: for tests of expiry without waiting.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock at `ms`.
    pub fn at(ms: u64) -> ManualClock {
        ManualClock(Arc::new(AtomicU64::new(ms)))
    }

    /// Moves the clock (and every clone of it) forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Leases on runs, and appends fenced by them.
///
/// An unfenced [`EventStore::append`] stays valid on a leased run (an operator's pause or
/// override is appended by whoever runs the command; the seq check orders it against the
/// driver's appends): fencing stops a *driver* that lost its lease, not every writer.
#[async_trait]
pub trait LeaseStore: EventStore {
    /// Takes the lease of `run_id` for `owner` for `ttl`, if nobody else holds it or the
    /// holder's lease has expired: the new lease's epoch is one above the run's last (1 for
    /// the first). `None` when another owner holds a live lease. An owner that already holds
    /// it gets it renewed at the same epoch, so a retried acquire is harmless.
    async fn acquire(
        &self,
        run_id: &RunId,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError>;

    /// Extends `lease` to `ttl` from now. Refused with [`StoreError::LeaseLost`] unless its
    /// owner still holds the run at its epoch (an expired lease nobody took over is renewed).
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError>;

    /// Gives the lease up, so another owner can take it at once. Releasing a lease already
    /// released is harmless; one taken over is [`StoreError::LeaseLost`].
    async fn release(&self, lease: &Lease) -> Result<(), StoreError>;

    /// The run's lease, live or expired, if it is held; `None` for a run never leased or
    /// whose lease was released.
    async fn lease(&self, run_id: &RunId) -> Result<Option<Lease>, StoreError>;

    /// Gives the lease up and marks the run as needing no driver (it finished, or stopped
    /// for a person to look at it): [`LeaseStore::claim`] passes it over until someone
    /// acquires it again. Refused like [`LeaseStore::release`].
    async fn park(&self, lease: &Lease) -> Result<(), StoreError>;

    /// Records that `owner` is alive until `ttl` from now, and returns how many instances
    /// are alive (itself included): what [`fair_share`] divides the unclaimed runs by.
    async fn heartbeat(&self, owner: &str, ttl: Duration) -> Result<u32, StoreError>;

    /// How many runs need a driver and have none: runs with events, not parked, whose lease
    /// is free or expired.
    async fn unclaimed(&self) -> Result<u32, StoreError>;

    /// Takes the leases of at most `max` runs [`LeaseStore::unclaimed`] counts, for `owner`,
    /// each at a new epoch; runs another instance is claiming or appending to at the same
    /// moment are skipped, not waited for, and no run is claimed twice.
    async fn claim(&self, owner: &str, ttl: Duration, max: u32) -> Result<Vec<Lease>, StoreError>;

    /// [`EventStore::append`], accepted only if `fence.epoch` is the run's current epoch,
    /// checked atomically with the seq; a stale epoch is [`StoreError::Fenced`] and writes
    /// nothing (checked before the seq: a fenced writer must stop, not re-read and retry).
    async fn append_fenced(
        &self,
        fence: &Fence,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError>;
}

/// The longest lease: a day (a lease is renewed every third of its ttl, so a long one only
/// delays the takeover of a dead owner's runs).
pub const LEASE_TTL_MAX: Duration = Duration::from_secs(24 * 3600);

/// Checks a lease request: the run's name, the owner's (1 to `LABEL_BYTES_MAX` bytes, no NUL), a
/// ttl from a millisecond to [`LEASE_TTL_MAX`].
///
/// # Errors
///
/// [`StoreError::Invalid`] naming the run id, the owner or the ttl that breaks its rule.
pub fn validate_lease(run_id: &RunId, owner: &str, ttl: Duration) -> Result<(), StoreError> {
    check_name(NameKind::Run, run_id.as_str()).map_err(|e| StoreError::Invalid {
        what: "run id".into(),
        reason: e.to_string(),
    })?;
    validate_owner(owner, ttl)
}

/// Checks the owner and ttl of a lease, heartbeat or claim request, as [`validate_lease`].
///
/// # Errors
///
/// [`StoreError::Invalid`] naming the owner or the ttl that is refused.
pub fn validate_owner(owner: &str, ttl: Duration) -> Result<(), StoreError> {
    if owner.is_empty() || owner.len() > limits::LABEL_BYTES_MAX as usize || owner.contains('\0') {
        return Err(StoreError::Invalid {
            what: "lease owner".into(),
            reason: format!(
                "{owner:?}: 1 to {} bytes without NUL are allowed",
                limits::LABEL_BYTES_MAX
            ),
        });
    }
    if ttl < Duration::from_millis(1) || ttl > LEASE_TTL_MAX {
        return Err(StoreError::Invalid {
            what: "lease ttl".into(),
            reason: format!("{ttl:?}; 1 ms to {LEASE_TTL_MAX:?} are allowed"),
        });
    }
    Ok(())
}

/// The ttl in whole milliseconds, as stores compute expiry (at most [`LEASE_TTL_MAX`]'s).
pub fn ttl_ms(ttl: Duration) -> u64 {
    ttl.min(LEASE_TTL_MAX).as_millis() as u64
}

/// How many of `unclaimed` runs one of `live` instances claims: ceil(unclaimed / live), so
/// that every run finds a driver in one round and no instance takes more than its share.
pub fn fair_share(unclaimed: u32, live: u32) -> u32 {
    unclaimed.div_ceil(live.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fair_share_rounds_up_and_survives_no_live_instance() {
        assert_eq!(fair_share(300, 3), 100);
        assert_eq!(fair_share(301, 3), 101);
        assert_eq!(fair_share(1, 3), 1);
        assert_eq!(fair_share(0, 3), 0);
        assert_eq!(fair_share(5, 0), 5, "no heartbeat seen yet: take them all");
    }
}
