//! The conformance suite: what every backend must do, checked the same way for all of them.
//! A backend runs it with [`conformance_tests!`](crate::conformance_tests), giving an
//! expression that makes a fresh, empty store.

use crate::{
    offload, resolve, BlobStore, EventStore, NewEvent, Snapshot, SnapshotStore, StoreError,
};
use apollo11_core::{BlobRef, EventId, EventKind, Payload, RunId, Seq, StepName};
use std::sync::Arc;

/// What the suite needs of a backend.
pub trait Store: EventStore + SnapshotStore + BlobStore + 'static {}
impl<T: EventStore + SnapshotStore + BlobStore + 'static> Store for T {}

/// Generates one `#[tokio::test]` per conformance case; `$make` must evaluate to an
/// `Arc<impl Store>` that is fresh and empty each time it is evaluated.
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
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            $crate::conformance::$case($make).await;
        }
    )*};
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
