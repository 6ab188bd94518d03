//! What PostgreSQL does without the store, as ceilings for `pg_append` and `pg_scheduler`:
//! COPY of the events an append writes into a table like `events` (bulk load: events/s),
//! and a loop of one-row INSERTs each committed on its own (one commit a step: commits/s).
//! Each in a scratch schema dropped afterwards, on one connection.

use crate::append::event;
use anyhow::{Context, Result};
use apollo11_postgres::PgStore;
use std::pin::pin;
use std::time::{Duration, Instant};
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Client;

/// Rows per COPY: the most events the store's writer puts in one transaction.
const COPY_ROWS: usize = apollo11_postgres::BATCH_EVENTS_MAX;

/// Runs the rows of a COPY are spread over, as appenders' runs are.
const COPY_RUNS: usize = 256;

/// A connection of its own to `url`, and a scratch store whose schema holds the tables.
async fn scratch(url: &str) -> Result<(Client, PgStore)> {
    let schema = PgStore::open_scratch(url).await?;
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connecting for a baseline")?;
    tokio::spawn(connection);
    Ok((client, schema))
}

/// Events per second COPYed (binary) into a table made like the store's `events`, in
/// COPYs of [`COPY_ROWS`] rows each committed, for `seconds`.
pub async fn copy_events_per_s(url: &str, seconds: u64) -> Result<f64> {
    let (client, schema) = scratch(url).await?;
    let table = format!("\"{}\".copied", schema.schema());
    client
        .batch_execute(&format!(
            "CREATE TABLE {table} (LIKE \"{}\".events INCLUDING ALL)",
            schema.schema()
        ))
        .await?;
    let statement = format!(
        "COPY {table} (event_id, run_id, seq, step, kind, attempt, at_ms, instance, payload) \
         FROM STDIN BINARY"
    );
    let types = [
        Type::INT8,
        Type::TEXT,
        Type::INT8,
        Type::TEXT,
        Type::TEXT,
        Type::INT8,
        Type::INT8,
        Type::TEXT,
        Type::BYTEA,
    ];
    let (started, mut copied) = (Instant::now(), 0u64);
    while started.elapsed() < Duration::from_secs(seconds) {
        let sink = client.copy_in(&statement).await?;
        let mut writer = pin!(BinaryCopyInWriter::new(sink, &types));
        for _ in 0..COPY_ROWS {
            copied += 1;
            let e = event(copied);
            let kind = serde_json::to_string(&e.kind)?;
            let run = format!("run-{}", copied as usize % COPY_RUNS);
            let seq = (copied / COPY_RUNS as u64 + 1) as i64;
            let payload = e.payload.inline_bytes().map(<[u8]>::to_vec);
            let row: [&(dyn ToSql + Sync); 9] = [
                &(copied as i64),
                &run,
                &seq,
                &e.step.map(|s| s.0),
                &kind,
                &i64::from(e.attempt),
                &(e.at_ms as i64),
                &e.instance,
                &payload,
            ];
            writer.as_mut().write(&row).await?;
        }
        writer.finish().await?;
    }
    Ok(copied as f64 / started.elapsed().as_secs_f64())
}

/// Commits per second of a loop of one-row INSERTs, each its own transaction, for
/// `seconds`: what a chain costs at one commit a step.
pub async fn insert_commits_per_s(url: &str, seconds: u64) -> Result<f64> {
    let (client, schema) = scratch(url).await?;
    let table = format!("\"{}\".committed", schema.schema());
    client
        .batch_execute(&format!(
            "CREATE TABLE {table} (id bigint PRIMARY KEY, payload bytea)"
        ))
        .await?;
    let insert = client
        .prepare(&format!(
            "INSERT INTO {table} (id, payload) VALUES ($1, $2)"
        ))
        .await?;
    let payload = vec![b'p'; 200];
    let (started, mut commits) = (Instant::now(), 0i64);
    while started.elapsed() < Duration::from_secs(seconds) {
        commits += 1;
        client.execute(&insert, &[&commits, &payload]).await?;
    }
    Ok(commits as f64 / started.elapsed().as_secs_f64())
}
