//! Leases in the `runs` table: each statement is one atomic step on the run's row, on the
//! database's clock (`now()`), so instances on different machines agree on expiry whatever
//! their own clocks say.

use crate::read::query;
use crate::sql::{Acquire, Claim, Heartbeat, LetGo, Renew};
use crate::PgStore;
use apollo11_core::{EventId, RunId, Seq};
use apollo11_store::{
    ttl_ms, validate_lease, validate_owner, Fence, Lease, LeaseStore, NewEvent, StoreError,
};
use async_trait::async_trait;
use std::time::Duration;
use tokio_postgres::Row;

/// A lease from the lease columns of a row, starting at column `at`.
fn lease_at(run_id: &RunId, row: &Row, at: usize) -> Lease {
    Lease {
        run_id: run_id.clone(),
        epoch: row.get::<_, i64>(at) as u64,
        owner: row.get(at + 1),
        expires_at_ms: row.get::<_, i64>(at + 2) as u64,
    }
}

fn lease_from_row(run_id: &RunId, row: &Row) -> Lease {
    lease_at(run_id, row, 0)
}

#[async_trait]
impl LeaseStore for PgStore {
    async fn acquire(
        &self,
        run_id: &RunId,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        validate_lease(run_id, owner, ttl)?;
        let doing = format!("acquiring the lease of run `{run_id}`");
        let params = Acquire {
            run_id: run_id.as_str(),
            owner,
            ttl_ms: ttl_ms(ttl) as i64,
        };
        let rows = query(&self.pool, &doing, &self.sql.acquire, &params.binds()).await?;
        Ok(rows.first().map(|row| lease_from_row(run_id, row)))
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        validate_lease(&lease.run_id, &lease.owner, ttl)?;
        let doing = format!("renewing the lease of run `{}`", lease.run_id);
        let params = Renew {
            run_id: lease.run_id.as_str(),
            owner: &lease.owner,
            ttl_ms: ttl_ms(ttl) as i64,
            epoch: lease.epoch as i64,
        };
        let rows = query(&self.pool, &doing, &self.sql.renew, &params.binds()).await?;
        rows.first()
            .map(|row| lease_from_row(&lease.run_id, row))
            .ok_or_else(|| lease.lost())
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.let_go(lease, "releasing", &self.sql.release).await
    }

    async fn park(&self, lease: &Lease) -> Result<(), StoreError> {
        self.let_go(lease, "parking", &self.sql.park).await
    }

    async fn heartbeat(&self, owner: &str, ttl: Duration) -> Result<u32, StoreError> {
        validate_owner(owner, ttl)?;
        let doing = format!("recording that instance {owner:?} is alive");
        let params = Heartbeat {
            owner,
            ttl_ms: ttl_ms(ttl) as i64,
        };
        let rows = query(&self.pool, &doing, &self.sql.heartbeat, &params.binds()).await?;
        Ok(rows.first().map_or(1, |row| row.get::<_, i64>(0)) as u32)
    }

    async fn unclaimed(&self) -> Result<u32, StoreError> {
        let rows = query(
            &self.pool,
            "counting unclaimed runs",
            &self.sql.unclaimed,
            &[],
        )
        .await?;
        Ok(rows.first().map_or(0, |row| row.get::<_, i64>(0)) as u32)
    }

    async fn claim(&self, owner: &str, ttl: Duration, max: u32) -> Result<Vec<Lease>, StoreError> {
        validate_owner(owner, ttl)?;
        let doing = format!("claiming runs for instance {owner:?}");
        let params = Claim {
            owner,
            max: i64::from(max),
            ttl_ms: ttl_ms(ttl) as i64,
        };
        let rows = query(&self.pool, &doing, &self.sql.claim, &params.binds()).await?;
        let mut leases: Vec<Lease> = rows
            .iter()
            .map(|row| lease_at(&RunId(row.get(0)), row, 1))
            .collect();
        leases.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        Ok(leases)
    }

    async fn lease(&self, run_id: &RunId) -> Result<Option<Lease>, StoreError> {
        let doing = format!("reading the lease of run `{run_id}`");
        let rows = query(&self.pool, &doing, &self.sql.lease, &[&run_id.as_str()]).await?;
        Ok(rows.first().map(|row| lease_from_row(run_id, row)))
    }

    async fn append_fenced(
        &self,
        fence: &Fence,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        self.send(&fence.run_id, Some(fence.epoch), expected_seq, events)
            .await
    }
}

impl PgStore {
    /// Releases `lease` by `statement` (release or park); one already released is harmless.
    async fn let_go(&self, lease: &Lease, verb: &str, statement: &str) -> Result<(), StoreError> {
        let doing = format!("{verb} the lease of run `{}`", lease.run_id);
        let params = LetGo {
            run_id: lease.run_id.as_str(),
            owner: &lease.owner,
            epoch: lease.epoch as i64,
        };
        let rows = query(&self.pool, &doing, statement, &params.binds()).await?;
        rows.first().map(|_| ()).ok_or_else(|| lease.lost())
    }
}
