//! Batches of many appenders commit in the order of their ids: a subscriber sees every
//! acknowledged event once, in id order, and each run's ids grow with its seqs.

use crate::database::created;
use apollo11_core::{EventId, RunId, Seq};
use apollo11_store::{Change, EventStore};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_sees_every_event_of_concurrent_batches_once_in_id_order() {
    let store = crate::store_or_skip!();
    let mut feed = store.subscribe(EventId(0)).await.unwrap();
    let appenders: Vec<_> = (0..64)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let run = RunId::from(format!("run-{i}").as_str());
                let mut ids = Vec::new();
                for seq in 1..=20 {
                    ids.extend(store.append(&run, Seq(seq), vec![created()]).await.unwrap());
                }
                ids
            })
        })
        .collect();
    let mut acknowledged = BTreeSet::new();
    for appender in appenders {
        acknowledged.extend(appender.await.unwrap());
    }
    let mut seen = Vec::new();
    while seen.len() < acknowledged.len() {
        let next = tokio::time::timeout(Duration::from_secs(5), feed.next()).await;
        match next.expect("the feed stopped short").unwrap() {
            Change::Event(e) => seen.push(e.event_id),
            other => panic!("{other:?}"),
        }
    }
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "ids out of order: {seen:?}"
    );
    assert_eq!(seen, acknowledged.into_iter().collect::<Vec<_>>());
    // Each run's ids grow with its seqs.
    for i in 0..64 {
        let run = RunId::from(format!("run-{i}").as_str());
        let ids: Vec<EventId> = store
            .read_run(&run, Seq(1))
            .await
            .unwrap()
            .iter()
            .map(|e| e.event_id)
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "run {i}: {ids:?}");
    }
}
