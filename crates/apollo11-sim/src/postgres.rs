//! The PostgreSQL medium: each seed in a scratch schema of its own (dropped with the medium,
//! also when the seed fails), each generation a new `PgStore` on it, the engine under
//! leases. Its crashes are kills: the drivers aborted, the store's pool closed and its
//! sessions ended by the database, so nothing the dead engine asked for reaches the
//! database later; the next generation takes the runs over as the same owner or, once the
//! leases have run out, as a new one. It runs on real time (see [`Medium::SIMULATED_TIME`]).

use crate::scenario::Crash;
use crate::store::{Medium, Recorded};
use apollo11_postgres::{terminate_sessions, PgOptions, PgStore};
use apollo11_runtime::Leasing;
use apollo11_store::StoreError;
use std::sync::Arc;
use std::time::Duration;

/// How long a lease lasts unrenewed: a new owner takes the runs over this long after a
/// crash. Short, but three renewals a ttl still reach a loaded database in time.
pub const LEASE_TTL: Duration = Duration::from_millis(500);

/// A seed's scratch schema on the database at a url.
pub struct Postgres {
    url: String,
    /// Holds the schema (dropped with it) between generations.
    scratch: Option<PgStore>,
    /// Stores opened so far: each generation's sessions are named after its number.
    opened: usize,
}

impl Postgres {
    /// A medium on the database at `url`; its schema is made at the first open.
    pub fn new(url: impl Into<String>) -> Postgres {
        Postgres {
            url: url.into(),
            scratch: None,
            opened: 0,
        }
    }

    /// What the sessions of the store opened `n`-th are called.
    fn application_name(schema: &str, n: usize) -> String {
        format!("{schema}_g{n}")
    }

    async fn schema(&mut self) -> Result<String, StoreError> {
        if let Some(scratch) = &self.scratch {
            return Ok(scratch.schema().to_owned());
        }
        let scratch = PgStore::open_scratch(&self.url).await?;
        let schema = scratch.schema().to_owned();
        self.scratch = Some(scratch);
        Ok(schema)
    }
}

impl Medium for Postgres {
    type Store = PgStore;

    const SIMULATED_TIME: bool = false;

    async fn open(&mut self) -> Result<Arc<PgStore>, StoreError> {
        let schema = self.schema().await?;
        let options = PgOptions {
            application_name: Postgres::application_name(&schema, self.opened),
            schema,
            pool_size: 4,
            ..PgOptions::new(&self.url)
        };
        self.opened += 1;
        PgStore::open(options).await.map(Arc::new)
    }

    fn leasing(&self, store: &Arc<Recorded<PgStore>>) -> Result<Option<Leasing>, StoreError> {
        Leasing::new(store.clone(), LEASE_TTL).map(Some)
    }

    fn arm(&mut self, crash: Crash) -> bool {
        matches!(crash, Crash::Kill { .. })
    }

    async fn crash(&mut self, store: &PgStore) -> Result<(), String> {
        store.halt();
        let name = Postgres::application_name(store.schema(), self.opened - 1);
        (terminate_sessions(&self.url, &name).await)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn recover(&mut self, _crash: Crash) {}

    fn verify(&self) -> Result<(), String> {
        Ok(())
    }
}
