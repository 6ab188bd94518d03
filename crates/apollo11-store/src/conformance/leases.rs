//! The lease cases of the conformance suite: what every [`LeaseStore`] must do. A backend runs
//! them with [`lease_conformance_tests!`](crate::lease_conformance_tests). Expiry is brought
//! about by renewing with a 1 ms ttl and sleeping past it, so the cases run the same on any
//! store's clock (the database's `now()`, the system's).

use super::{created, run, started, Store};
use crate::{Lease, LeaseStore, StoreError};
use apollo11_core::{EventId, RunId, Seq};
use std::sync::Arc;
use std::time::Duration;

pub use super::claims::{
    claims_take_unheld_unparked_runs_at_a_new_epoch, heartbeats_expire_and_are_checked,
    racing_claims_share_runs_without_taking_one_twice,
};

/// What the lease cases need of a backend.
pub trait LeasedStore: Store + LeaseStore {}
impl<T: Store + LeaseStore> LeasedStore for T {}

/// Generates one `#[test]` per lease case, each on a runtime of its own
/// ([`block_on`](super::block_on)), so the calling crate needs no tokio; `$make` must evaluate
/// to an `Arc<impl LeasedStore>` that is fresh and empty each time it is evaluated.
#[macro_export]
macro_rules! lease_conformance_tests {
    ($make:expr) => {
        $crate::lease_conformance_tests!(@cases $make;
            owners_racing_for_a_lease_get_exactly_one_holder,
            an_expired_lease_is_taken_over_at_a_higher_epoch,
            a_renew_or_release_by_a_non_owner_is_refused,
            a_stale_epoch_append_is_refused_and_writes_nothing,
            lease_requests_are_checked,
            claims_take_unheld_unparked_runs_at_a_new_epoch,
            racing_claims_share_runs_without_taking_one_twice,
            heartbeats_expire_and_are_checked,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {$(
        #[test]
        fn $case() {
            $crate::conformance::block_on(async {
                $crate::conformance::leases::$case($make).await;
            });
        }
    )*};
}

pub(super) const LONG: Duration = Duration::from_secs(60);

/// Lets `lease` expire: renews it for 1 ms and sleeps past that.
pub(super) async fn expire(store: &impl LeasedStore, lease: &Lease) {
    store.renew(lease, Duration::from_millis(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
}

pub(super) async fn take(store: &impl LeasedStore, r: &RunId, owner: &str) -> Lease {
    let lease = store.acquire(r, owner, LONG).await.unwrap();
    lease.unwrap_or_else(|| panic!("{owner} must get the lease of {r}"))
}

fn assert_lost(result: Result<impl std::fmt::Debug, StoreError>, lease: &Lease, what: &str) {
    match result {
        Err(StoreError::LeaseLost {
            run_id,
            owner,
            epoch,
        }) => assert_eq!(
            (run_id, owner, epoch),
            (lease.run_id.clone(), lease.owner.clone(), lease.epoch),
            "{what}"
        ),
        other => panic!("{what}: expected LeaseLost, got {other:?}"),
    }
}

#[doc(hidden)]
pub async fn owners_racing_for_a_lease_get_exactly_one_holder(store: Arc<impl LeasedStore>) {
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.acquire(&run("r"), &format!("i{i}"), LONG).await })
        })
        .collect();
    let mut holders = Vec::new();
    for t in tasks {
        holders.extend(t.await.unwrap().unwrap());
    }
    assert_eq!(holders.len(), 1, "exactly one owner wins: {holders:?}");
    let held = &holders[0];
    assert_eq!(held.epoch, 1, "the first lease of a run is epoch 1");
    assert_eq!(store.lease(&run("r")).await.unwrap().as_ref(), Some(held));
    assert_eq!(store.lease(&run("other")).await.unwrap(), None);
    let again = take(store.as_ref(), &run("r"), &held.owner).await;
    assert_eq!(again.epoch, 1, "the holder acquiring again keeps its epoch");
    assert!(again.expires_at_ms >= held.expires_at_ms);
}

#[doc(hidden)]
pub async fn an_expired_lease_is_taken_over_at_a_higher_epoch(store: Arc<impl LeasedStore>) {
    let r = run("r");
    let a = take(store.as_ref(), &r, "a").await;
    assert_eq!(
        store.acquire(&r, "b", LONG).await.unwrap(),
        None,
        "a holds it"
    );
    expire(store.as_ref(), &a).await;
    let b = take(store.as_ref(), &r, "b").await;
    assert_eq!(b.epoch, a.epoch + 1, "a takeover raises the epoch");
    assert_lost(store.renew(&a, LONG).await, &a, "renew by the old holder");
    assert_lost(store.release(&a).await, &a, "release by the old holder");
    assert_eq!(
        store.acquire(&r, "a", LONG).await.unwrap(),
        None,
        "b holds it"
    );
    let renewed = store.renew(&b, LONG).await.unwrap();
    assert_eq!((renewed.epoch, renewed.owner.as_str()), (b.epoch, "b"));
    // An expired lease nobody took over is still its holder's to renew.
    expire(store.as_ref(), &b).await;
    let late = store.renew(&b, LONG).await.unwrap();
    assert_eq!(late.epoch, b.epoch);
    store.release(&b).await.unwrap();
    store.release(&b).await.unwrap();
    assert_eq!(store.lease(&r).await.unwrap(), None, "released");
    let a2 = take(store.as_ref(), &r, "a").await;
    assert_eq!(
        a2.epoch,
        b.epoch + 1,
        "a released lease taken again: a new epoch"
    );
}

#[doc(hidden)]
pub async fn a_renew_or_release_by_a_non_owner_is_refused(store: Arc<impl LeasedStore>) {
    let r = run("r");
    let a = take(store.as_ref(), &r, "a").await;
    let forged = Lease {
        owner: "b".into(),
        ..a.clone()
    };
    assert_lost(store.renew(&forged, LONG).await, &forged, "renew by b");
    assert_lost(store.release(&forged).await, &forged, "release by b");
    let wrong_epoch = Lease {
        epoch: a.epoch + 1,
        ..a.clone()
    };
    assert_lost(
        store.renew(&wrong_epoch, LONG).await,
        &wrong_epoch,
        "an epoch not reached",
    );
    let never = Lease {
        run_id: run("never-leased"),
        ..a.clone()
    };
    assert_lost(
        store.renew(&never, LONG).await,
        &never,
        "a run never leased",
    );
    assert_eq!(
        store.lease(&r).await.unwrap().map(|l| l.owner),
        Some("a".into())
    );
}

#[doc(hidden)]
pub async fn a_stale_epoch_append_is_refused_and_writes_nothing(store: Arc<impl LeasedStore>) {
    let r = run("r");
    let a = take(store.as_ref(), &r, "a").await;
    store
        .append_fenced(&a.fence(), Seq(1), vec![created()])
        .await
        .unwrap();
    expire(store.as_ref(), &a).await;
    let b = take(store.as_ref(), &r, "b").await;
    let before = store.last_event_id().await.unwrap();
    // Many stale writers at once, right and wrong seqs: every one is fenced off.
    let stale: Vec<_> = (0..8u32)
        .map(|i| {
            let (store, fence) = (store.clone(), a.fence());
            let seq = Seq(1 + i % 3);
            tokio::spawn(async move { store.append_fenced(&fence, seq, vec![started("s")]).await })
        })
        .collect();
    for t in stale {
        match t.await.unwrap() {
            Err(StoreError::Fenced {
                run_id,
                epoch,
                current,
            }) => assert_eq!((run_id, epoch, current), (r.clone(), a.epoch, b.epoch)),
            other => panic!("a stale epoch must be fenced off, got {other:?}"),
        }
    }
    assert_eq!(
        store.last_event_id().await.unwrap(),
        before,
        "nothing written"
    );
    let ids = store
        .append_fenced(&b.fence(), Seq(2), vec![started("s")])
        .await
        .unwrap();
    assert!(
        matches!(
            store
                .append_fenced(&b.fence(), Seq(2), vec![started("t")])
                .await,
            Err(StoreError::Conflict { .. })
        ),
        "the current epoch still meets the seq check"
    );
    let unleased = crate::Fence {
        run_id: run("free"),
        epoch: 1,
    };
    assert!(
        matches!(
            store
                .append_fenced(&unleased, Seq(1), vec![created()])
                .await,
            Err(StoreError::Fenced { current: 0, .. })
        ),
        "a run never leased has epoch 0"
    );
    // Unfenced appends (an operator's) still go in, ordered by the seq check.
    store.append(&r, Seq(3), vec![started("op")]).await.unwrap();
    let seqs: Vec<(u32, EventId)> = store
        .read_run(&r, Seq(1))
        .await
        .unwrap()
        .iter()
        .map(|e| (e.seq.0, e.event_id))
        .collect();
    assert_eq!(seqs.len(), 3);
    assert_eq!(seqs[1], (2, ids[0]), "seq 2 is b's");
}

#[doc(hidden)]
pub async fn lease_requests_are_checked(store: Arc<impl LeasedStore>) {
    let bad = [
        (run("r"), "", LONG, "lease owner"),
        (run("r"), "a", Duration::ZERO, "lease ttl"),
        (
            run("r"),
            "a",
            Duration::from_secs(2 * 24 * 3600),
            "lease ttl",
        ),
        (run("a/b"), "a", LONG, "run id"),
    ];
    for (r, owner, ttl, what) in bad {
        match store.acquire(&r, owner, ttl).await {
            Err(StoreError::Invalid { what: said, .. }) => assert_eq!(said, what),
            other => panic!("{what}: expected Invalid, got {other:?}"),
        }
    }
    assert_eq!(store.lease(&run("r")).await.unwrap(), None, "nothing taken");
}
