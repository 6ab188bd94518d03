//! One batch's transaction: every append's fence and seq checked ([`plan`]), then one
//! statement (ids from the transaction's id, one multi-row insert, the runs moved on, the
//! change feed notified), and the answer held until the batch is visible to readers. When
//! the writer knows where each run of the batch is (it wrote or read them last), it checks
//! against that and sends the statement alone, its own transaction, which verifies each run
//! is still there: one round trip. Else, or when that finds a run moved, it locks the runs
//! in run id order and reads them first (creating the rows of new ones), then writes and
//! commits: two.

use crate::error::{pg, pool};
use crate::plan::{plan, Ask, RunState};
use crate::rows::EventColumns;
use crate::sql::{Sql, WriteEvents, RUNS_MOVED};
use crate::writer::{Answer, Append};
use apollo11_core::{EventId, RunId, Seq};
use apollo11_store::StoreError;
use deadpool_postgres::{Object, Pool};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement};

const DOING: &str = "appending events";

/// Times a batch is tried again when a run it read under lock had meanwhile been written by
/// a transaction with a larger id (see [`Sql::write_events`]): each try takes a new one.
const LOCKED_TRIES: usize = 3;

/// The longest pause between two checks of whether a committed batch is visible yet.
const SETTLE_PAUSE_MAX: Duration = Duration::from_millis(20);

/// How long a committed batch waits to be visible before the writer says what holds it.
const SETTLE_WARN_AFTER: Duration = Duration::from_secs(1);

/// The answers, and the runs as the transaction left them.
pub type Written = (Vec<Answer>, HashMap<RunId, RunState>);

/// Why a batch planned against the runs as the writer last saw them was not written.
enum Unwritten {
    /// A run was not where the writer last saw it, or an append would have been refused
    /// (only a read of the runs tells whether that is still so): nothing was written.
    Moved,
    /// The transaction failed.
    Failed(StoreError),
}

impl From<StoreError> for Unwritten {
    fn from(e: StoreError) -> Unwritten {
        Unwritten::Failed(e)
    }
}

/// Writes `appends` in one transaction, planned against `known` (every run of the batch as
/// the writer last saw it) when given: the answer of each and the runs as it left them, or
/// the error that stopped the transaction (then nothing of it was written, or, if the
/// commit's answer was lost, all).
pub async fn write(
    pool: &Pool,
    sql: &Sql,
    known: Option<HashMap<RunId, RunState>>,
    appends: &[Append],
) -> Result<Written, StoreError> {
    let planned = match known {
        Some(runs) => planned(pool, sql, appends, runs).await,
        None => Err(Unwritten::Moved),
    };
    match planned {
        Ok(written) => Ok(written),
        Err(Unwritten::Moved) => locked(pool, sql, appends).await,
        Err(Unwritten::Failed(e)) => Err(e),
    }
}

/// Writes `appends` planned against `runs` as the writer last saw them, in one round trip:
/// the write as a transaction of its own, and the first check that the batch is visible.
/// The runs are not locked first (that cost a lone appender a sixth of its time, and a
/// fifth at 256): the write locks them as it moves them on, named in the runs' order but
/// locked in the order the server's plan takes them, so a batch of another instance
/// locking two of its runs the other way round may deadlock with it. The
/// server then ends one of the two (after its `deadlock_timeout`, 1 s by default) and that
/// batch goes the way of the locked, ordered write: nothing of it was written.
async fn planned(
    pool: &Pool,
    sql: &Sql,
    appends: &[Append],
    runs: HashMap<RunId, RunState>,
) -> Result<Written, Unwritten> {
    let mut after = runs.clone();
    let verdicts = plan(&asks(appends), &mut after);
    if verdicts.iter().any(Result::is_err) {
        return Err(Unwritten::Moved);
    }
    let batch = Batch::new(appends, verdicts, &runs);
    let client = pool.get().await.map_err(|e| self::pool(DOING, e))?;
    let mut tx = Open(Some(client));
    let (write, settled) = (
        tx.prepare(&sql.write_events).await?,
        tx.prepare(&sql.settled).await?,
    );
    let client = tx.client();
    let params = batch.params(&sql.channel);
    let params = params.binds();
    let (write, settled) = tokio::join!(
        client.query_one(&write, &params),
        client.query_one(&settled, &[]),
    );
    match write {
        Ok(row) => {
            settle(&tx, sql, &row, settled).await;
            tx.0 = None;
            Ok((batch.answers(row.get(0)), after))
        }
        // The statement's transaction rolled back: the connection is idle, as it was.
        Err(e) if is_runs_moved(&e) => {
            tx.0 = None;
            Err(Unwritten::Moved)
        }
        Err(e) => Err(Unwritten::Failed(pg(DOING, e))),
    }
}

/// Whether `e` ended a write that wrote nothing and is worth planning again from the runs
/// read under lock: a run not where the batch was planned, or a deadlock with another
/// batch.
fn is_runs_moved(e: &tokio_postgres::Error) -> bool {
    let code = e.code().map(SqlState::code);
    code == Some(RUNS_MOVED)
        || code == Some(SqlState::UNIQUE_VIOLATION.code())
        || code == Some(SqlState::T_R_DEADLOCK_DETECTED.code())
}

/// Writes `appends` in one transaction of two round trips, each append checked against its
/// run as read under lock; tried again while a run turns out written meanwhile by a
/// transaction with a larger id (rare: another instance appending to the same run).
async fn locked(pool: &Pool, sql: &Sql, appends: &[Append]) -> Result<Written, StoreError> {
    let mut tries = 1;
    loop {
        match locked_once(pool, sql, appends).await {
            Err(Unwritten::Moved) if tries < LOCKED_TRIES => tries += 1,
            Err(Unwritten::Moved) => {
                return Err(StoreError::Backend {
                    message: format!(
                        "{DOING}: {LOCKED_TRIES} tries in a row found a run of the batch \
                         written meanwhile by a later transaction"
                    ),
                    retryable: true,
                    sqlstate: Some(RUNS_MOVED.to_owned()),
                })
            }
            Err(Unwritten::Failed(e)) => return Err(e),
            Ok(written) => return Ok(written),
        }
    }
}

/// One try of [`locked`]: `BEGIN` pipelined with the lock of the runs and their read; the
/// write pipelined with `COMMIT`.
async fn locked_once(pool: &Pool, sql: &Sql, appends: &[Append]) -> Result<Written, Unwritten> {
    let client = pool.get().await.map_err(|e| self::pool(DOING, e))?;
    let mut tx = Open(Some(client));
    let runs = lock_runs(&tx, sql, appends).await?;
    let mut after = runs.clone();
    let verdicts = plan(&asks(appends), &mut after);
    let batch = Batch::new(appends, verdicts, &runs);
    if batch.columns.is_empty() {
        // Nothing to write; the rows of new runs that lock_runs made go too.
        tx.end("ROLLBACK").await?;
        return Ok((batch.answers(0), after));
    }
    let (write, settled) = (
        tx.prepare(&sql.write_events).await?,
        tx.prepare(&sql.settled).await?,
    );
    let client = tx.client();
    let params = batch.params(&sql.channel);
    let params = params.binds();
    let (write, commit, settled) = tokio::join!(
        client.query_one(&write, &params),
        client.batch_execute("COMMIT"),
        client.query_one(&settled, &[]),
    );
    match (write, commit) {
        (Ok(row), Ok(())) => {
            settle(&tx, sql, &row, settled).await;
            tx.0 = None;
            Ok((batch.answers(row.get(0)), after))
        }
        (Err(e), Ok(())) if is_runs_moved(&e) => {
            tx.0 = None;
            Err(Unwritten::Moved)
        }
        (Err(e), _) | (Ok(_), Err(e)) => Err(Unwritten::Failed(pg(DOING, e))),
    }
}

/// Waits until the batch committed by `tx` (`written`: its write's row) is visible to
/// readers, every transaction of the cluster older than it ended: `settled` is the first
/// check, sent with the `COMMIT`. The batch is durable already: if the check cannot be
/// made, it is answered anyway (readers see it once the older transactions end).
async fn settle(
    tx: &Open,
    sql: &Sql,
    written: &Row,
    mut settled: Result<Row, tokio_postgres::Error>,
) {
    let xact: i64 = written.get(1);
    let (mut pause, started, mut warned) = (Duration::from_millis(1), Instant::now(), false);
    loop {
        match settled {
            Ok(row) if row.get::<_, i64>(0) > xact => return,
            Ok(row) => {
                if !warned && started.elapsed() > SETTLE_WARN_AFTER {
                    warned = true;
                    let oldest: i64 = row.get(0);
                    tracing::warn!(
                        "a committed batch of events (transaction {xact}) has waited \
                         {SETTLE_WARN_AFTER:?} for transaction {oldest} of the database \
                         cluster to end: readers see no event past it until it does"
                    );
                }
            }
            Err(e) => {
                tracing::warn!("could not check that a committed batch is visible: {e}");
                return;
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(SETTLE_PAUSE_MAX);
        let client = tx.client();
        settled = match client.prepare_cached(&sql.settled).await {
            Ok(statement) => client.query_one(&statement, &[]).await,
            Err(e) => Err(e),
        };
    }
}

fn asks(appends: &[Append]) -> Vec<Ask<'_>> {
    appends
        .iter()
        .map(|a| Ask {
            run_id: &a.run_id,
            epoch: a.epoch,
            expected: a.expected,
            events: a.events.len() as u32,
        })
        .collect()
}

/// The runs of `appends`, each once, in the order their rows are locked.
fn names(appends: &[Append]) -> Vec<&str> {
    let mut names: Vec<&str> = appends.iter().map(|a| a.run_id.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// A pooled connection with a transaction or statement of the writer in flight. Dropped
/// before its end was answered (an error, the task aborted), the connection is closed, not
/// pooled: the server rolls the transaction back.
struct Open(Option<Object>);

impl Open {
    fn client(&self) -> &Object {
        self.0
            .as_ref()
            .expect("a transaction is used only until it ends")
    }

    async fn prepare(&self, statement: &str) -> Result<Statement, StoreError> {
        self.client()
            .prepare_cached(statement)
            .await
            .map_err(|e| pg(DOING, e))
    }

    /// Ends the transaction with `statement` (`COMMIT` or `ROLLBACK`) and pools the connection.
    async fn end(&mut self, statement: &str) -> Result<(), StoreError> {
        self.client()
            .batch_execute(statement)
            .await
            .map_err(|e| pg(DOING, e))?;
        self.0 = None;
        Ok(())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(Object::take(client));
        }
    }
}

/// Opens the transaction, locks the runs of `appends` (creating the rows of new ones) and
/// reads them, in one round trip: each run's state.
async fn lock_runs(
    tx: &Open,
    sql: &Sql,
    appends: &[Append],
) -> Result<HashMap<RunId, RunState>, StoreError> {
    let names = names(appends);
    let (lock, read) = (
        tx.prepare(&sql.lock_runs).await?,
        tx.prepare(&sql.run_states).await?,
    );
    let client = tx.client();
    let params: [&(dyn ToSql + Sync); 1] = [&names];
    let ((), _, rows) = tokio::try_join!(
        client.batch_execute("BEGIN"),
        client.execute(&lock, &params),
        client.query(&read, &params)
    )
    .map_err(|e| pg(DOING, e))?;
    rows.iter()
        .map(|row| {
            let run_id = RunId::from(row.get::<_, &str>(0));
            let last_seq = u32::try_from(row.get::<_, i64>(1)).map_err(|e| {
                crate::error::corrupted("table runs", 0, format!("run `{run_id}`: last seq {e}"))
            })?;
            let epoch = row.get::<_, i64>(2) as u64;
            Ok((run_id, RunState { last_seq, epoch }))
        })
        .collect()
}

/// A batch's accepted events as rows, what each append is answered, and what the write
/// checks of each run it moves on.
struct Batch {
    columns: EventColumns,
    counts: Vec<Result<usize, StoreError>>,
    /// Each run's seq before the batch, by name.
    was: HashMap<String, (i64, Option<i64>)>,
}

impl Batch {
    /// The events of the appends whose verdict is `Ok`, in order, planned against `runs`.
    fn new(
        appends: &[Append],
        verdicts: Vec<Result<(), StoreError>>,
        runs: &HashMap<RunId, RunState>,
    ) -> Batch {
        let mut columns = EventColumns::default();
        let mut was = HashMap::new();
        let counts = appends
            .iter()
            .zip(verdicts)
            .map(|(append, verdict)| {
                verdict?;
                let run = runs.get(&append.run_id).copied().unwrap_or_default();
                let guard = was
                    .entry(append.run_id.as_str().to_owned())
                    .or_insert((i64::from(run.last_seq), None));
                if append.epoch.is_some() {
                    guard.1 = Some(run.epoch as i64);
                }
                for (i, event) in append.events.iter().enumerate() {
                    let seq = Seq(append.expected.0 + i as u32);
                    columns.push(&append.run_id, seq, event.clone());
                }
                Ok(append.events.len())
            })
            .collect();
        Batch {
            columns,
            counts,
            was,
        }
    }

    /// The parameters of `write_events`.
    fn params<'a>(&'a self, channel: &'a str) -> WriteEvents<'a> {
        let (runs, last_seqs, positions) = self.columns.run_ends();
        let (was, epochs) = runs.iter().map(|run| self.was[*run]).unzip();
        let c = &self.columns;
        WriteEvents {
            event_run: &c.runs,
            event_seq: &c.seqs,
            step: &c.steps,
            kind: &c.kinds,
            attempt: &c.attempts,
            at_ms: &c.at_ms,
            instance: &c.instances,
            payload: &c.payloads,
            blob_sha256: &c.blob_hashes,
            blob_bytes: &c.blob_sizes,
            count: c.len() as i64,
            runs,
            last_seqs,
            positions,
            channel,
            was,
            epochs,
        }
    }

    fn answers(&self, before: i64) -> Vec<Answer> {
        answers(&self.counts, before as u64)
    }
}

/// Each append's answer, its events having the ids after `before` in order.
fn answers(counts: &[Result<usize, StoreError>], before: u64) -> Vec<Answer> {
    let mut next = before + 1;
    counts
        .iter()
        .map(|count| {
            let first = next;
            next += *count.as_ref().map_err(Clone::clone)? as u64;
            Ok((first..next).map(EventId).collect())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_appends_take_the_ids_after_the_batchs_start_in_order_refused_ones_none() {
        let refused = StoreError::Conflict {
            run_id: RunId::from("b"),
            expected: Seq(3),
            actual: Seq(1),
        };
        let got: Vec<String> = answers(&[Ok(2), Err(refused), Ok(1), Ok(3)], 10)
            .into_iter()
            .map(|a| match a {
                Ok(ids) => format!("{:?}", ids.iter().map(|i| i.0).collect::<Vec<_>>()),
                Err(e) => e.to_string(),
            })
            .collect();
        assert_eq!(
            got,
            [
                "[11, 12]",
                "conflict on run `b`: expected to append seq 3, but the run is at seq 1",
                "[13]",
                "[14, 15, 16]",
            ]
        );
    }
}
