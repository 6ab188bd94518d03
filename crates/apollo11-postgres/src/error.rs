//! PostgreSQL's errors as [`StoreError`]s: what cannot reach the database is `Unavailable`,
//! what the database refused is `Backend`, retryable when the transaction simply did not
//! happen (a serialization failure, a deadlock). Every message says what was being done;
//! the database's SQLSTATE, when it gave one, stays in the error as data
//! ([`StoreError::sqlstate`]).

use apollo11_store::StoreError;
use tokio_postgres::error::SqlState;

/// The SQLSTATEs after which the same call may succeed: the server going away or refusing
/// connections for now.
const UNAVAILABLE: &[SqlState] = &[
    SqlState::ADMIN_SHUTDOWN,
    SqlState::CRASH_SHUTDOWN,
    SqlState::CANNOT_CONNECT_NOW,
    SqlState::TOO_MANY_CONNECTIONS,
    SqlState::QUERY_CANCELED,
];

/// The SQLSTATEs of a transaction that lost a race inside the database and did not happen.
const RETRYABLE: &[SqlState] = &[
    SqlState::T_R_SERIALIZATION_FAILURE,
    SqlState::T_R_DEADLOCK_DETECTED,
];

/// `e`, raised while `doing`, as a store error.
pub fn pg(doing: &str, e: tokio_postgres::Error) -> StoreError {
    let Some(db) = e.as_db_error() else {
        return client_side(doing, e);
    };
    let code = db.code();
    let message = format!("{doing}: {} {}", code.code(), db.message());
    let sqlstate = Some(code.code().to_owned());
    // Class 08: connection exceptions.
    if UNAVAILABLE.contains(code) || code.code().starts_with("08") {
        return StoreError::Unavailable { message, sqlstate };
    }
    StoreError::Backend {
        message,
        retryable: RETRYABLE.contains(code),
        sqlstate,
    }
}

/// An error raised without the server's word: the connection failed, closed or timed out
/// (retry), or this client could not make the request or refused the server's TLS (its
/// certificate, no TLS at all): no retry cures those.
fn client_side(doing: &str, e: tokio_postgres::Error) -> StoreError {
    let io = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(|io| {
            !io.get_ref()
                .is_some_and(|inner| inner.is::<rustls::Error>())
        });
    // tokio-postgres's own text names only the kind (a TLS handshake): the cause follows.
    let message = match std::error::Error::source(&e) {
        Some(cause) => format!("{doing}: {e}: {cause}"),
        None => format!("{doing}: {e}"),
    };
    if e.is_closed() || io {
        StoreError::unavailable(message)
    } else {
        StoreError::Backend {
            message,
            retryable: false,
            sqlstate: None,
        }
    }
}

/// A pool that gave no connection, raised while `doing`.
pub fn pool(doing: &str, e: deadpool_postgres::PoolError) -> StoreError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => pg(doing, e),
        other => StoreError::unavailable(format!("{doing}: no database connection: {other}")),
    }
}

/// Stored data that does not read back as what was written.
pub fn corrupted(table: &str, row: i64, reason: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupted {
        file: table.to_owned(),
        offset: u64::try_from(row).unwrap_or_default(),
        reason: reason.to_string(),
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::PgStore;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_unique_violation_and_a_serialization_failure_keep_their_sqlstate() {
        let Some(url) = crate::test_url() else { return };
        let store = PgStore::open_scratch(&url).await.unwrap();
        let table = format!("\"{}\".pairs", store.schema());
        let (a, b) = (
            store.pool.get().await.unwrap(),
            store.pool.get().await.unwrap(),
        );
        a.batch_execute(&format!(
            "CREATE TABLE {table} (k int PRIMARY KEY, v int); INSERT INTO {table} VALUES (1, 0)"
        ))
        .await
        .unwrap();
        let twice = a
            .execute(&format!("INSERT INTO {table} VALUES (1, 1)"), &[])
            .await
            .unwrap_err();
        let e = pg("inserting a pair", twice);
        assert_eq!(e.sqlstate(), Some("23505"), "{e:?}");
        assert!(!e.is_retryable(), "{e:?}");
        // `a` reads in a snapshot; `b` changes the row after it; `a`'s update of it cannot
        // be serialized.
        let update = format!("UPDATE {table} SET v = v + 1 WHERE k = 1");
        a.batch_execute(&format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT v FROM {table}"
        ))
        .await
        .unwrap();
        b.batch_execute(&update).await.unwrap();
        let lost = a.batch_execute(&update).await.unwrap_err();
        a.batch_execute("ROLLBACK").await.unwrap();
        let e = pg("updating a pair", lost);
        assert_eq!(e.sqlstate(), Some("40001"), "{e:?}");
        assert!(e.is_retryable(), "{e:?}");
        assert!(e.to_string().contains("updating a pair: 40001"), "{e}");
    }
}
