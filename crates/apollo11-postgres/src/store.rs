//! [`PgStore`]: opening (pool, schema, writer, feed) and the event, snapshot and blob traits.

use crate::error::pg;
use crate::feed::{self, Feed};
use crate::read::{events, last_event_id, query, read_from};
use crate::rows::check_text;
use crate::schema::{check_schema, migrate};
use crate::sql::{Sql, KEPT_SNAPSHOTS};
use crate::writer::{self, Request};
use apollo11_core::{BlobRef, Event, EventId, RunId, Seq};
use apollo11_store::{
    check_blob, control_conflict, sha256_hex, validate, validate_control, BlobStore, Control,
    ControlStore, EventStore, NewEvent, RunSummary, Snapshot, SnapshotStore, StoreError,
    Subscription,
};
use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How to reach the database.
#[derive(Clone, Debug)]
pub struct PgOptions {
    /// `postgres://user[:password]@host[:port]/database[?options]`; TLS as its `sslmode`
    /// (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`) and `sslrootcert` say.
    pub url: String,
    /// The schema holding the tables (created if missing): [`DEFAULT_SCHEMA`] unless told.
    pub schema: String,
    /// Connections: half of them (at least one) the writer's, one per batch in flight,
    /// the rest (at least one) for reads, leases and the rest.
    pub pool_size: usize,
    /// What the store's connections are called in `pg_stat_activity`.
    pub application_name: String,
    /// How long an operation waits for a connection (or to make one) before it fails as
    /// `Unavailable`.
    pub connect_timeout: Duration,
}

/// How long the database lets a connection of the store sit idle inside a transaction
/// before it ends the session: the writer never waits between the statements of its
/// transactions, so only a frozen process reaches it, and its locks are freed.
const IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(1);

/// The schema a store uses unless told otherwise.
pub const DEFAULT_SCHEMA: &str = "apollo11";

impl PgOptions {
    /// The defaults for `url`: schema and connections named `apollo11`, 8 connections, 5 s
    /// to connect.
    pub fn new(url: impl Into<String>) -> PgOptions {
        PgOptions {
            url: url.into(),
            schema: DEFAULT_SCHEMA.into(),
            application_name: DEFAULT_SCHEMA.into(),
            pool_size: 8,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// Events, snapshots, blobs and leases in a PostgreSQL database; see the crate docs.
#[derive(Debug)]
pub struct PgStore {
    pub(crate) pool: Pool,
    /// The writer's own connections, closed with the rest by `halt`.
    #[cfg(feature = "testing")]
    pub(crate) writer_pool: Pool,
    pub(crate) sql: Arc<Sql>,
    writer: mpsc::Sender<Request>,
    feed: Arc<Feed>,
    feed_task: JoinHandle<()>,
    #[cfg(feature = "testing")]
    pub(crate) scratch: Option<crate::scratch::Scratch>,
}

impl PgStore {
    /// The schema holding the store's tables.
    pub fn schema(&self) -> &str {
        self.sql.schema()
    }

    /// Connects, creates or migrates the schema, and starts the writer and the change feed.
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`] for a bad url or schema name, a `verify-*` sslmode without a
    /// readable `sslrootcert`, or a schema a newer version made;
    /// [`StoreError::Unavailable`] when the server cannot be reached; [`StoreError::Backend`]
    /// when a migration fails.
    pub async fn open(options: PgOptions) -> Result<PgStore, StoreError> {
        check_schema(&options.schema)?;
        let tls = crate::tls::tls(&options.url)?;
        let mut config: tokio_postgres::Config =
            tls.url.parse().map_err(|e| StoreError::Invalid {
                what: "database url".into(),
                reason: format!("{e}"),
            })?;
        config.application_name(&options.application_name);
        // A client frozen inside a transaction (SIGSTOP, a VM paused, swapping) would hold
        // its runs' rows, and its transaction id would hold every reader of every instance
        // below it: the server ends such a session instead, and its transaction writes
        // nothing.
        let options_text = format!(
            "{} -c idle_in_transaction_session_timeout={}",
            config.get_options().unwrap_or_default(),
            IDLE_IN_TRANSACTION_TIMEOUT.as_millis()
        );
        config.options(options_text.trim_start());
        let side_by_side = (options.pool_size / 2).max(1);
        let reads = options.pool_size.saturating_sub(side_by_side).max(1);
        let pool = new_pool(config.clone(), tls.connector.clone(), reads, &options)?;
        // The writer's statements are planned once per connection (a generic plan): left
        // to choose, the server planned the batch's write anew at each execution, a fifth
        // of its time. Only on the writer's connections: the lease statements' `LIMIT $2`
        // would get a generic plan that scans every run.
        let mut generic = config.clone();
        generic.options(format!(
            "{} -c plan_cache_mode=force_generic_plan",
            options_text.trim_start()
        ));
        let writer_pool = new_pool(generic, tls.connector.clone(), side_by_side, &options)?;
        let mut client = pool
            .get()
            .await
            .map_err(|e| crate::error::pool("connecting to the database", e))?;
        migrate(&mut client, &options.schema).await?;
        drop(client);
        let sql = Arc::new(Sql::new(&options.schema));
        let writer = writer::spawn(writer_pool.clone(), sql.clone(), side_by_side);
        let (feed, feed_task) = feed::spawn(pool.clone(), sql.clone(), (config, tls.connector));
        Ok(PgStore {
            pool,
            #[cfg(feature = "testing")]
            writer_pool,
            sql,
            writer,
            feed,
            feed_task,
            #[cfg(feature = "testing")]
            scratch: None,
        })
    }

    /// Queues an append for the writer and waits for its answer.
    pub(crate) async fn send(
        &self,
        run_id: &RunId,
        epoch: Option<u64>,
        expected: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        validate(run_id, &events)?;
        check_text(&events)?;
        let (reply, answer) = oneshot::channel();
        let request = Request {
            run_id: run_id.clone(),
            epoch,
            expected,
            events,
            reply,
        };
        let gone = || StoreError::unavailable("appending events: the store's writer task ended");
        self.writer.send(request).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

fn new_pool(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    size: usize,
    options: &PgOptions,
) -> Result<Pool, StoreError> {
    let manager = Manager::from_config(
        config,
        tls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(options.connect_timeout))
        .create_timeout(Some(options.connect_timeout))
        .build()
        .map_err(|e| StoreError::Invalid {
            what: "database pool".into(),
            reason: e.to_string(),
        })
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.feed_task.abort();
    }
}

#[async_trait]
impl EventStore for PgStore {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        self.send(run_id, None, expected_seq, events).await
    }

    async fn read_run(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError> {
        let doing = format!("reading run `{run_id}`");
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] =
            [&run_id.as_str(), &i64::from(from_seq.0)];
        events(&query(&self.pool, &doing, &self.sql.read_run, &params).await?)
    }

    async fn read_from(&self, from: EventId, max_events: u32) -> Result<Vec<Event>, StoreError> {
        read_from(&self.pool, &self.sql, from, max_events).await
    }

    async fn subscribe<'s>(&'s self, after: EventId) -> Result<Subscription<'s>, StoreError> {
        let (visible, live) = self.feed.subscribe(&self.pool, &self.sql).await?;
        Ok(Subscription::pushed(self, after, visible, live))
    }

    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        let rows = query(&self.pool, "listing runs", &self.sql.list_runs, &[]).await?;
        rows.iter()
            .map(|row| {
                let run_id = RunId::from(row.get::<_, &str>(0));
                let last_seq = u32::try_from(row.get::<_, i64>(1)).map_err(|e| {
                    crate::error::corrupted("table runs", 0, format!("run `{run_id}`: {e}"))
                })?;
                Ok(RunSummary {
                    run_id,
                    last_seq: Seq(last_seq),
                    last_event_id: EventId(row.get::<_, i64>(2) as u64),
                })
            })
            .collect()
    }

    async fn last_event_id(&self) -> Result<EventId, StoreError> {
        last_event_id(&self.pool, &self.sql).await
    }
}

#[async_trait]
impl SnapshotStore for PgStore {
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        let doing = "saving a snapshot";
        let mut client = self
            .pool
            .get()
            .await
            .map_err(|e| crate::error::pool(doing, e))?;
        let tx = client.transaction().await.map_err(|e| pg(doing, e))?;
        let watermark = snapshot.watermark.0 as i64;
        tx.execute(&self.sql.save_snapshot, &[&watermark, &snapshot.state])
            .await
            .map_err(|e| pg(doing, e))?;
        tx.execute(&self.sql.trim_snapshots, &[&KEPT_SNAPSHOTS])
            .await
            .map_err(|e| pg(doing, e))?;
        tx.commit().await.map_err(|e| pg(doing, e))
    }

    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        let rows = query(
            &self.pool,
            "loading a snapshot",
            &self.sql.load_snapshot,
            &[],
        )
        .await?;
        Ok(rows.first().map(|row| Snapshot {
            watermark: EventId(row.get::<_, i64>(0) as u64),
            state: row.get(1),
        }))
    }
}

#[async_trait]
impl BlobStore for PgStore {
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
        let blob = BlobRef {
            sha256: sha256_hex(&bytes),
            bytes: bytes.len() as u64,
        };
        let doing = format!("storing blob {}", blob.sha256);
        query(
            &self.pool,
            &doing,
            &self.sql.put_blob,
            &[&blob.sha256, &bytes],
        )
        .await?;
        Ok(blob)
    }

    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
        let doing = format!("reading blob {}", blob.sha256);
        let rows = query(&self.pool, &doing, &self.sql.get_blob, &[&blob.sha256]).await?;
        let bytes: Vec<u8> = rows
            .first()
            .ok_or_else(|| StoreError::NotFound {
                what: format!("blob {}", blob.sha256),
            })?
            .get(0);
        check_blob(blob, &bytes, "table blobs")?;
        Ok(bytes)
    }
}

#[async_trait]
impl ControlStore for PgStore {
    async fn list_controls(&self, prefix: &str) -> Result<Vec<Control>, StoreError> {
        let rows = query(
            &self.pool,
            "listing controls",
            &self.sql.list_controls,
            &[&prefix],
        )
        .await?;
        Ok((rows.iter())
            .map(|row| Control {
                key: row.get(0),
                version: row.get::<_, i64>(1) as u64,
                value: row.get(2),
            })
            .collect())
    }

    async fn put_control(
        &self,
        key: &str,
        expected: u64,
        value: Vec<u8>,
    ) -> Result<u64, StoreError> {
        validate_control(key, &value)?;
        let doing = format!("writing control {key}");
        let rows = if expected == 0 {
            query(
                &self.pool,
                &doing,
                &self.sql.insert_control,
                &[&key, &value],
            )
            .await?
        } else {
            let at = expected as i64;
            query(
                &self.pool,
                &doing,
                &self.sql.update_control,
                &[&key, &at, &value],
            )
            .await?
        };
        if let Some(row) = rows.first() {
            return Ok(row.get::<_, i64>(0) as u64);
        }
        let found = query(&self.pool, &doing, &self.sql.control_version, &[&key]).await?;
        let actual = found.first().map_or(0, |row| row.get::<_, i64>(0) as u64);
        Err(control_conflict(key, expected, actual))
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_left_idle_in_a_transaction_is_ended_and_its_locks_freed() {
        let Some(url) = crate::test_url() else { return };
        let store = PgStore::open_scratch(&url).await.unwrap();
        let mut client = store.pool.get().await.unwrap();
        // What a frozen writer leaves: a run's row locked, a transaction id that holds
        // every reader below it, and no commit.
        let tx = client.transaction().await.unwrap();
        let lock = format!(
            "INSERT INTO \"{}\".runs (run_id) VALUES ('r') \
             ON CONFLICT (run_id) DO UPDATE SET last_seq = 0",
            store.schema()
        );
        tx.execute(&lock, &[]).await.unwrap();
        tokio::time::sleep(IDLE_IN_TRANSACTION_TIMEOUT + Duration::from_millis(500)).await;
        let e = tx.commit().await.unwrap_err();
        assert!(e.is_closed() || e.to_string().contains("idle"), "{e}");
        // Readers are held no more: an append is visible as soon as it is answered.
        let created = apollo11_store::conformance::event(
            None,
            apollo11_core::EventKind::RunCreated {
                workflow: "wf".into(),
            },
            0,
            apollo11_core::Payload::Empty,
        );
        let ids = store
            .append(&"s".into(), Seq(1), vec![created])
            .await
            .unwrap();
        assert_eq!(
            store.read_from(ids[0], 1).await.unwrap()[0].event_id,
            ids[0]
        );
        // The lock is gone: another session takes the row at once.
        let (other, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        other
            .batch_execute(&format!("SET lock_timeout = '1s'; {lock}"))
            .await
            .unwrap();
    }
}
