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
