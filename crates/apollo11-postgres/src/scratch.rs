//! Scratch schemas (feature `testing`): a store in a schema of its own, with a random name,
//! dropped with the store, so that tests and benchmarks run side by side on one database and
//! leave nothing behind.

use crate::{PgOptions, PgStore};
use apollo11_store::StoreError;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

/// The variable naming the test database.
pub const TEST_URL_VAR: &str = "APOLLO11_TEST_PG_URL";

/// Set (to anything but `0`) where the database must be there: tests fail without it.
pub const REQUIRE_VAR: &str = "APOLLO11_REQUIRE_PG";

/// The test database's URL; `None` (after saying so on stderr) when none is set and none is
/// required.
///
/// # Panics
/// When [`REQUIRE_VAR`] is set and [`TEST_URL_VAR`] is not: a CI run must not pass by
/// skipping.
pub fn test_url() -> Option<String> {
    if let Ok(url) = std::env::var(TEST_URL_VAR) {
        return Some(url);
    }
    let required = std::env::var(REQUIRE_VAR).is_ok_and(|v| v != "0");
    assert!(
        !required,
        "{REQUIRE_VAR} is set but {TEST_URL_VAR} is not: no database to test against"
    );
    // Straight to stderr, past the test harness's capture, so that the skip is seen.
    let notice = format!(
        "skipped: {TEST_URL_VAR} is not set (e.g. postgres://postgres@127.0.0.1:5432/test)\n"
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), notice.as_bytes());
    None
}

/// What drops a scratch schema.
#[derive(Debug)]
pub struct Scratch {
    url: String,
    schema: String,
}

impl PgStore {
    /// A store in a new schema with a random name (its connections' application name too),
    /// dropped (with everything in it) when the
    /// store is.
    ///
    /// # Errors
    ///
    /// As [`PgStore::open`].
    pub async fn open_scratch(url: &str) -> Result<PgStore, StoreError> {
        static OPENED: AtomicU64 = AtomicU64::new(0);
        let nonce = (std::process::id(), OPENED.fetch_add(1, Ordering::Relaxed));
        let schema = format!("scratch_{:016x}", RandomState::new().hash_one(nonce));
        let options = PgOptions {
            schema: schema.clone(),
            application_name: schema.clone(),
            pool_size: 4,
            ..PgOptions::new(url)
        };
        let mut store = PgStore::open(options).await?;
        store.scratch = Some(Scratch {
            url: url.to_owned(),
            schema,
        });
        Ok(store)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // On a thread of its own with its own runtime: a drop cannot await, and may happen
        // on a runtime's worker or outside any runtime.
        let (url, schema) = (self.url.clone(), self.schema.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let (client, connection) =
                    tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                    .await
            })?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        });
        if let Ok(Err(e)) = dropped.join() {
            eprintln!("could not drop scratch schema {}: {e}", self.schema);
        }
    }
}
