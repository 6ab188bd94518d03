//! The tables, created and migrated by the store itself: `schema_version` records each
//! migration applied; opening applies the missing ones in one transaction under an advisory
//! lock, so any number of instances may open a new or old database at once.

use crate::error::pg;
use crate::sql::{ID_SHIFT, XACT};
use apollo11_store::StoreError;
use tokio_postgres::Client;

/// The migrations, in order; `{s}` stands for the quoted schema. Never edit one that has
/// shipped: add the next.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE {s}.event_ids (last bigint NOT NULL);
INSERT INTO {s}.event_ids VALUES (0);
CREATE TABLE {s}.runs (
    run_id text COLLATE "C" PRIMARY KEY,
    last_seq bigint NOT NULL DEFAULT 0,
    last_event_id bigint NOT NULL DEFAULT 0,
    epoch bigint NOT NULL DEFAULT 0,
    owner text,
    expires_at timestamptz
);
CREATE TABLE {s}.events (
    event_id bigint PRIMARY KEY,
    run_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    step text,
    kind text NOT NULL,
    attempt bigint NOT NULL,
    at_ms bigint NOT NULL,
    instance text NOT NULL,
    payload bytea,
    blob_sha256 text,
    blob_bytes bigint,
    UNIQUE (run_id, seq)
);
CREATE TABLE {s}.snapshots (
    id bigserial PRIMARY KEY,
    watermark bigint NOT NULL,
    state bytea NOT NULL
);
CREATE TABLE {s}.blobs (
    sha256 text PRIMARY KEY,
    bytes bytea NOT NULL
);
"#,
    r#"
ALTER TABLE {s}.runs ADD COLUMN parked boolean NOT NULL DEFAULT false;
CREATE TABLE {s}.instances (
    owner text COLLATE "C" PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
"#,
    // A batch written without locking its runs first checks, in the same statement, that
    // each is where its writer last left it; when one is not, this ends the statement with
    // SQLSTATE A1R01 (`sql::RUNS_MOVED`) and nothing of the batch is written.
    r#"
CREATE OR REPLACE FUNCTION {s}.runs_moved(moved bigint, planned bigint) RETURNS bigint
LANGUAGE plpgsql AS $f$
BEGIN
    IF moved <> planned THEN
        RAISE EXCEPTION '% of the batch''s % runs were not where its writer planned them',
            planned - moved, planned USING ERRCODE = 'A1R01';
    END IF;
    RETURN moved;
END
$f$;
"#,
    // Controls: small versioned records operators change (a schedule paused).
    r#"
CREATE TABLE {s}.controls (
    key text COLLATE "C" PRIMARY KEY,
    version bigint NOT NULL,
    value bytea NOT NULL
);
"#,
    // Event ids made of the writing transaction's id (`sql::ID_SHIFT`, 14 here): the
    // counter goes, and `base` puts every new id above every id it gave.
    r#"
CREATE TABLE {s}.event_id_base (base bigint NOT NULL);
INSERT INTO {s}.event_id_base
    SELECT greatest(0, greatest(last, (SELECT coalesce(max(event_id), 0) FROM {s}.events)) + 1
        - (pg_current_xact_id()::text::bigint << 14))
    FROM {s}.event_ids;
DROP TABLE {s}.event_ids;
"#,
];

/// The version this build writes: the number of migrations.
pub const VERSION: i32 = MIGRATIONS.len() as i32;

/// Brings `schema` to [`VERSION`], creating it if needed.
pub async fn migrate(client: &mut Client, schema: &str) -> Result<(), StoreError> {
    let doing = format!("migrating schema {schema}");
    let tx = client.transaction().await.map_err(|e| pg(&doing, e))?;
    let quoted = quote(schema);
    let lock = "SELECT pg_advisory_xact_lock(hashtext('apollo11 migrate ' || $1))";
    tx.execute(lock, &[&schema])
        .await
        .map_err(|e| pg(&doing, e))?;
    let create = format!(
        "CREATE SCHEMA IF NOT EXISTS {quoted};
         CREATE TABLE IF NOT EXISTS {quoted}.schema_version (
             version integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         );"
    );
    tx.batch_execute(&create).await.map_err(|e| pg(&doing, e))?;
    let current: i32 = tx
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM {quoted}.schema_version"),
            &[],
        )
        .await
        .map_err(|e| pg(&doing, e))?
        .get(0);
    if current > VERSION {
        return Err(StoreError::Invalid {
            what: format!("database schema {schema}"),
            reason: format!(
                "it is at version {current}; this build knows versions up to {VERSION}"
            ),
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let version = i as i32 + 1;
        let doing = format!("{doing} to version {version}");
        tx.batch_execute(&sql.replace("{s}", &quoted))
            .await
            .map_err(|e| pg(&doing, e))?;
        let record = format!("INSERT INTO {quoted}.schema_version (version) VALUES ($1)");
        tx.execute(&record, &[&version])
            .await
            .map_err(|e| pg(&doing, e))?;
    }
    tx.batch_execute(&raise_base(&quoted))
        .await
        .map_err(|e| pg(&format!("{doing}: checking the event id base"), e))?;
    tx.commit().await.map_err(|e| pg(&doing, e))
}

/// Raises the base of event ids when an event visible has an id no transaction begun yet
/// could have given: the transaction ids went back (the database restored into another
/// cluster). New ids then start above the highest one. Otherwise it changes nothing, so it
/// never moves the ids of other instances' transactions in flight.
fn raise_base(s: &str) -> String {
    format!(
        "UPDATE {s}.event_id_base SET base = m.top + 1 - ({XACT} << {ID_SHIFT}) \
         FROM (SELECT max(event_id) AS top FROM {s}.events) AS m \
         WHERE m.top >= base + (pg_snapshot_xmax(pg_current_snapshot())::text::bigint << {ID_SHIFT})"
    )
}

/// `schema` (checked by [`check_schema`]) as an SQL identifier.
pub fn quote(schema: &str) -> String {
    format!("\"{schema}\"")
}

/// Checks a schema name: 1 to 40 bytes of lower-case ASCII letters, digits and `_`, not
/// starting with a digit or `pg_` (it also names the change feed's channel).
pub fn check_schema(schema: &str) -> Result<(), StoreError> {
    let fine = (1..=40).contains(&schema.len())
        && schema
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && !schema.starts_with("pg_");
    if fine {
        return Ok(());
    }
    Err(StoreError::Invalid {
        what: "database schema name".into(),
        reason: format!(
            "{schema:?}: 1 to 40 lower-case letters, digits and _, not starting with a digit or pg_"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        for good in ["apollo11", "a", "t_0123abcd", &"x".repeat(40)] {
            check_schema(good).unwrap();
        }
        for bad in [
            "",
            "Apollo",
            "1abc",
            "pg_x",
            "a-b",
            "a\"b",
            "a b",
            &"x".repeat(41),
        ] {
            let e = check_schema(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("invalid database schema name"),
                "{bad:?}: {e}"
            );
        }
        assert_eq!(quote("a"), "\"a\"");
    }
}
