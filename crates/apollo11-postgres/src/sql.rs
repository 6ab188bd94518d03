//! Every statement the store runs, written once for its schema.

use crate::binds::{numbered, params};
use crate::rows::{EVENT_COLUMNS, UNNEST_EVENTS};
use crate::schema::quote;

params! {
    /// The parameters of [`Sql::write_events`]: the events as columns, then the runs they
    /// move on.
    WriteEvents<'a> {
        /// Each event's run.
        event_run: &'a [String],
        /// Each event's seq.
        event_seq: &'a [i64],
        /// Each event's step, if any.
        step: &'a [Option<String>],
        /// Each event's kind, as JSON.
        kind: &'a [String],
        /// Each event's attempt.
        attempt: &'a [i64],
        /// Each event's time, ms since the Unix epoch.
        at_ms: &'a [i64],
        /// Each event's instance.
        instance: &'a [String],
        /// Each event's inline payload, if any.
        payload: &'a [Option<Vec<u8>>],
        /// Each event's blob hash, if any.
        blob_sha256: &'a [Option<String>],
        /// Each event's blob size, if any.
        blob_bytes: &'a [Option<i64>],
        /// How many events.
        count: i64,
        /// The runs moved on, each once.
        runs: Vec<&'a str>,
        /// Each run's last seq after the batch.
        last_seqs: Vec<i64>,
        /// Each run's last event's position among the events (from 1).
        positions: Vec<i64>,
        /// The change feed's channel.
        channel: &'a str,
        /// Each run's seq before the batch, as the batch was planned.
        was: Vec<i64>,
        /// Each run's epoch, where an append of it is fenced.
        epochs: Vec<Option<i64>>,
    }
}

params! {
    /// The parameters of [`Sql::acquire`].
    Acquire<'a> {
        /// The run.
        run_id: &'a str,
        /// Who takes the lease.
        owner: &'a str,
        /// How long it lasts, in ms.
        ttl_ms: i64,
    }
}

params! {
    /// The parameters of [`Sql::renew`].
    Renew<'a> {
        /// The run.
        run_id: &'a str,
        /// Who holds the lease.
        owner: &'a str,
        /// How long it lasts from now, in ms.
        ttl_ms: i64,
        /// The epoch it is held at.
        epoch: i64,
    }
}

params! {
    /// The parameters of [`Sql::release`] and [`Sql::park`].
    LetGo<'a> {
        /// The run.
        run_id: &'a str,
        /// Who holds the lease.
        owner: &'a str,
        /// The epoch it is held at.
        epoch: i64,
    }
}

params! {
    /// The parameters of [`Sql::heartbeat`].
    Heartbeat<'a> {
        /// The instance.
        owner: &'a str,
        /// How long it stays alive, in ms.
        ttl_ms: i64,
    }
}

params! {
    /// The parameters of [`Sql::claim`].
    Claim<'a> {
        /// The instance claiming.
        owner: &'a str,
        /// Runs claimed at most.
        max: i64,
        /// How long each lease lasts, in ms.
        ttl_ms: i64,
    }
}

/// The statements, with the schema filled in.
#[derive(Debug)]
pub struct Sql {
    /// Creates the rows of runs not seen before and locks every run of a batch, in run id
    /// order (so that two batches never wait on each other in a cycle), without writing a
    /// new version of the rows that exist: `ON CONFLICT DO UPDATE ... WHERE false` locks the
    /// row it finds and leaves it as it is.
    pub lock_runs: String,
    /// The runs of `$1` as they are: `(run_id, last_seq, epoch)`; after [`Sql::lock_runs`],
    /// as they stay until the transaction ends.
    pub run_states: String,
    /// Writes a batch's events in one statement, with [`WriteEvents`]: the `n`th row of
    /// [`UNNEST_EVENTS`] gets id `before + n`, where `before` is the id base plus the
    /// transaction's id shifted by [`ID_SHIFT`] (so ids order by transaction id, see
    /// [`Sql::read_from`]); inserts the rows, moves each run of `$runs` on to its last seq
    /// `$last_seqs` and the id of its last row `$positions` if it is still at seq `$was`,
    /// where `$epochs` is not null at that epoch, and its last event's id is below the
    /// batch's (else the statement fails with [`RUNS_MOVED`] and writes nothing), and tells
    /// the change feeds of every instance on channel `$channel` that events up to the
    /// batch's last id were committed: returns `before` and the transaction's id.
    ///
    /// The last check keeps each run's ids in its seq order: a transaction that took its id
    /// before another, and waited for that other's lock on a run, would otherwise write the
    /// run's next seq under a smaller id.
    pub write_events: String,
    /// A run's events from a seq: by the `(run_id, seq)` index.
    pub read_run: String,
    /// Events from an id, below the ids still unsettled: by the primary key. Every
    /// transaction whose id is below the snapshot's `xmin` has ended, committed or not, so
    /// no event can appear below that bound later; a reader tailing by id never skips one.
    pub read_from: String,
    /// The transaction id below which all have ended, as the statement sees it: a batch's
    /// events are visible to [`Sql::read_from`] once it is above the batch's transaction.
    pub settled: String,
    /// Runs that have events.
    pub list_runs: String,
    /// The last event id visible to [`Sql::read_from`] (0 before the first).
    pub last_event_id: String,
    /// Saves a snapshot and drops all but the newest few.
    pub save_snapshot: String,
    /// Drops snapshots older than the newest `KEPT_SNAPSHOTS`.
    pub trim_snapshots: String,
    /// The newest snapshot.
    pub load_snapshot: String,
    /// Stores a blob once.
    pub put_blob: String,
    /// A blob's bytes.
    pub get_blob: String,
    /// The controls whose key starts with `$1`, in key order.
    pub list_controls: String,
    /// A new control `$1` with value `$2` at version 1; no row if it exists.
    pub insert_control: String,
    /// Control `$1` at version `$2` moved to the next with value `$3`; no row if it is at
    /// another version.
    pub update_control: String,
    /// The version of control `$1`; no row if there is none.
    pub control_version: String,
    /// See `lease.rs`.
    pub acquire: String,
    /// See `lease.rs`.
    pub renew: String,
    /// See `lease.rs`.
    pub release: String,
    /// See `lease.rs`.
    pub lease: String,
    /// See `lease.rs`.
    pub park: String,
    /// See `lease.rs`.
    pub heartbeat: String,
    /// See `lease.rs`.
    pub unclaimed: String,
    /// See `lease.rs`.
    pub claim: String,
    /// The channel each commit of events is announced on, with its last id.
    pub channel: String,
    schema: String,
}

/// How far the writing transaction's id is shifted to make its events' ids: a batch has
/// fewer than `1 << ID_SHIFT` events ([`BATCH_EVENTS_MAX`](crate::BATCH_EVENTS_MAX)); the
/// 49 bits left of a `bigint` last 2^49 transactions of the cluster.
pub const ID_SHIFT: u32 = 14;

/// The current transaction's id (one is assigned if it has none), as a `bigint`.
pub const XACT: &str = "pg_current_xact_id()::text::bigint";

/// The oldest transaction id still running as the statement's snapshot sees it (or the
/// next to be given, when none runs), as a `bigint`.
const SETTLED: &str = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint";

/// A lease's columns as a [`Lease`](apollo11_store::Lease) is built from: epoch, owner,
/// expiry in ms since the Unix epoch.
const LEASE_COLUMNS: &str =
    "epoch, owner, (extract(epoch FROM expires_at) * 1000)::bigint AS expires_at_ms";

/// The runs that need a driver and have none: with events, not parked, lease free or
/// expired.
const UNCLAIMED: &str = "last_seq > 0 AND NOT parked AND (owner IS NULL OR expires_at <= now())";

/// The SQLSTATE of a batch whose runs were not where its writer planned them (see
/// [`Sql::write_events`]): nothing of it was written.
pub const RUNS_MOVED: &str = "A1R01";

/// Snapshots kept besides the newest: a few, in case the newest is being read while replaced.
pub const KEPT_SNAPSHOTS: i64 = 3;

impl Sql {
    /// The statements for `schema`.
    pub fn new(schema: &str) -> Sql {
        let s = quote(schema);
        let ttl = "now() + $ttl_ms::bigint * interval '1 millisecond'";
        // The first id a transaction still running could give: the bound of what is read.
        let visible = format!("(SELECT base + ({SETTLED} << {ID_SHIFT}) FROM {s}.event_id_base)");
        Sql {
            lock_runs: format!(
                "INSERT INTO {s}.runs (run_id) SELECT unnest($1::text[]) ORDER BY 1 \
                 ON CONFLICT (run_id) DO UPDATE SET run_id = excluded.run_id WHERE false"
            ),
            run_states: format!(
                "SELECT run_id, last_seq, epoch FROM {s}.runs WHERE run_id = ANY($1::text[])"
            ),
            write_events: numbered(
                &format!(
                    "WITH ids AS (SELECT base + ({XACT} << {ID_SHIFT}) AS before, \
                       {XACT} AS xact FROM {s}.event_id_base), \
                     inserted AS (INSERT INTO {s}.events ({EVENT_COLUMNS}) \
                       SELECT ids.before + u.n, u.run_id, u.seq, u.step, u.kind, u.attempt, \
                         u.at_ms, u.instance, u.payload, u.blob_sha256, u.blob_bytes \
                       FROM ids, {UNNEST_EVENTS}), \
                     moved AS (UPDATE {s}.runs AS r \
                       SET last_seq = e.seq, last_event_id = ids.before + e.n \
                       FROM ids, unnest($runs::text[], $last_seqs::bigint[], \
                         $positions::bigint[], $was::bigint[], $epochs::bigint[]) \
                         AS e(run_id, seq, n, was, epoch) \
                       WHERE r.run_id = e.run_id AND r.last_seq = e.was \
                         AND (e.epoch IS NULL OR r.epoch = e.epoch) \
                         AND r.last_event_id <= ids.before \
                       RETURNING 1) \
                     SELECT before, xact, pg_notify($channel, (before + $count)::text), \
                       {s}.runs_moved((SELECT count(*) FROM moved), cardinality($runs::text[])) \
                     FROM ids"
                ),
                WriteEvents::NAMES,
            ),
            read_run: format!(
                "SELECT {EVENT_COLUMNS} FROM {s}.events WHERE run_id = $1 AND seq >= $2 ORDER BY seq"
            ),
            read_from: format!(
                "SELECT {EVENT_COLUMNS} FROM {s}.events WHERE event_id >= $1 \
                 AND event_id < {visible} ORDER BY event_id LIMIT $2"
            ),
            settled: format!("SELECT {SETTLED}"),
            list_runs: format!(
                "SELECT run_id, last_seq, last_event_id FROM {s}.runs WHERE last_seq > 0 ORDER BY run_id"
            ),
            last_event_id: format!(
                "SELECT coalesce(max(event_id), 0) FROM {s}.events WHERE event_id < {visible}"
            ),
            save_snapshot: format!("INSERT INTO {s}.snapshots (watermark, state) VALUES ($1, $2)"),
            trim_snapshots: format!(
                "DELETE FROM {s}.snapshots WHERE id < (SELECT max(id) FROM {s}.snapshots) - $1"
            ),
            load_snapshot: format!(
                "SELECT watermark, state FROM {s}.snapshots ORDER BY id DESC LIMIT 1"
            ),
            put_blob: format!(
                "INSERT INTO {s}.blobs (sha256, bytes) VALUES ($1, $2) ON CONFLICT DO NOTHING"
            ),
            get_blob: format!("SELECT bytes FROM {s}.blobs WHERE sha256 = $1"),
            list_controls: format!(
                "SELECT key, version, value FROM {s}.controls WHERE starts_with(key, $1) ORDER BY key"
            ),
            insert_control: format!(
                "INSERT INTO {s}.controls (key, version, value) VALUES ($1, 1, $2) \
                 ON CONFLICT DO NOTHING RETURNING version"
            ),
            update_control: format!(
                "UPDATE {s}.controls SET version = version + 1, value = $3 \
                 WHERE key = $1 AND version = $2 RETURNING version"
            ),
            control_version: format!("SELECT version FROM {s}.controls WHERE key = $1"),
            // Free, expired or already the caller's: taken, the epoch raised unless it was
            // the caller's. Held by another: no row.
            acquire: numbered(
                &format!(
                    "INSERT INTO {s}.runs AS r (run_id, epoch, owner, expires_at) \
                     VALUES ($run_id, 1, $owner, {ttl}) \
                     ON CONFLICT (run_id) DO UPDATE SET \
                       epoch = CASE WHEN r.owner = excluded.owner THEN r.epoch ELSE r.epoch + 1 END, \
                       owner = excluded.owner, expires_at = excluded.expires_at, parked = false \
                     WHERE r.owner IS NULL OR r.owner = excluded.owner OR r.expires_at <= now() \
                     RETURNING {LEASE_COLUMNS}"
                ),
                Acquire::NAMES,
            ),
            renew: numbered(
                &format!(
                    "UPDATE {s}.runs SET expires_at = {ttl} \
                     WHERE run_id = $run_id AND owner = $owner AND epoch = $epoch \
                     RETURNING {LEASE_COLUMNS}"
                ),
                Renew::NAMES,
            ),
            release: numbered(
                &format!(
                    "UPDATE {s}.runs SET owner = NULL, expires_at = NULL \
                     WHERE run_id = $run_id AND (owner = $owner OR owner IS NULL) \
                       AND epoch = $epoch RETURNING epoch"
                ),
                LetGo::NAMES,
            ),
            park: numbered(
                &format!(
                    "UPDATE {s}.runs SET owner = NULL, expires_at = NULL, parked = true \
                     WHERE run_id = $run_id AND (owner = $owner OR owner IS NULL) \
                       AND epoch = $epoch RETURNING epoch"
                ),
                LetGo::NAMES,
            ),
            // Stays alive; returns the instances alive.
            heartbeat: numbered(
                &format!(
                    "WITH beat AS (INSERT INTO {s}.instances AS i (owner, expires_at) \
                       VALUES ($owner, {ttl}) \
                       ON CONFLICT (owner) DO UPDATE SET expires_at = excluded.expires_at) \
                     SELECT 1 + count(*) FROM {s}.instances \
                     WHERE expires_at > now() AND owner <> $owner"
                ),
                Heartbeat::NAMES,
            ),
            unclaimed: format!("SELECT count(*) FROM {s}.runs WHERE {UNCLAIMED}"),
            // Rows locked by another claim or by a batch appending to them are skipped, not
            // waited for.
            claim: numbered(
                &format!(
                    "WITH picked AS (SELECT run_id FROM {s}.runs WHERE {UNCLAIMED} \
                       ORDER BY run_id LIMIT $max FOR UPDATE SKIP LOCKED) \
                     UPDATE {s}.runs AS r SET epoch = r.epoch + 1, owner = $owner, \
                       expires_at = {ttl}, parked = false \
                     FROM picked WHERE r.run_id = picked.run_id \
                     RETURNING r.run_id, {LEASE_COLUMNS}"
                ),
                Claim::NAMES,
            ),
            lease: format!(
                "SELECT {LEASE_COLUMNS} FROM {s}.runs WHERE run_id = $1 AND owner IS NOT NULL"
            ),
            channel: format!("apollo11_{schema}_events"),
            schema: schema.to_owned(),
        }
    }

    /// The schema.
    pub fn schema(&self) -> &str {
        &self.schema
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binds::check;

    #[test]
    fn each_statement_numbers_each_of_its_parameters_once_in_the_structs_order() {
        let sql = Sql::new("apollo11");
        let named = [
            (&sql.write_events, WriteEvents::NAMES),
            (&sql.acquire, Acquire::NAMES),
            (&sql.renew, Renew::NAMES),
            (&sql.release, LetGo::NAMES),
            (&sql.park, LetGo::NAMES),
            (&sql.heartbeat, Heartbeat::NAMES),
            (&sql.claim, Claim::NAMES),
        ];
        for (statement, names) in named {
            assert_eq!(check(statement, names), Ok(()), "{statement}");
        }
        assert!(sql.renew.contains("epoch = $4"), "{}", sql.renew);
        assert_eq!(WriteEvents::NAMES.len(), 17);
        assert_eq!(WriteEvents::NAMES[10..12], ["count", "runs"]);
        assert!(
            sql.write_events.contains("(before + $11)"),
            "{}",
            sql.write_events
        );
        let mut more = WriteEvents::NAMES.to_vec();
        more.push("unbound");
        assert!(check(&sql.write_events, &more).is_err());
    }
}
