//! The claim cases of the lease suite: heartbeats, fair shares, parked runs, and claims
//! racing from several instances. Run by [`lease_conformance_tests!`](crate::lease_conformance_tests).

use super::leases::{expire, take, LeasedStore, LONG};
use super::{created, run};
use crate::{fair_share, StoreError};
use apollo11_core::Seq;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

async fn create(store: &impl LeasedStore, names: impl IntoIterator<Item = String>) {
    for name in names {
        store
            .append(&run(&name), Seq(1), vec![created()])
            .await
            .unwrap();
    }
}

#[doc(hidden)]
pub async fn claims_take_unheld_unparked_runs_at_a_new_epoch(store: Arc<impl LeasedStore>) {
    create(store.as_ref(), (0..6).map(|i| format!("r{i}"))).await;
    assert_eq!(store.unclaimed().await.unwrap(), 6);
    let held = take(store.as_ref(), &run("r0"), "a").await;
    let parked = take(store.as_ref(), &run("r1"), "a").await;
    store.park(&parked).await.unwrap();
    let expired = take(store.as_ref(), &run("r2"), "a").await;
    expire(store.as_ref(), &expired).await;
    let released = take(store.as_ref(), &run("r3"), "a").await;
    store.release(&released).await.unwrap();
    // Leased but never appended to: no run yet, nothing to drive.
    take(store.as_ref(), &run("empty"), "a").await;
    assert_eq!(store.unclaimed().await.unwrap(), 4, "r2, r3, r4, r5");
    let claimed = store.claim("b", LONG, 3).await.unwrap();
    let names: Vec<&str> = claimed.iter().map(|l| l.run_id.as_str()).collect();
    assert_eq!(names.len(), 3, "at most max: {names:?}");
    for lease in &claimed {
        assert_eq!(lease.owner, "b");
        assert!(
            !["r0", "r1", "empty"].contains(&lease.run_id.as_str()),
            "{names:?}"
        );
        assert_eq!(
            store.lease(&lease.run_id).await.unwrap().as_ref(),
            Some(lease)
        );
    }
    if let Some(r2) = claimed.iter().find(|l| l.run_id == run("r2")) {
        assert_eq!(r2.epoch, expired.epoch + 1, "a takeover raises the epoch");
    }
    assert_eq!(store.unclaimed().await.unwrap(), 1);
    let rest = store.claim("c", LONG, 10).await.unwrap();
    assert_eq!(rest.len(), 1);
    assert!(
        store.claim("c", LONG, 10).await.unwrap().is_empty(),
        "none left"
    );
    assert_eq!(store.lease(&run("r0")).await.unwrap(), Some(held));
    // Acquiring a parked run unparks it: released again, it is claimed.
    let again = take(store.as_ref(), &run("r1"), "a").await;
    store.release(&again).await.unwrap();
    let unparked = store.claim("c", LONG, 10).await.unwrap();
    assert_eq!(
        unparked
            .iter()
            .map(|l| l.run_id.as_str())
            .collect::<Vec<_>>(),
        ["r1"]
    );
}

#[doc(hidden)]
pub async fn racing_claims_share_runs_without_taking_one_twice(store: Arc<impl LeasedStore>) {
    create(store.as_ref(), (0..40).map(|i| format!("r{i:02}"))).await;
    for i in 0..4 {
        store.heartbeat(&format!("i{i}"), LONG).await.unwrap();
    }
    let live = store.heartbeat("i0", LONG).await.unwrap();
    assert_eq!(live, 4, "four instances alive");
    let share = fair_share(store.unclaimed().await.unwrap(), live);
    assert_eq!(share, 10);
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.claim(&format!("i{i}"), LONG, share).await })
        })
        .collect();
    let mut seen = BTreeSet::new();
    for t in tasks {
        let claimed = t.await.unwrap().unwrap();
        assert!(claimed.len() <= 10);
        for lease in claimed {
            assert!(
                seen.insert(lease.run_id.clone()),
                "{} claimed twice",
                lease.run_id
            );
        }
    }
    assert_eq!(seen.len(), 40, "every run claimed in one round");
}

#[doc(hidden)]
pub async fn heartbeats_expire_and_are_checked(store: Arc<impl LeasedStore>) {
    assert_eq!(store.heartbeat("a", LONG).await.unwrap(), 1);
    assert_eq!(
        store
            .heartbeat("b", Duration::from_millis(1))
            .await
            .unwrap(),
        2
    );
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(
        store.heartbeat("a", LONG).await.unwrap(),
        1,
        "b stopped beating"
    );
    for (owner, ttl, what) in [
        ("", LONG, "lease owner"),
        ("a", Duration::ZERO, "lease ttl"),
    ] {
        for result in [
            store.heartbeat(owner, ttl).await.map(|_| ()),
            store.claim(owner, ttl, 1).await.map(|_| ()),
        ] {
            match result {
                Err(StoreError::Invalid { what: said, .. }) => assert_eq!(said, what),
                other => panic!("{what}: expected Invalid, got {other:?}"),
            }
        }
    }
}
