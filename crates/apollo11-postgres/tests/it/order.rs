//! Batches of many appenders commit side by side: a subscriber sees every acknowledged
//! event once, in id order, and each run's ids grow with its seqs, also when another
//! instance writes a run while a batch with an older transaction id waits for it.

use crate::database::{admin, created, until_waiting_on_a_lock};
use apollo11_core::{EventId, RunId, Seq};
use apollo11_store::{Change, EventStore, Subscription};
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
        seen.push(next_event(&mut feed).await);
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

/// A batch whose transaction took its id, then waited for a lock while another instance
/// appended to one of its runs, must not write that run's next seq under its smaller id.
/// On one thread, so that the three appends of instance `b` are queued before its writer
/// runs, and go in one batch.
#[tokio::test]
async fn a_run_written_by_a_later_transaction_meanwhile_gets_its_next_seq_at_a_higher_id() {
    let Some(url) = apollo11_postgres::test_url() else {
        return;
    };
    let a = apollo11_postgres::PgStore::open_scratch(&url)
        .await
        .unwrap();
    let b_name = format!("{}_b", a.schema());
    let b = Arc::new(
        apollo11_postgres::PgStore::open(apollo11_postgres::PgOptions {
            schema: a.schema().to_owned(),
            application_name: b_name.clone(),
            ..apollo11_postgres::PgOptions::new(url.clone())
        })
        .await
        .unwrap(),
    );
    let (m, r) = (RunId::from("m"), RunId::from("r"));
    a.append(&m, Seq(1), vec![created()]).await.unwrap();
    a.append(&r, Seq(1), vec![created()]).await.unwrap();
    // Another session holds run `m`: b's batch takes its id with run `0` and waits there.
    let holder = admin(&url).await;
    let hold = format!(
        "BEGIN; SELECT 1 FROM \"{}\".runs WHERE run_id = 'm' FOR UPDATE",
        a.schema()
    );
    holder.batch_execute(&hold).await.unwrap();
    let batch = tokio::spawn({
        let b = b.clone();
        async move {
            let (zero, m, r) = (RunId::from("0"), RunId::from("m"), RunId::from("r"));
            let (zero, m, r) = tokio::join!(
                b.append(&zero, Seq(1), vec![created()]),
                b.append(&m, Seq(2), vec![created()]),
                // After a's append below.
                b.append(&r, Seq(3), vec![created()]),
            );
            (zero.unwrap(), m.unwrap(), r.unwrap())
        }
    });
    until_waiting_on_a_lock(&holder, &b_name).await;
    // A later transaction moves run `r` on while b's waits. Its answer waits for b's
    // transaction, older, to end: the holder lets go once the move is committed.
    let a = Arc::new(a);
    let moved = tokio::spawn({
        let (a, r) = (a.clone(), r.clone());
        async move { a.append(&r, Seq(2), vec![created()]).await.unwrap() }
    });
    let at = format!(
        "SELECT last_seq FROM \"{}\".runs WHERE run_id = 'r'",
        a.schema()
    );
    while holder.query_one(&at, &[]).await.unwrap().get::<_, i64>(0) < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    holder.batch_execute("ROLLBACK").await.unwrap();
    let ended = async { (moved.await.unwrap(), batch.await.unwrap()) };
    tokio::time::timeout(Duration::from_secs(10), ended)
        .await
        .expect("the appends never ended");
    let ids: Vec<EventId> = (a.read_run(&r, Seq(1)).await.unwrap())
        .iter()
        .map(|e| e.event_id)
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "run r: {ids:?}");
}

/// The feed reads nothing while nobody is subscribed, and each first subscriber moves its
/// mark on: subscribers that come and go while another instance writes, each starting where
/// the one before stopped, see the log once, in order, with nothing missed in the gaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_that_come_and_go_while_nobody_watches_miss_nothing() {
    let Some(url) = apollo11_postgres::test_url() else {
        return;
    };
    let writer = Arc::new(
        apollo11_postgres::PgStore::open_scratch(&url)
            .await
            .unwrap(),
    );
    let watcher = apollo11_postgres::PgStore::open(apollo11_postgres::PgOptions {
        schema: writer.schema().to_owned(),
        ..apollo11_postgres::PgOptions::new(url.clone())
    })
    .await
    .unwrap();
    let appending = tokio::spawn({
        let writer = writer.clone();
        async move {
            let run = RunId::from("busy");
            for seq in 1..=600 {
                writer
                    .append(&run, Seq(seq), vec![created()])
                    .await
                    .unwrap();
            }
        }
    });
    let mut seen: Vec<EventId> = Vec::new();
    for round in 0..40u64 {
        let after = seen.last().copied().unwrap_or(EventId(0));
        let mut feed = watcher.subscribe(after).await.unwrap();
        for _ in 0..(round % 7 + 1) {
            seen.push(next_event(&mut feed).await);
        }
        drop(feed);
        // Nobody subscribed for a while: the writer goes on.
        tokio::time::sleep(Duration::from_millis(round % 5 * 3)).await;
    }
    appending.await.unwrap();
    let mut feed = watcher.subscribe(*seen.last().unwrap()).await.unwrap();
    while seen.len() < 600 {
        seen.push(next_event(&mut feed).await);
    }
    let all: Vec<EventId> = (writer.read_run(&RunId::from("busy"), Seq(1)).await.unwrap())
        .iter()
        .map(|e| e.event_id)
        .collect();
    assert_eq!(
        seen, all,
        "every event once, in order, across the subscriptions"
    );
}

/// The id of the feed's next event, which must come within 5 s.
async fn next_event(feed: &mut Subscription<'_>) -> EventId {
    let next = tokio::time::timeout(Duration::from_secs(5), feed.next()).await;
    match next.expect("the feed stopped short").unwrap() {
        Change::Event(e) => e.event_id,
        other => panic!("{other:?}"),
    }
}

/// A write that does not lock its runs first can deadlock with another session: the
/// store's write holds run `x`'s row and waits for the key of its new event, (x, 2), which
/// another session inserted and holds while it asks for `x`'s row. The server ends the
/// store's write (its deadlock check comes first here), which then goes the way of the
/// ordered write and succeeds once the other session lets go: the append never fails.
///
/// PostgreSQL checks a wait for a deadlock once, `deadlock_timeout` after the wait began:
/// the store's check must come after the other session closes the cycle (a quarter of a
/// second leaves room for a loaded machine) and before that session's own (ten seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_ended_by_a_deadlock_is_written_again_in_order() {
    let Some(url) = apollo11_postgres::test_url() else {
        return;
    };
    let quick = format!(
        "{url}{}options=-c%20deadlock_timeout%3D250",
        if url.contains('?') { '&' } else { '?' }
    );
    let store = Arc::new(
        apollo11_postgres::PgStore::open_scratch(&quick)
            .await
            .unwrap(),
    );
    let x = RunId::from("x");
    store.append(&x, Seq(1), vec![created()]).await.unwrap();
    let holder = admin(&url).await;
    holder
        .batch_execute("SET deadlock_timeout = '10s'")
        .await
        .unwrap();
    let schema = store.schema().to_owned();
    let same_key = format!(
        "BEGIN; INSERT INTO \"{schema}\".events \
         (event_id, run_id, seq, kind, attempt, at_ms, instance) \
         VALUES (-1, 'x', 2, '{{}}', 1, 0, 'holder')"
    );
    holder.batch_execute(&same_key).await.unwrap();
    let append = tokio::spawn({
        let (store, x) = (store.clone(), x.clone());
        async move { store.append(&x, Seq(2), vec![created()]).await }
    });
    until_waiting_on_a_lock(&holder, &schema).await;
    // The store's write holds x's row and waits for the holder's key: asking for the row
    // closes the cycle.
    let row = format!("SELECT 1 FROM \"{schema}\".runs WHERE run_id = 'x' FOR UPDATE");
    holder.batch_execute(&row).await.unwrap();
    holder.batch_execute("ROLLBACK").await.unwrap();
    let ids = tokio::time::timeout(Duration::from_secs(10), append)
        .await
        .expect("the append never ended")
        .unwrap()
        .expect("a write ended by a deadlock is written again");
    let events = store.read_run(&x, Seq(1)).await.unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].event_id, ids[0]);
}
