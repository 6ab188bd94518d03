//! Ids are visible in order while batches commit side by side: several instances append
//! at once, the sessions of some are ended mid-transaction again and again, and readers
//! tailing by id must each see every committed event exactly once, in id order, nothing
//! ever appearing below an id a reader has passed.

use crate::database::{admin, created};
use apollo11_core::{EventId, RunId, Seq};
use apollo11_postgres::{terminate_sessions, test_url, PgOptions, PgStore};
use apollo11_store::EventStore;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Instances writing to one schema; the sessions of the last are ended again and again.
const INSTANCES: usize = 3;

/// Appenders per instance, each on runs of its own.
const APPENDERS: usize = 8;

/// Readers tailing the log by id.
const READERS: usize = 3;

/// How long the appenders run.
const APPENDING: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_tailing_by_id_see_every_committed_event_once_while_writers_are_killed() {
    let Some(url) = test_url() else { return };
    let scratch = PgStore::open_scratch(&url).await.unwrap();
    let schema = scratch.schema().to_owned();
    let mut instances = Vec::new();
    for i in 0..INSTANCES {
        let options = PgOptions {
            schema: schema.clone(),
            application_name: format!("{schema}_w{i}"),
            pool_size: 8,
            ..PgOptions::new(url.clone())
        };
        instances.push(Arc::new(PgStore::open(options).await.unwrap()));
    }
    let (done, last) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let readers: Vec<_> = (0..READERS)
        .map(|_| tokio::spawn(tail(instances[0].clone(), last.clone())))
        .collect();
    let mut appenders = Vec::new();
    for (i, store) in instances.iter().enumerate() {
        for a in 0..APPENDERS {
            let run = RunId::from(format!("run-{i}-{a}").as_str());
            appenders.push(tokio::spawn(append(store.clone(), run, done.clone())));
        }
    }
    let victim = format!("{schema}_w{}", INSTANCES - 1);
    let killer = tokio::spawn(kill(url.clone(), victim, done.clone()));
    tokio::time::sleep(APPENDING).await;
    done.store(true, Ordering::Relaxed);
    let mut failed = 0;
    for appender in appenders {
        failed += appender.await.unwrap();
    }
    let killed = killer.await.unwrap();
    assert!(
        killed > 0 && failed > 0,
        "killed {killed} sessions, failing {failed} appends"
    );
    // Every append has returned: what the table holds now is all that was committed.
    let committed = committed(&url, &schema).await;
    last.store(committed.last().unwrap().0, Ordering::Relaxed);
    for reader in readers {
        let seen = tokio::time::timeout(Duration::from_secs(60), reader)
            .await
            .expect("a reader never reached the last event committed")
            .unwrap();
        assert_eq!(
            seen.len(),
            committed.len(),
            "a reader missed or repeated events"
        );
        assert!(
            seen == committed,
            "a reader saw other events than were committed"
        );
    }
    each_runs_ids_follow_its_seqs(&url, &schema).await;
}

/// Appends one event at a time to `run` until `done`; an append that fails (its session
/// ended) may have committed, so the run's seq is read back. Returns the failures.
async fn append(store: Arc<PgStore>, run: RunId, done: Arc<AtomicBool>) -> usize {
    let (mut next, mut failed) = (1, 0);
    while !done.load(Ordering::Relaxed) {
        match store.append(&run, Seq(next), vec![created()]).await {
            Ok(_) => next += 1,
            Err(_) => {
                failed += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
                if let Ok(events) = store.read_run(&run, Seq(1)).await {
                    next = events.len() as u32 + 1;
                }
            }
        }
    }
    failed
}

/// Tails the log by id until it has passed `last` (0 until known): every id read, in
/// order, each page checked to start above the last id passed.
async fn tail(store: Arc<PgStore>, last: Arc<AtomicU64>) -> Vec<EventId> {
    let mut seen: Vec<EventId> = Vec::new();
    loop {
        let passed = seen.last().copied().unwrap_or(EventId(0));
        let target = last.load(Ordering::Relaxed);
        if target != 0 && passed.0 >= target {
            return seen;
        }
        let Ok(page) = store.read_from(EventId(passed.0 + 1), 500).await else {
            continue;
        };
        if page.is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let ids: Vec<EventId> = page.iter().map(|e| e.event_id).collect();
        assert!(
            ids.first().is_none_or(|first| *first > passed),
            "read from {passed:?} gave {ids:?}"
        );
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "out of order: {ids:?}");
        seen.extend(ids);
    }
}

/// Ends the sessions named `victim` every few milliseconds until `done`: how many ended.
async fn kill(url: String, victim: String, done: Arc<AtomicBool>) -> u64 {
    let mut killed = 0;
    while !done.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(40)).await;
        killed += terminate_sessions(&url, &victim).await.unwrap();
    }
    killed
}

/// Every event id in the table, in order.
async fn committed(url: &str, schema: &str) -> Vec<EventId> {
    let rows = admin(url)
        .await
        .query(
            &format!("SELECT event_id FROM \"{schema}\".events ORDER BY event_id"),
            &[],
        )
        .await
        .unwrap();
    rows.iter()
        .map(|r| EventId(r.get::<_, i64>(0) as u64))
        .collect()
}

async fn each_runs_ids_follow_its_seqs(url: &str, schema: &str) {
    let unordered: i64 = admin(url)
        .await
        .query_one(
            &format!(
                "SELECT count(*) FROM (SELECT event_id < lag(event_id) OVER \
                 (PARTITION BY run_id ORDER BY seq) AS back FROM \"{schema}\".events) AS e \
                 WHERE back"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        unordered, 0,
        "events whose id is below their seq's predecessor's"
    );
}
