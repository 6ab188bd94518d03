//! Reads: each one statement on a pooled connection, prepared once per connection.

use crate::error::{pg, pool};
use crate::rows::event_from_row;
use crate::sql::Sql;
use apollo11_core::{Event, EventId};
use apollo11_store::StoreError;
use deadpool_postgres::Pool;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

/// The rows `statement` returns, read while `doing`.
pub async fn query(
    pool: &Pool,
    doing: &str,
    statement: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, StoreError> {
    let client = pool.get().await.map_err(|e| self::pool(doing, e))?;
    let stmt = client
        .prepare_cached(statement)
        .await
        .map_err(|e| pg(doing, e))?;
    client.query(&stmt, params).await.map_err(|e| pg(doing, e))
}

/// The events of rows of `EVENT_COLUMNS`.
pub fn events(rows: &[Row]) -> Result<Vec<Event>, StoreError> {
    rows.iter().map(event_from_row).collect()
}

/// At most `max` events with id ≥ `from`, in id order.
pub async fn read_from(
    pool: &Pool,
    sql: &Sql,
    from: EventId,
    max: u32,
) -> Result<Vec<Event>, StoreError> {
    let from = i64::try_from(from.0).unwrap_or(i64::MAX);
    let rows = query(
        pool,
        "reading events",
        &sql.read_from,
        &[&from, &i64::from(max)],
    )
    .await?;
    events(&rows)
}

/// The last event id given (0 before the first).
pub async fn last_event_id(pool: &Pool, sql: &Sql) -> Result<EventId, StoreError> {
    let rows = query(pool, "reading the last event id", &sql.last_event_id, &[]).await?;
    Ok(EventId(
        rows.first().map_or(0, |r| r.get::<_, i64>(0)) as u64
    ))
}
