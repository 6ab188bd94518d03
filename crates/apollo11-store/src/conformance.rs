//! The conformance suite: what every backend must do, checked the same way for all of them.
//! A backend runs it with [`conformance_tests!`](crate::conformance_tests), giving an
//! expression that makes a fresh, empty store.

mod claims;
pub mod controls;
pub mod leases;

use crate::{
    offload, resolve, BlobStore, Change, EventStore, NewEvent, RunFeed, Snapshot, SnapshotStore,
    StoreError, Subscription,
};
use apollo11_core::{limits, BlobRef, EventId, EventKind, Payload, RunId, Seq, StepName};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// What the suite needs of a backend.
pub trait Store: EventStore + SnapshotStore + BlobStore + 'static {}
impl<T: EventStore + SnapshotStore + BlobStore + 'static> Store for T {}

/// Generates one `#[test]` per conformance case, each on a runtime of its own
/// ([`block_on`]), so the calling crate needs no tokio; `$make` must evaluate to an
/// `Arc<impl Store>` that is fresh and empty each time it is evaluated (it is evaluated
/// inside the case's async block, so it may `.await`, or `return` to skip the case).
///
/// A backend's tests invoke it once; here a store that keeps its events in a
/// [`MemStore`](crate::MemStore) but cannot push, so the change feed is the trait's polling default.
/// (A doc test does not run `#[test]` functions: this one also runs two cases by hand.)
///
/// ```
/// use apollo11_store::{BlobStore, EventStore, MemStore, NewEvent, RunSummary, Snapshot};
/// use apollo11_store::{SnapshotStore, StoreError};
/// use apollo11_core::{BlobRef, Event, EventId, RunId, Seq};
/// use std::sync::Arc;
///
/// struct Polling(MemStore);
///
/// #[async_trait::async_trait]
/// impl EventStore for Polling {
///     async fn append(&self, run: &RunId, seq: Seq, events: Vec<NewEvent>)
///         -> Result<Vec<EventId>, StoreError> { self.0.append(run, seq, events).await }
///     async fn read_run(&self, run: &RunId, from: Seq) -> Result<Vec<Event>, StoreError> {
///         self.0.read_run(run, from).await
///     }
///     async fn read_from(&self, from: EventId, max: u32) -> Result<Vec<Event>, StoreError> {
///         self.0.read_from(from, max).await
///     }
///     async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> { self.0.list_runs().await }
///     async fn last_event_id(&self) -> Result<EventId, StoreError> { self.0.last_event_id().await }
/// }
/// #[async_trait::async_trait]
/// impl SnapshotStore for Polling {
///     async fn save_snapshot(&self, s: Snapshot) -> Result<(), StoreError> { self.0.save_snapshot(s).await }
///     async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> { self.0.load_snapshot().await }
/// }
/// #[async_trait::async_trait]
/// impl BlobStore for Polling {
///     async fn put_blob(&self, b: Vec<u8>) -> Result<BlobRef, StoreError> { self.0.put_blob(b).await }
///     async fn get_blob(&self, b: &BlobRef) -> Result<Vec<u8>, StoreError> { self.0.get_blob(b).await }
/// }
///
/// // In the backend's tests: one `#[test]` per case.
/// mod suite {
///     apollo11_store::conformance_tests!(std::sync::Arc::new(super::Polling(apollo11_store::MemStore::new())));
/// }
///
/// use apollo11_store::conformance::{self, block_on};
/// block_on(conformance::a_wrong_expected_seq_is_a_conflict_and_writes_nothing(
///     Arc::new(Polling(MemStore::new())),
/// ));
/// block_on(conformance::the_change_feed_delivers_every_event_once_in_order_from_any_start(
///     Arc::new(Polling(MemStore::new())),
/// ));
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@cases $make;
            appends_get_consecutive_seqs_and_increasing_ids,
            a_wrong_expected_seq_is_a_conflict_and_writes_nothing,
            a_run_reads_back_from_any_seq,
            reading_from_a_watermark_is_ordered_and_bounded,
            runs_are_listed_with_their_last_seq,
            concurrent_appenders_to_one_run_get_exactly_one_winner_per_seq,
            concurrent_appenders_to_many_runs_all_land,
            invalid_appends_are_refused_whole,
            the_newest_snapshot_is_loaded,
            blobs_round_trip_and_are_content_addressed,
            the_change_feed_delivers_every_event_once_in_order_from_any_start,
            a_slow_subscriber_is_told_it_fell_behind_and_resumes_by_re_reading,
            a_subscriber_started_mid_stream_misses_nothing_between_its_read_and_its_subscription,
            a_run_feed_follows_one_run_from_any_seq_even_when_it_falls_behind,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {$(
        #[test]
        fn $case() {
            $crate::conformance::block_on(async {
                $crate::conformance::$case($make).await;
            });
        }
    )*};
}

/// Runs `case` to its end on a fresh multi-thread runtime of two workers, as every case of
/// [`conformance_tests!`](crate::conformance_tests) and
/// [`lease_conformance_tests!`](crate::lease_conformance_tests) runs.
///
/// # Panics
///
/// If the runtime cannot be built (the system refuses its threads), or if `case` panics.
pub fn block_on<F: Future>(case: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the conformance suite needs a tokio runtime");
    runtime.block_on(case)
}

/// An event for `step` (or a run-level `RunCreated` when `step` is `None`).
pub fn event(step: Option<&str>, kind: EventKind, attempt: u32, payload: Payload) -> NewEvent {
    NewEvent {
        step: step.map(StepName::from),
        kind,
        attempt,
        at_ms: 1_000,
        instance: "conformance".into(),
        payload,
    }
}

fn created() -> NewEvent {
    event(
        None,
        EventKind::RunCreated {
            workflow: "wf".into(),
        },
        0,
        Payload::inline("{}"),
    )
}

fn started(step: &str) -> NewEvent {
    event(Some(step), EventKind::Started, 1, Payload::Empty)
}

fn run(name: &str) -> RunId {
    RunId::from(name)
}

#[doc(hidden)]
pub async fn appends_get_consecutive_seqs_and_increasing_ids(store: Arc<impl Store>) {
    assert_eq!(store.last_event_id().await.unwrap(), EventId(0));
    let a = store
        .append(&run("a"), Seq(1), vec![created(), started("s")])
        .await
        .unwrap();
    let b = store
        .append(&run("b"), Seq(1), vec![created()])
        .await
        .unwrap();
    let a2 = store
        .append(
            &run("a"),
            Seq(3),
            vec![event(
                Some("s"),
                EventKind::Succeeded,
                1,
                Payload::inline("out"),
            )],
        )
        .await
        .unwrap();
    let ids: Vec<EventId> = [a.clone(), b, a2.clone()].concat();
    assert_eq!(ids.len(), 4, "one id per event");
    assert!(ids[0] > EventId(0), "ids start above 0: {ids:?}");
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids strictly increase, gaps allowed: {ids:?}"
    );
    let events = store.read_run(&run("a"), Seq(1)).await.unwrap();
    let seqs: Vec<u32> = events.iter().map(|e| e.seq.0).collect();
    assert_eq!(seqs, [1, 2, 3], "seqs are dense");
    let read: Vec<EventId> = events.iter().map(|e| e.event_id).collect();
    assert_eq!(
        read,
        [a, a2].concat(),
        "each event keeps the id it was given"
    );
    assert_eq!(events[2].payload, Payload::inline("out"));
    assert_eq!(events[2].run_id, run("a"));
    assert_eq!(store.last_event_id().await.unwrap(), ids[3]);
}

#[doc(hidden)]
pub async fn a_wrong_expected_seq_is_a_conflict_and_writes_nothing(store: Arc<impl Store>) {
    let first = store
        .append(&run("a"), Seq(1), vec![created()])
        .await
        .unwrap();
    for wrong in [Seq(1), Seq(3), Seq(0)] {
        match store.append(&run("a"), wrong, vec![started("s")]).await {
            Err(StoreError::Conflict {
                expected, actual, ..
            }) => assert_eq!((expected, actual), (wrong, Seq(1))),
            other => panic!("seq {wrong}: expected a conflict, got {other:?}"),
        }
    }
    assert!(matches!(
        store.append(&run("new"), Seq(2), vec![created()]).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(store.read_run(&run("a"), Seq(1)).await.unwrap().len(), 1);
    assert!(store
        .read_run(&run("new"), Seq(1))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(store.last_event_id().await.unwrap(), first[0]);
}

#[doc(hidden)]
pub async fn a_run_reads_back_from_any_seq(store: Arc<impl Store>) {
    let batch = vec![created(), started("a"), started("b"), started("c")];
    store.append(&run("r"), Seq(1), batch).await.unwrap();
    store
        .append(&run("other"), Seq(1), vec![created()])
        .await
        .unwrap();
    for from in 1..=5u32 {
        let seqs: Vec<u32> = store
            .read_run(&run("r"), Seq(from))
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq.0)
            .collect();
        assert_eq!(seqs, (from..=4).collect::<Vec<_>>(), "from seq {from}");
        let one = store.read_event(&run("r"), Seq(from)).await.unwrap();
        let expected = store.read_run(&run("r"), Seq(from)).await.unwrap();
        assert_eq!(one.as_ref(), expected.first(), "the event at seq {from}");
    }
    assert!(store
        .read_run(&run("unknown"), Seq(1))
        .await
        .unwrap()
        .is_empty());
    for (r, seq) in [("unknown", 1), ("r", 0), ("other", 2)] {
        assert_eq!(store.read_event(&run(r), Seq(seq)).await.unwrap(), None);
    }
}

#[doc(hidden)]
pub async fn reading_from_a_watermark_is_ordered_and_bounded(store: Arc<impl Store>) {
    let mut ids = Vec::new();
    for r in ["x", "y", "z"] {
        let appended = store
            .append(&run(r), Seq(1), vec![created(), started("s")])
            .await
            .unwrap();
        ids.extend(appended);
    }
    let all = store.read_from(EventId(1), 100).await.unwrap();
    assert_eq!(all.iter().map(|e| e.event_id).collect::<Vec<_>>(), ids);
    let page = store.read_from(ids[2], 2).await.unwrap();
    assert_eq!(
        page.iter()
            .map(|e| (e.event_id, e.run_id.as_str()))
            .collect::<Vec<_>>(),
        [(ids[2], "y"), (ids[3], "y")]
    );
    let after_last = EventId(ids[5].0 + 1);
    assert!(store.read_from(after_last, 10).await.unwrap().is_empty());
    assert!(store.read_from(EventId(1), 0).await.unwrap().is_empty());
    // A watermark need not be an event's id (ids may have gaps): reading from just after an
    // event starts at the next one, whatever its id.
    let after_second = EventId(ids[1].0 + 1);
    let next = store.read_from(after_second, 1).await.unwrap();
    assert_eq!(
        next.iter().map(|e| e.event_id).collect::<Vec<_>>(),
        [ids[2]]
    );
    let froms = [
        (EventId(1), 100),
        (ids[2], 2),
        (after_second, 3),
        (ids[5], 5),
        (after_last, 10),
        (EventId(1), 0),
    ];
    for (from, max) in froms {
        let mut scanned = Vec::new();
        let last = store
            .scan_from(from, max, &mut |e| scanned.push(e.to_event()))
            .await
            .unwrap();
        let read = store.read_from(from, max).await.unwrap();
        assert_eq!(scanned, read, "scan from {from}, at most {max}");
        assert_eq!(last, read.last().map(|e| e.event_id), "from {from}");
    }
}

#[doc(hidden)]
pub async fn runs_are_listed_with_their_last_seq(store: Arc<impl Store>) {
    let b = store
        .append(&run("b"), Seq(1), vec![created()])
        .await
        .unwrap();
    let a = store
        .append(&run("a"), Seq(1), vec![created(), started("s")])
        .await
        .unwrap();
    let runs = store.list_runs().await.unwrap();
    let listed: Vec<(&str, u32, EventId)> = runs
        .iter()
        .map(|r| (r.run_id.as_str(), r.last_seq.0, r.last_event_id))
        .collect();
    assert_eq!(listed, [("a", 2, a[1]), ("b", 1, b[0])]);
}

#[doc(hidden)]
pub async fn concurrent_appenders_to_one_run_get_exactly_one_winner_per_seq(
    store: Arc<impl Store>,
) {
    store
        .append(&run("r"), Seq(1), vec![created()])
        .await
        .unwrap();
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .append(&run("r"), Seq(2), vec![started(&format!("s{i}"))])
                    .await
            })
        })
        .collect();
    let mut winners = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => winners += 1,
            Err(StoreError::Conflict { .. }) => {}
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    assert_eq!(winners, 1);
    assert_eq!(store.read_run(&run("r"), Seq(1)).await.unwrap().len(), 2);
}

#[doc(hidden)]
pub async fn concurrent_appenders_to_many_runs_all_land(store: Arc<impl Store>) {
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let r = run(&format!("run-{i:02}"));
                let mut ids = store.append(&r, Seq(1), vec![created()]).await.unwrap();
                for seq in 2..=10 {
                    ids.extend(
                        store
                            .append(&r, Seq(seq), vec![started(&format!("s{seq}"))])
                            .await
                            .unwrap(),
                    );
                }
                ids
            })
        })
        .collect();
    let mut ids = Vec::new();
    for t in tasks {
        let mine = t.await.unwrap();
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "one appender's ids increase"
        );
        ids.extend(mine);
    }
    ids.sort();
    assert_eq!(ids.len(), 320);
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "every id given once: {ids:?}"
    );
    let all = store.read_from(EventId(1), 1_000).await.unwrap();
    let read: Vec<EventId> = all.iter().map(|e| e.event_id).collect();
    assert_eq!(read, ids, "read back in id order, each with its id");
    for r in store.list_runs().await.unwrap() {
        let seqs: Vec<u32> = store
            .read_run(&r.run_id, Seq(1))
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq.0)
            .collect();
        assert_eq!(seqs, (1..=10).collect::<Vec<_>>(), "{}", r.run_id);
    }
}

#[doc(hidden)]
pub async fn invalid_appends_are_refused_whole(store: Arc<impl Store>) {
    let big = event(
        Some("s"),
        EventKind::Started,
        1,
        Payload::Inline(vec![7; 40 * 1024]),
    );
    let long_step = event(
        Some(&"x".repeat(300)),
        EventKind::Started,
        1,
        Payload::Empty,
    );
    assert!(matches!(
        store.append(&run("r"), Seq(1), vec![]).await,
        Err(StoreError::Invalid { .. })
    ));
    assert!(matches!(
        store.append(&run("r"), Seq(1), vec![created(), big]).await,
        Err(StoreError::TooLarge { .. })
    ));
    assert!(matches!(
        store
            .append(&run("r"), Seq(1), vec![created(), long_step])
            .await,
        Err(StoreError::TooLarge { .. })
    ));
    for bad in [
        "",
        ".",
        "..",
        "../../x",
        "/abs",
        "a/b",
        "nul\0",
        "esc\u{1b}[2J",
    ] {
        assert!(
            matches!(
                store.append(&run(bad), Seq(1), vec![created()]).await,
                Err(StoreError::Invalid { .. })
            ),
            "run id {bad:?} must be refused"
        );
        let step = event(Some(bad), EventKind::Started, 1, Payload::Empty);
        assert!(
            matches!(
                store.append(&run("r"), Seq(1), vec![created(), step]).await,
                Err(StoreError::Invalid { .. })
            ),
            "step name {bad:?} must be refused"
        );
    }
    assert_eq!(
        store.last_event_id().await.unwrap(),
        EventId(0),
        "nothing of a refused batch is written"
    );
    store
        .append(&run("r"), Seq(1), vec![created()])
        .await
        .unwrap();
}

#[doc(hidden)]
pub async fn the_newest_snapshot_is_loaded(store: Arc<impl Store>) {
    assert_eq!(store.load_snapshot().await.unwrap(), None);
    let ids = store
        .append(&run("r"), Seq(1), vec![created(), started("s")])
        .await
        .unwrap();
    store
        .save_snapshot(Snapshot {
            watermark: ids[0],
            state: b"one".to_vec(),
        })
        .await
        .unwrap();
    store
        .save_snapshot(Snapshot {
            watermark: ids[1],
            state: b"two".to_vec(),
        })
        .await
        .unwrap();
    let loaded = store.load_snapshot().await.unwrap().unwrap();
    assert_eq!(
        loaded,
        Snapshot {
            watermark: ids[1],
            state: b"two".to_vec()
        }
    );
}

#[doc(hidden)]
pub async fn blobs_round_trip_and_are_content_addressed(store: Arc<impl Store>) {
    let big: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let payload = offload(store.as_ref(), Payload::Inline(big.clone()), 4096)
        .await
        .unwrap();
    let Payload::Blob(blob) = &payload else {
        panic!("a large payload must be offloaded, got inline")
    };
    assert_eq!(blob.bytes, 100_000);
    store
        .append(
            &run("r"),
            Seq(1),
            vec![event(
                None,
                EventKind::RunCreated {
                    workflow: "wf".into(),
                },
                0,
                payload.clone(),
            )],
        )
        .await
        .unwrap();
    let read = store.read_run(&run("r"), Seq(1)).await.unwrap();
    assert_eq!(
        resolve(store.as_ref(), &read[0].payload).await.unwrap(),
        big
    );
    assert_eq!(
        store.put_blob(big.clone()).await.unwrap(),
        *blob,
        "same bytes, same address"
    );
    let small = offload(store.as_ref(), Payload::inline("small"), 4096)
        .await
        .unwrap();
    assert_eq!(small, Payload::inline("small"));
    let missing = BlobRef {
        sha256: "0".repeat(64),
        bytes: 1,
    };
    assert!(matches!(
        store.get_blob(&missing).await,
        Err(StoreError::NotFound { .. })
    ));
}

/// Awaits `f`, failing the test after 60 s instead of hanging (a change feed that loses an
/// event would otherwise wait forever).
async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing after 60 s"))
}

/// The next `n` events of a subscription; a `FellBehind` fails the test.
async fn take_events(sub: &mut Subscription<'_>, n: usize, what: &str) -> Vec<EventId> {
    let mut ids = Vec::with_capacity(n);
    while ids.len() < n {
        match within(what, sub.next()).await.unwrap() {
            Change::Event(e) => ids.push(e.event_id),
            Change::FellBehind { after } => panic!("{what}: fell behind after {after}"),
        }
    }
    ids
}

/// Appends `n` `Started` events to run `r` (created first if new), in appends of `batch`.
async fn append_many(store: &impl Store, r: &str, n: usize, batch: usize) -> Vec<EventId> {
    let run_id = run(r);
    let mut next = store.read_run(&run_id, Seq(1)).await.unwrap().len() as u32 + 1;
    let mut ids = Vec::with_capacity(n);
    if next == 1 {
        ids.extend(
            store
                .append(&run_id, Seq(1), vec![created()])
                .await
                .unwrap(),
        );
        next = 2;
    }
    while ids.len() < n {
        let count = batch.min(n - ids.len());
        let events = (0..count)
            .map(|i| started(&format!("s{}", ids.len() + i)))
            .collect();
        let appended = store.append(&run_id, Seq(next), events).await.unwrap();
        next += appended.len() as u32;
        ids.extend(appended);
    }
    ids
}

async fn all_ids(store: &impl Store) -> Vec<EventId> {
    let mut ids = Vec::new();
    loop {
        let from = EventId(ids.last().map_or(0, |id: &EventId| id.0) + 1);
        let page = store.read_from(from, 1_000).await.unwrap();
        if page.is_empty() {
            return ids;
        }
        ids.extend(page.iter().map(|e| e.event_id));
    }
}

#[doc(hidden)]
pub async fn the_change_feed_delivers_every_event_once_in_order_from_any_start(
    store: Arc<impl Store>,
) {
    let mut before = Vec::new();
    for r in ["x", "y", "z"] {
        before.extend(
            store
                .append(&run(r), Seq(1), vec![created(), started("s")])
                .await
                .unwrap(),
        );
    }
    // From nothing, from an event, from just after one (an id that may be a gap), from the end.
    let starts = [
        EventId(0),
        before[1],
        EventId(before[2].0 + 1),
        *before.last().unwrap(),
    ];
    let mut subs = Vec::new();
    for start in starts {
        subs.push((start, store.subscribe(start).await.unwrap()));
    }
    let appenders: Vec<_> = ["p", "q"]
        .into_iter()
        .map(|r| {
            let store = store.clone();
            tokio::spawn(async move {
                for _ in 0..5 {
                    append_many(store.as_ref(), r, 3, 3).await;
                }
            })
        })
        .collect();
    for a in appenders {
        a.await.unwrap();
    }
    let all = all_ids(store.as_ref()).await;
    for (start, sub) in &mut subs {
        let expected: Vec<EventId> = all.iter().copied().filter(|id| id > start).collect();
        let got = take_events(sub, expected.len(), &format!("from {start}")).await;
        assert_eq!(
            got, expected,
            "from {start}: every later event, once, in order"
        );
    }
}

/// Returns whether the subscriber was told it fell behind (a store that pushes must tell
/// it; one that polls never falls behind).
#[doc(hidden)]
pub async fn a_slow_subscriber_is_told_it_fell_behind_and_resumes_by_re_reading(
    store: Arc<impl Store>,
) -> bool {
    let mut sub = store.subscribe(EventId(0)).await.unwrap();
    // More than any feed holds, appended while the subscriber reads nothing: the appends
    // must not wait for it.
    let n = limits::CHANGE_FEED_EVENTS_MAX as usize + 500;
    let batch = limits::APPEND_BATCH_EVENTS_MAX as usize;
    let appended = within("appending past a slow subscriber", async {
        append_many(store.as_ref(), "slow", n, batch).await
    })
    .await;
    let mut delivered = Vec::new();
    let mut fell_behind = false;
    while delivered.len() < appended.len() {
        match within("draining", sub.next()).await.unwrap() {
            Change::Event(e) => delivered.push(e.event_id),
            Change::FellBehind { after } => {
                let last = delivered.last().copied().unwrap_or(EventId(0));
                assert_eq!(after, last, "everything up to `after` was delivered");
                assert_eq!(
                    within("an ended subscription", sub.next()).await.unwrap(),
                    Change::FellBehind { after },
                    "a subscription that fell behind stays ended"
                );
                fell_behind = true;
                // Resume: re-read from the log, then follow again from there.
                loop {
                    let from = EventId(delivered.last().map_or(0, |id| id.0) + 1);
                    let page = store.read_from(from, 1_000).await.unwrap();
                    if page.is_empty() {
                        break;
                    }
                    delivered.extend(page.iter().map(|e| e.event_id));
                }
                let last = delivered.last().copied().unwrap_or(EventId(0));
                sub = store.subscribe(last).await.unwrap();
            }
        }
    }
    assert_eq!(
        delivered, appended,
        "every event once, in order, across the resume"
    );
    let more = append_many(store.as_ref(), "slow", 3, 3).await;
    assert_eq!(take_events(&mut sub, 3, "after resuming").await, more);
    fell_behind
}

#[doc(hidden)]
pub async fn a_subscriber_started_mid_stream_misses_nothing_between_its_read_and_its_subscription(
    store: Arc<impl Store>,
) {
    append_many(store.as_ref(), "a", 5, 2).await;
    let read = all_ids(store.as_ref()).await;
    let last_read = *read.last().unwrap();
    // Appended after the read and before the subscription: the subscription must have them.
    let between = append_many(store.as_ref(), "a", 3, 1).await;
    let mut sub = store.subscribe(last_read).await.unwrap();
    let after = append_many(store.as_ref(), "b", 3, 1).await;
    let expected = [between, after].concat();
    assert_eq!(
        take_events(&mut sub, expected.len(), "mid-stream").await,
        expected
    );
    // The same with a writer running all along: a read, then a subscription from it.
    let writer = {
        let store = store.clone();
        tokio::spawn(async move { append_many(store.as_ref(), "busy", 200, 1).await })
    };
    let read = all_ids(store.as_ref()).await;
    let last_read = *read.last().unwrap();
    let mut sub = store.subscribe(last_read).await.unwrap();
    writer.await.unwrap();
    let all = all_ids(store.as_ref()).await;
    let rest: Vec<EventId> = all.iter().copied().filter(|id| *id > last_read).collect();
    let got = take_events(&mut sub, rest.len(), "with a writer running").await;
    assert_eq!(
        [read, got].concat(),
        all,
        "read + subscription = the log, once each"
    );
}

#[doc(hidden)]
pub async fn a_run_feed_follows_one_run_from_any_seq_even_when_it_falls_behind(
    store: Arc<impl Store>,
) {
    append_many(store.as_ref(), "r", 3, 1).await;
    append_many(store.as_ref(), "other", 2, 2).await;
    let mut from_two = RunFeed::new(store.as_ref(), run("r"), Seq(2))
        .await
        .unwrap();
    let mut not_yet = RunFeed::new(store.as_ref(), run("later"), Seq(1))
        .await
        .unwrap();
    append_many(store.as_ref(), "r", 2, 1).await;
    append_many(store.as_ref(), "later", 1, 1).await;
    // Far more of other runs' events than a feed holds, then the run's own again.
    let flood = limits::CHANGE_FEED_EVENTS_MAX as usize + 100;
    let batch = limits::APPEND_BATCH_EVENTS_MAX as usize;
    append_many(store.as_ref(), "other", flood, batch).await;
    append_many(store.as_ref(), "r", 2, 2).await;
    let mut seqs = Vec::new();
    // Seqs 1 to 3, then 4 and 5, then 6 and 7: from 2, six events.
    while seqs.len() < 6 {
        let event = within("run feed", from_two.next()).await.unwrap();
        assert_eq!(event.run_id, run("r"));
        seqs.push(event.seq.0);
    }
    assert_eq!(
        seqs,
        (2..=7).collect::<Vec<_>>(),
        "seq 2 on, once each, in order"
    );
    assert_eq!(from_two.next_seq(), Seq(8));
    let first = within("a run created later", not_yet.next()).await.unwrap();
    assert_eq!((first.run_id.as_str(), first.seq), ("later", Seq(1)));
}
