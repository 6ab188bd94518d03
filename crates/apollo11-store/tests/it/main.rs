//! The conformance suite on the in-memory store: with dense ids, as the file log assigns
//! them, and with gaps, as a database sequence may (the contract is strictly increasing ids,
//! not dense ones).

/// Ids 1, 2, 3…
mod dense {
    use apollo11_store::MemStore;
    use std::sync::Arc;

    apollo11_store::conformance_tests!(Arc::new(MemStore::new()));
}

/// Ids 2, 4, 6…
mod even_ids {
    use apollo11_store::{IdGaps, MemStore};
    use std::sync::Arc;

    apollo11_store::conformance_tests!(Arc::new(MemStore::with_id_gaps(IdGaps::Even)));
}

/// Ids with random gaps of 0 to 7; `APOLLO11_SEED` replays a seed.
mod random_gaps {
    use apollo11_store::{IdGaps, MemStore};
    use std::sync::Arc;

    fn store() -> Arc<MemStore> {
        let seed = std::env::var("APOLLO11_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                now.map_or(1, |d| d.as_nanos() as u64)
            });
        println!("id gaps seed {seed} (APOLLO11_SEED={seed} replays it)");
        Arc::new(MemStore::with_id_gaps(IdGaps::Random { seed }))
    }

    apollo11_store::conformance_tests!(store());
}

/// A store that cannot push: the trait's default change feed, which polls `read_from`.
mod polling {
    use apollo11_core::{BlobRef, Event, EventId, RunId, Seq};
    use apollo11_store::{
        BlobStore, EventStore, IdGaps, MemStore, NewEvent, RunSummary, Snapshot, SnapshotStore,
        StoreError,
    };
    use async_trait::async_trait;
    use std::sync::Arc;

    /// `MemStore` with everything but `subscribe`.
    pub struct Polling(MemStore);

    #[async_trait]
    impl EventStore for Polling {
        async fn append(
            &self,
            run_id: &RunId,
            expected_seq: Seq,
            events: Vec<NewEvent>,
        ) -> Result<Vec<EventId>, StoreError> {
            self.0.append(run_id, expected_seq, events).await
        }
        async fn read_run(&self, run_id: &RunId, from: Seq) -> Result<Vec<Event>, StoreError> {
            self.0.read_run(run_id, from).await
        }
        async fn read_from(&self, from: EventId, max: u32) -> Result<Vec<Event>, StoreError> {
            self.0.read_from(from, max).await
        }
        async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
            self.0.list_runs().await
        }
        async fn last_event_id(&self) -> Result<EventId, StoreError> {
            self.0.last_event_id().await
        }
    }

    #[async_trait]
    impl SnapshotStore for Polling {
        async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
            self.0.save_snapshot(snapshot).await
        }
        async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
            self.0.load_snapshot().await
        }
    }

    #[async_trait]
    impl BlobStore for Polling {
        async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
            self.0.put_blob(bytes).await
        }
        async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
            self.0.get_blob(blob).await
        }
    }

    apollo11_store::conformance_tests!(Arc::new(Polling(MemStore::with_id_gaps(IdGaps::Even))));
}

/// A store that pushes must tell a slow subscriber that it fell behind: the case returns
/// whether it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mem_store_tells_a_slow_subscriber_it_fell_behind() {
    use apollo11_store::{conformance, IdGaps, MemStore};
    for gaps in [IdGaps::None, IdGaps::Random { seed: 5 }] {
        let store = std::sync::Arc::new(MemStore::with_id_gaps(gaps));
        let told =
            conformance::a_slow_subscriber_is_told_it_fell_behind_and_resumes_by_re_reading(store)
                .await;
        assert!(told, "{gaps:?}");
    }
}

/// Leases, on the system clock as every backend's cases run them.
mod leases {
    use apollo11_store::MemStore;
    use std::sync::Arc;

    apollo11_store::lease_conformance_tests!(Arc::new(MemStore::new()));
}

/// Controls.
mod controls {
    use apollo11_store::MemStore;
    use std::sync::Arc;

    apollo11_store::control_conformance_tests!(Arc::new(MemStore::new()));
}

/// The same cases through `DynStore`, which forwards every call (the change feed too) to
/// the backend behind it.
mod dynamic {
    use apollo11_store::{DynStore, IdGaps, MemStore};
    use std::sync::Arc;

    apollo11_store::conformance_tests!(Arc::new(DynStore::new(Arc::new(MemStore::with_id_gaps(
        IdGaps::Even
    )))));

    mod controls {
        use apollo11_store::{DynStore, MemStore};
        use std::sync::Arc;

        apollo11_store::control_conformance_tests!(Arc::new(DynStore::new(Arc::new(
            MemStore::new()
        ))));
    }

    #[test]
    fn only_a_leased_store_has_leases() {
        let plain = DynStore::new(Arc::new(MemStore::new()));
        assert!(plain.leases().is_none());
        assert!(DynStore::leased(Arc::new(MemStore::new()))
            .leases()
            .is_some());
    }
}

/// `Acked` forwards every call (leases too) and records exactly the appends acknowledged.
mod acked {
    use apollo11_core::{EventKind, Payload, RunId, Seq};
    use apollo11_store::conformance::event;
    use apollo11_store::{AckLog, Acked, EventStore, Fence, LeaseStore, MemStore, StoreError};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// Each acknowledged append as `run first_seq kinds`.
    #[derive(Default)]
    pub struct Lines(Mutex<Vec<String>>);

    impl AckLog for Lines {
        fn acknowledged(&self, run_id: &RunId, first_seq: Seq, kinds: &[&'static str]) {
            let line = format!("{run_id} {} {}", first_seq.0, kinds.join(","));
            self.0.lock().unwrap().push(line);
        }
    }

    fn acked() -> Arc<Acked<MemStore, Lines>> {
        Arc::new(Acked::new(Arc::new(MemStore::new()), Lines::default()))
    }

    apollo11_store::conformance_tests!(acked());
    apollo11_store::lease_conformance_tests!(acked());

    #[tokio::test]
    async fn acknowledged_appends_are_recorded_fenced_ones_too_and_refused_ones_not() {
        let store = acked();
        let run = RunId::from("r");
        let created = event(
            None,
            EventKind::RunCreated {
                workflow: "w".into(),
            },
            0,
            Payload::default(),
        );
        let started = || event(Some("s"), EventKind::Started, 1, Payload::default());
        store
            .append(&run, Seq(1), vec![created.clone()])
            .await
            .unwrap();
        let refused = store.append(&run, Seq(1), vec![created]).await;
        assert!(
            matches!(refused, Err(StoreError::Conflict { .. })),
            "{refused:?}"
        );
        let lease = store.acquire(&run, "a", Duration::from_secs(5)).await;
        let fence = lease.unwrap().expect("a free lease").fence();
        let two = vec![started(), started()];
        store.append_fenced(&fence, Seq(2), two).await.unwrap();
        let stale = Fence {
            epoch: fence.epoch + 1,
            ..fence
        };
        let fenced = store.append_fenced(&stale, Seq(4), vec![started()]).await;
        assert!(
            matches!(fenced, Err(StoreError::Fenced { .. })),
            "{fenced:?}"
        );
        assert_eq!(store.inner().last_event_id().await.unwrap().0, 3);
        let lines = store.log().0.lock().unwrap().clone();
        assert_eq!(lines, ["r 1 run_created", "r 2 started,started"]);
    }
}
