//! Driving runs under leases, when the engine shares a store with other instances: a driver
//! holds its run's lease ([`Held`]), appends with its fence, and a task renews the lease
//! every third of its ttl. The lease is lost when a renewal is refused, or when none has
//! succeeded by the time the last one sent would run out (the store unreachable): the
//! driver then stops at once, with its steps, keeping nothing it cannot prove it still owns.

use crate::Clock;
use apollo11_core::{EventId, RunId, Seq};
use apollo11_store::{fair_share, Fence, Lease, LeaseStore, NewEvent, StoreError, LEASE_TTL_MAX};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How an engine shares runs with other instances of one store: the store's leases and
/// how long each lasts unrenewed (a dead instance's runs are taken over after it).
#[derive(Clone)]
pub struct Leasing {
    store: Arc<dyn LeaseStore>,
    ttl: Duration,
}

impl std::fmt::Debug for Leasing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leasing").field("ttl", &self.ttl).finish()
    }
}

/// The smallest ttl: a renewal every third of it must have time to reach the store.
pub const LEASE_TTL_MIN: Duration = Duration::from_millis(300);

impl Leasing {
    /// Leases of `store` (the store the engine opens on) lasting `ttl`, 300 ms to a day.
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`] for a ttl out of that range.
    pub fn new(store: Arc<dyn LeaseStore>, ttl: Duration) -> Result<Leasing, StoreError> {
        if !(LEASE_TTL_MIN..=LEASE_TTL_MAX).contains(&ttl) {
            return Err(StoreError::Invalid {
                what: "lease ttl".into(),
                reason: format!("{ttl:?}; {LEASE_TTL_MIN:?} to {LEASE_TTL_MAX:?} are allowed"),
            });
        }
        Ok(Leasing { store, ttl })
    }

    /// The ttl.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Takes the lease of `run_id` for `owner` and starts renewing it; `None` when another
    /// owner holds it.
    pub(crate) async fn acquire(
        &self,
        run_id: &RunId,
        owner: &str,
        clock: Clock,
    ) -> Result<Option<Held>, StoreError> {
        let sent = clock.now_ms();
        let lease = self.store.acquire(run_id, owner, self.ttl).await?;
        Ok(lease.map(|lease| self.hold(lease, sent, clock)))
    }

    /// The lease of a run this owner holds, or who holds it.
    pub(crate) async fn holder(&self, run_id: &RunId) -> Result<Option<Lease>, StoreError> {
        self.store.lease(run_id).await
    }

    /// Says `owner` is alive and takes the leases of its fair share of the runs that need a
    /// driver (none of them renewed: the caller drives each, which acquires it again at the
    /// same epoch).
    pub(crate) async fn claim(&self, owner: &str) -> Result<Vec<Lease>, StoreError> {
        let live = self.store.heartbeat(owner, self.ttl).await?;
        let unclaimed = self.store.unclaimed().await?;
        let share = fair_share(unclaimed, live);
        if share == 0 {
            return Ok(Vec::new());
        }
        let claimed = self.store.claim(owner, self.ttl, share).await?;
        let taken_over = claimed.iter().filter(|l| l.epoch > 1).count();
        crate::metrics::taken_over(taken_over as u64);
        Ok(claimed)
    }

    fn hold(&self, lease: Lease, sent: u64, clock: Clock) -> Held {
        let (lost_tx, lost) = watch::channel(None);
        let renewer = Renewer {
            store: self.store.clone(),
            lease: lease.clone(),
            ttl: self.ttl,
            clock,
            valid_until: sent + self.ttl.as_millis() as u64,
        };
        Held {
            store: self.store.clone(),
            lease,
            lost,
            renewer: tokio::spawn(renewer.run(lost_tx)),
        }
    }
}

/// A lease a driver holds, renewed in the background until dropped.
pub(crate) struct Held {
    store: Arc<dyn LeaseStore>,
    lease: Lease,
    lost: watch::Receiver<Option<StoreError>>,
    renewer: JoinHandle<()>,
}

impl Held {
    /// What tells that the lease is lost.
    pub fn signal(&self) -> LostSignal {
        LostSignal(self.lost.clone())
    }

    /// Appends with the lease's fence.
    pub async fn append(
        &self,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        let fence: Fence = self.lease.fence();
        let appended = self.store.append_fenced(&fence, expected_seq, events).await;
        if let Err(StoreError::Fenced { .. }) = appended {
            crate::metrics::stale_epoch();
        }
        appended
    }

    /// Stops renewing and parks the run (it needs no driver until someone acts on it).
    pub async fn park(self) -> Result<(), StoreError> {
        self.renewer.abort();
        self.store.park(&self.lease).await
    }

    /// Stops renewing and gives the lease up (any instance may claim the run at once).
    pub async fn release(self) -> Result<(), StoreError> {
        self.renewer.abort();
        self.store.release(&self.lease).await
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

/// Says when a held lease is lost.
pub(crate) struct LostSignal(watch::Receiver<Option<StoreError>>);

impl LostSignal {
    /// Waits until the lease is lost, and says why.
    pub async fn wait(&mut self) -> StoreError {
        loop {
            if let Some(e) = self.0.borrow_and_update().clone() {
                return e;
            }
            if self.0.changed().await.is_err() {
                // The renewer ended without a loss: it was stopped with the driver.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Renews a lease every third of its ttl; retries a failed renewal every tenth, as long
/// as the last renewal sent still holds.
struct Renewer {
    store: Arc<dyn LeaseStore>,
    lease: Lease,
    ttl: Duration,
    clock: Clock,
    /// Until when the lease surely holds: its last successful renewal's sending time plus
    /// the ttl (the store's expiry is later: it read its clock after that).
    valid_until: u64,
}

impl Renewer {
    async fn run(mut self, lost: watch::Sender<Option<StoreError>>) {
        let ttl_ms = self.ttl.as_millis() as u64;
        let mut next = self.valid_until - ttl_ms + ttl_ms / 3;
        let reason = loop {
            self.clock.sleep_until_ms(next).await;
            let sent = self.clock.now_ms();
            let renewed = tokio::select! {
                renewed = self.store.renew(&self.lease, self.ttl) => renewed,
                () = self.clock.sleep_until_ms(self.valid_until) => Err(self.expired()),
            };
            match renewed {
                Ok(lease) => {
                    self.lease = lease;
                    self.valid_until = sent + ttl_ms;
                    next = sent + ttl_ms / 3;
                }
                Err(e) if e.is_retryable() && self.clock.now_ms() < self.valid_until => {
                    tracing::warn!(run = %self.lease.run_id, error = %e, "lease not renewed; retrying");
                    next = self.clock.now_ms() + (ttl_ms / 10).max(1);
                }
                Err(e) if e.is_retryable() => break self.expired(),
                Err(e) => break e,
            }
        };
        tracing::warn!(run = %self.lease.run_id, error = %reason, "lease lost; the run's driver stops");
        let _ = lost.send(Some(reason));
    }

    /// A lease not renewed in time counts as lost, whatever the store says later.
    fn expired(&self) -> StoreError {
        StoreError::LeaseLost {
            run_id: self.lease.run_id.clone(),
            owner: self.lease.owner.clone(),
            epoch: self.lease.epoch,
        }
    }
}
