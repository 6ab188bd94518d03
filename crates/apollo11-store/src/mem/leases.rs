//! [`LeaseStore`] for [`MemStore`]: leases, parking, heartbeats and claims under the
//! store's one lock, on its injected clock.

use super::{Inner, LeaseRow, MemStore};
use crate::{
    ttl_ms, validate_lease, validate_owner, Fence, Lease, LeaseStore, NewEvent, StoreError,
};
use apollo11_core::{EventId, RunId, Seq};
use async_trait::async_trait;
use std::time::Duration;

impl LeaseRow {
    fn lease(&self, run_id: &RunId) -> Option<Lease> {
        self.holder.as_ref().map(|(owner, expires_at_ms)| Lease {
            run_id: run_id.clone(),
            owner: owner.clone(),
            epoch: self.epoch,
            expires_at_ms: *expires_at_ms,
        })
    }

    /// Whether `lease` is this row's, at its epoch (released counts when `released_too`).
    fn holds(&self, lease: &Lease, released_too: bool) -> bool {
        self.epoch == lease.epoch
            && match &self.holder {
                Some((owner, _)) => *owner == lease.owner,
                None => released_too,
            }
    }
}

#[async_trait]
impl LeaseStore for MemStore {
    async fn acquire(
        &self,
        run_id: &RunId,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        validate_lease(run_id, owner, ttl)?;
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        let row = inner.leases.entry(run_id.clone()).or_insert(LeaseRow {
            epoch: 0,
            holder: None,
            parked: false,
        });
        match &row.holder {
            Some((holder, _)) if holder == owner => {}
            Some((_, expires)) if *expires > now => return Ok(None),
            _ => row.epoch += 1,
        }
        row.holder = Some((owner.to_owned(), now.saturating_add(ttl_ms(ttl))));
        row.parked = false;
        Ok(row.lease(run_id))
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        validate_lease(&lease.run_id, &lease.owner, ttl)?;
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        let row = inner.leases.get_mut(&lease.run_id);
        let row = row
            .filter(|row| row.holds(lease, false))
            .ok_or_else(|| lease.lost())?;
        row.holder = Some((lease.owner.clone(), now.saturating_add(ttl_ms(ttl))));
        Ok(row.lease(&lease.run_id).expect("a renewed lease is held"))
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.let_go(lease, false)
    }

    async fn park(&self, lease: &Lease) -> Result<(), StoreError> {
        self.let_go(lease, true)
    }

    async fn heartbeat(&self, owner: &str, ttl: Duration) -> Result<u32, StoreError> {
        validate_owner(owner, ttl)?;
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        inner
            .instances
            .insert(owner.to_owned(), now.saturating_add(ttl_ms(ttl)));
        Ok(inner
            .instances
            .values()
            .filter(|until| **until > now)
            .count() as u32)
    }

    async fn unclaimed(&self) -> Result<u32, StoreError> {
        let now = self.clock.now_ms();
        Ok(self.lock().unclaimed(now).count() as u32)
    }

    async fn claim(&self, owner: &str, ttl: Duration, max: u32) -> Result<Vec<Lease>, StoreError> {
        validate_owner(owner, ttl)?;
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        let picked: Vec<RunId> = inner.unclaimed(now).take(max as usize).cloned().collect();
        let expires = now.saturating_add(ttl_ms(ttl));
        let claimed = picked.into_iter().map(|run_id| {
            let row = inner.leases.entry(run_id.clone()).or_insert(LeaseRow {
                epoch: 0,
                holder: None,
                parked: false,
            });
            row.epoch += 1;
            row.holder = Some((owner.to_owned(), expires));
            row.lease(&run_id).expect("a claimed lease is held")
        });
        Ok(claimed.collect())
    }

    async fn lease(&self, run_id: &RunId) -> Result<Option<Lease>, StoreError> {
        Ok(self.lock().leases.get(run_id).and_then(|r| r.lease(run_id)))
    }

    async fn append_fenced(
        &self,
        fence: &Fence,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        self.append_checked(&fence.run_id, Some(fence.epoch), expected_seq, events)
    }
}

impl MemStore {
    /// Releases `lease` (a release of a released lease is harmless), parking its run or not.
    fn let_go(&self, lease: &Lease, park: bool) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let row = inner.leases.get_mut(&lease.run_id);
        let row = row
            .filter(|row| row.holds(lease, true))
            .ok_or_else(|| lease.lost())?;
        row.holder = None;
        row.parked = park;
        Ok(())
    }
}

impl Inner {
    /// The runs with events whose lease is free or expired at `now` and that are not
    /// parked, in run id order.
    fn unclaimed(&self, now: u64) -> impl Iterator<Item = &RunId> {
        self.runs.keys().filter(move |run_id| {
            self.leases
                .get(*run_id)
                .is_none_or(|row| match &row.holder {
                    Some((_, expires)) => *expires <= now,
                    None => !row.parked,
                })
        })
    }
}
