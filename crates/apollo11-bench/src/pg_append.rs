//! Durable append on PostgreSQL: 1, 16 and 256 concurrent appenders of 200-byte events
//! through `PgStore` (grouped by its writer task), against three baselines in the same run:
//! one plain `INSERT` per transaction (each appender commits its own event on a pooled
//! connection, the way an application without batching writes), COPY of the same rows into
//! a table like `events` (`pg_baselines`: the bulk-load ceiling), and the file log. The
//! database is `APOLLO11_BENCH_PG_URL` (else `APOLLO11_TEST_PG_URL`); each measure runs in
//! a scratch schema dropped afterwards.

use crate::append::{drive, event, log_appender, Append};
use crate::catalog::Scenario;
use crate::pg_baselines::copy_events_per_s;
use crate::report::{quantile_us, Report};
use crate::Setup;
use anyhow::{Context, Result};
use apollo11_core::{RunId, Seq};
use apollo11_log::Options;
use apollo11_postgres::{PgOptions, PgStore};
use apollo11_store::EventStore;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use serde_json::json;
use std::sync::Arc;

/// The variables naming the database, in the order they are looked at.
const URL_VARS: [&str; 2] = ["APOLLO11_BENCH_PG_URL", "APOLLO11_TEST_PG_URL"];

/// Connections the baseline may use at once (the store's writer uses one per batch).
const BASELINE_CONNECTIONS: usize = 32;

/// The benchmark database's url, from the first of [`URL_VARS`] set.
pub fn database_url() -> Option<String> {
    URL_VARS.iter().find_map(|v| std::env::var(v).ok())
}

/// The note of a scenario skipped for want of a database.
pub fn no_database() -> String {
    format!("skipped: no database ({} unset)", URL_VARS.join(", "))
}

pub async fn run(setup: &Setup) -> Result<Report> {
    let seconds = if setup.quick { 1 } else { 5 };
    let mut report = Report::new(Scenario::PgAppend);
    let Some(url) = database_url() else {
        report.note(no_database());
        return Ok(report);
    };
    report.header();
    let copy = copy_events_per_s(&url, seconds).await?;
    for appenders in [1u64, 16, 256] {
        // The scratch store holds the schema; the one measured has the default options.
        let scratch = PgStore::open_scratch(&url).await?;
        let options = PgOptions {
            schema: scratch.schema().to_owned(),
            ..PgOptions::new(&url)
        };
        let store = Arc::new(PgStore::open(options).await?);
        let (rate, latencies) = drive(appenders, seconds, store_appender(store)).await?;
        drop(scratch);
        let (baseline, base_latencies) = {
            let table = BaselineTable::create(&url).await?;
            drive(appenders, seconds, table.appender()).await?
        };
        let dir = setup.dir.join(format!("pg-append-log-{appenders}"));
        let (log, _) = log_appender(&dir, Options::default())?;
        let (file_log, _) = drive(appenders, seconds, log).await?;
        std::fs::remove_dir_all(&dir)?;
        report.row(
            &appenders.to_string(),
            vec![
                json!(appenders),
                json!(rate),
                json!(quantile_us(&latencies, 0.5)),
                json!(quantile_us(&latencies, 0.99)),
                json!(baseline),
                json!(quantile_us(&base_latencies, 0.99)),
                json!(rate / baseline),
                json!(copy),
                json!(rate / copy),
                json!(file_log),
                json!(rate / file_log),
            ],
        );
    }
    Ok(report)
}

fn store_appender(store: Arc<PgStore>) -> Append {
    Arc::new(move |run, seq| {
        let store = store.clone();
        Box::pin(async move {
            store
                .append(&RunId(run), Seq(seq), vec![event(u64::from(seq))])
                .await?;
            Ok(())
        })
    })
}

/// The baseline's table: a run's events keyed by `(run_id, seq)`, in a scratch schema of
/// its own, dropped with it.
struct BaselineTable {
    pool: Pool,
    insert: Arc<String>,
    _schema: PgStore,
}

impl BaselineTable {
    async fn create(url: &str) -> Result<BaselineTable> {
        // A scratch store only for its schema, which it drops at the end.
        let schema = PgStore::open_scratch(url).await?;
        let table = format!("\"{}\".baseline", schema.schema());
        let config: tokio_postgres::Config = url.parse().context("the database url")?;
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(BASELINE_CONNECTIONS)
            .build()?;
        let client = pool.get().await?;
        client
            .batch_execute(&format!(
                "CREATE TABLE {table} (run_id text, seq bigint, step text, instance text, \
                 at_ms bigint, payload bytea, PRIMARY KEY (run_id, seq))"
            ))
            .await?;
        let insert = format!(
            "INSERT INTO {table} (run_id, seq, step, instance, at_ms, payload) \
             VALUES ($1, $2, $3, $4, $5, $6)"
        );
        Ok(BaselineTable {
            pool,
            insert: Arc::new(insert),
            _schema: schema,
        })
    }

    /// Appends one event per transaction: one INSERT, committed on its own.
    fn appender(&self) -> Append {
        let (pool, insert) = (self.pool.clone(), self.insert.clone());
        Arc::new(move |run, seq| {
            let (pool, insert) = (pool.clone(), insert.clone());
            Box::pin(async move {
                let e = event(u64::from(seq));
                let client = pool.get().await?;
                let stmt = client.prepare_cached(&insert).await?;
                let step = e.step.map(|s| s.0);
                let payload = e.payload.inline_bytes().map(<[u8]>::to_vec);
                let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
                    &run,
                    &i64::from(seq),
                    &step,
                    &e.instance,
                    &(e.at_ms as i64),
                    &payload,
                ];
                client.execute(&stmt, &params).await?;
                Ok(())
            })
        })
    }
}
