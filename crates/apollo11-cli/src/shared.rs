//! `--store`: a PostgreSQL database holding the events instead of the data dir's log, shared
//! by any number of processes. A build without the `postgres` feature refuses the flag (and
//! `APOLLO11_STORE`), naming the feature, rather than fall back to the data dir's log.

#[cfg(all(feature = "postgres", feature = "server"))]
pub use postgres::schema;
#[cfg(feature = "postgres")]
pub use postgres::{open, options, Shared};

#[cfg(all(not(feature = "postgres"), feature = "server"))]
pub use without::schema;
#[cfg(not(feature = "postgres"))]
pub use without::{open, options, Shared};

#[cfg(feature = "postgres")]
mod postgres {
    use crate::Exit;
    use apollo11_postgres::{PgOptions, PgStore};
    use apollo11_store::{DynStore, StoreError};
    use std::sync::Arc;

    /// The database of `--store`, and its schema.
    pub type Shared = PgOptions;

    /// `--store URL` in `--store-schema SCHEMA`: a `postgres://` or `postgresql://` url.
    pub fn options(url: &str, schema: &str) -> Result<Shared, Exit> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(Exit::fail(
                2,
                "--store: a postgres:// or postgresql:// url is expected (without --store, the data dir's file log is used)",
            ));
        }
        // Connections are named after the schema in `pg_stat_activity`: one database can hold
        // several deployments, and an operator can tell (or cut) one's connections.
        Ok(PgOptions {
            schema: schema.to_owned(),
            application_name: schema.to_owned(),
            ..PgOptions::new(url)
        })
    }

    /// The shared store, under leases.
    pub async fn open(options: &Shared) -> Result<DynStore, Exit> {
        let store = PgStore::open(options.clone()).await.map_err(|e| match e {
            StoreError::Invalid { .. } => Exit::fail(2, format!("--store: {e}")),
            other => Exit::fail(4, format!("--store: {other}")),
        })?;
        Ok(DynStore::leased(Arc::new(store)))
    }

    /// The schema the events are in.
    #[cfg(feature = "server")]
    pub fn schema(shared: &Shared) -> &str {
        &shared.schema
    }
}

#[cfg(not(feature = "postgres"))]
mod without {
    use crate::Exit;
    use apollo11_store::DynStore;

    /// No database can be named in a build without PostgreSQL.
    pub enum Shared {}

    /// Refuses `--store`: this build has no PostgreSQL.
    pub fn options(_url: &str, _schema: &str) -> Result<Shared, Exit> {
        Err(Exit::fail(
            2,
            "--store: this apollo11 was built without PostgreSQL (cargo feature `postgres`, on by default); without --store (and APOLLO11_STORE), the data dir's file log is used",
        ))
    }

    pub async fn open(shared: &Shared) -> Result<DynStore, Exit> {
        match *shared {}
    }

    #[cfg(feature = "server")]
    pub fn schema(shared: &Shared) -> &str {
        match *shared {}
    }
}
