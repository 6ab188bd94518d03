//! The change feed's lost LISTEN connection is counted in its metric, and the feed goes on:
//! a binary of its own, since the recorder it installs is the process's.

use apollo11_core::{EventId, EventKind, Payload, RunId, Seq};
use apollo11_postgres::metrics::FEED_LISTEN_FAILURES_TOTAL;
use apollo11_postgres::{test_url, PgStore};
use apollo11_store::conformance::event;
use apollo11_store::{Change, EventStore};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A recorder that keeps one counter: the feed's listen failures.
#[derive(Default)]
struct ListenFailures(Arc<AtomicU64>);

impl Recorder for ListenFailures {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        if key.name() == FEED_LISTEN_FAILURES_TOTAL {
            Counter::from_arc(Arc::clone(&self.0))
        } else {
            Counter::noop()
        }
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// Ends the feed's listening session of the store whose sessions are named `name`, once
/// it is there; false if it never showed.
async fn end_listening_session(admin: &tokio_postgres::Client, name: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let ended = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = $1 AND query LIKE 'LISTEN%'",
                &[&name],
            )
            .await
            .unwrap();
        if !ended.is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_listening_connection_is_counted_and_the_feed_goes_on() {
    let Some(url) = test_url() else { return };
    let failures = Arc::new(AtomicU64::new(0));
    metrics::set_global_recorder(ListenFailures(Arc::clone(&failures))).unwrap();
    let store = PgStore::open_scratch(&url).await.unwrap();
    let mut feed = store.subscribe(EventId(0)).await.unwrap();
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let name = store.schema().to_owned();
    assert_eq!(failures.load(Ordering::Relaxed), 0);

    assert!(
        end_listening_session(&admin, &name).await,
        "no LISTEN session of {name}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while failures.load(Ordering::Relaxed) == 0 {
        assert!(
            Instant::now() < deadline,
            "the lost LISTEN was never counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let created = EventKind::RunCreated {
        workflow: "wf".into(),
    };
    let run = RunId::from("after-the-loss");
    let ids = store
        .append(&run, Seq(1), vec![event(None, created, 0, Payload::Empty)])
        .await
        .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), feed.next()).await;
    match next
        .expect("the feed stopped after losing its LISTEN")
        .unwrap()
    {
        Change::Event(e) => assert_eq!(vec![e.event_id], ids),
        other => panic!("{other:?}"),
    }
}
