//! Scratch schemas (feature `testing`): a store in a schema of its own, with a random name,
//! dropped with the store, so that tests and benchmarks run side by side on one database and
//! leave nothing behind. Also what a crash of a store's process does ([`PgStore::halt`],
//! [`terminate_sessions`]), for simulations that crash an engine without ending the process.

use crate::error::pg;
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

impl PgStore {
    /// What the death of its process does to the store on the client's side: its pools,
    /// the readers' and the writer's, are closed at once, so nothing more reaches the
    /// database (every later read fails, and so does an append still queued for the
    /// writer). A transaction in flight keeps its connection until its next statement:
    /// [`terminate_sessions`] ends it.
    pub fn halt(&self) {
        self.pool.close();
        self.writer_pool.close();
    }
}

/// Ends every session named `application_name` (a store's [`PgOptions::application_name`])
/// from a connection of its own, as the database does when a client dies: a transaction in
/// flight is rolled back unless its commit got there first. Returns how many were ended.
///
/// # Errors
///
/// [`StoreError::Unavailable`] when the database cannot be reached; [`StoreError::Backend`]
/// when it refuses (a role without the right to end others' sessions).
pub async fn terminate_sessions(url: &str, application_name: &str) -> Result<u64, StoreError> {
    let doing = format!("ending the sessions named `{application_name}`");
    let (client, connection) = crate::tls::connect(url, &doing).await?;
    let ended = client
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND pid <> pg_backend_pid()",
            &[&application_name],
        )
        .await
        .map_err(|e| pg(&doing, e))?;
    drop(client);
    let _ = connection.await;
    Ok(ended.iter().filter(|row| row.get::<_, bool>(0)).count() as u64)
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
                let doing = format!("dropping scratch schema {schema}");
                let (client, _connection) = crate::tls::connect(&url, &doing).await?;
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                    .await
                    .map_err(|e| pg(&doing, e))
            })?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        });
        if let Ok(Err(e)) = dropped.join() {
            eprintln!("could not drop scratch schema {}: {e}", self.schema);
        }
    }
}
