//! The writer task: appends from any number of callers are queued, and each time the task is
//! free it takes everything queued (up to [`BATCH_EVENTS_MAX`]) and writes it in one
//! transaction: the runs locked, every append's fence and seq checked ([`plan`]), then one
//! statement (ids taken, one multi-row insert, the runs moved on, the change feed notified)
//! with `COMMIT`. When the writer knows where each run of the batch is (it wrote or read
//! them last), it checks against that and sends the whole transaction at once, one round
//! trip, the statement verifying each run is still there; else it reads the runs first, two
//! round trips. Each caller then gets its own answer.

use crate::error::{pg, pool};
use crate::plan::{plan, Ask, RunState};
use crate::rows::EventColumns;
use crate::sql::{Sql, WriteEvents, RUNS_MOVED};
use apollo11_core::{EventId, RunId, Seq};
use apollo11_store::{NewEvent, StoreError};
use deadpool_postgres::{Object, Pool};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::Statement;

/// Events written in one transaction at most; more wait for the next.
pub const BATCH_EVENTS_MAX: usize = 8_192;

/// Appends waiting for the writer at most; callers beyond wait to queue.
const QUEUE_MAX: usize = 4_096;

/// What an append is answered with.
pub type Answer = Result<Vec<EventId>, StoreError>;

/// One caller's append.
#[derive(Debug)]
pub struct Request {
    /// The run.
    pub run_id: RunId,
    /// The epoch of a fenced append.
    pub epoch: Option<u64>,
    /// The seq of its first event.
    pub expected: Seq,
    /// The events, checked already.
    pub events: Vec<NewEvent>,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Answer>,
}

/// Starts the writer; it ends when every sender is dropped.
pub fn spawn(pool: Pool, sql: Arc<Sql>) -> mpsc::Sender<Request> {
    let (tx, rx) = mpsc::channel(QUEUE_MAX);
    tokio::spawn(run(pool, sql, rx));
    tx
}

async fn run(pool: Pool, sql: Arc<Sql>, mut queue: mpsc::Receiver<Request>) {
    let mut known = Known::default();
    while let Some(first) = queue.recv().await {
        // Callers just answered are queueing their next appends: let them, so that they
        // join this batch (and its one WAL flush) rather than make the next one.
        tokio::task::yield_now().await;
        let mut events = first.events.len();
        let mut batch = vec![first];
        while events < BATCH_EVENTS_MAX {
            let Ok(next) = queue.try_recv() else { break };
            events += next.events.len();
            batch.push(next);
        }
        let (replies, appends): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|r| {
                (
                    r.reply,
                    Append {
                        run_id: r.run_id,
                        epoch: r.epoch,
                        expected: r.expected,
                        events: r.events,
                    },
                )
            })
            .unzip();
        let answers = match write(&pool, &sql, &mut known, appends).await {
            Ok(answers) => answers,
            Err(e) => vec![Err(e); replies.len()],
        };
        for (reply, answer) in replies.into_iter().zip(answers) {
            // A caller that stopped waiting is no error.
            let _ = reply.send(answer);
        }
    }
}

/// An append without its reply.
struct Append {
    run_id: RunId,
    epoch: Option<u64>,
    expected: Seq,
    events: Vec<NewEvent>,
}

const DOING: &str = "appending events";

/// How the writer's transactions begin. Their statements are planned once per connection
/// (a generic plan): left to choose, the server planned the batch's write anew at each
/// execution, a fifth of its time. Only here: the lease statements' `LIMIT $2` would get a
/// generic plan that scans every run.
const BEGIN: &str = "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan";

/// Runs remembered at most by [`Known`]; past it, it starts over.
const KNOWN_MAX: usize = 100_000;

/// The runs this writer wrote or locked, as it last saw them. A batch whose runs are all
/// here, and whose appends all pass against them, is written in one round trip: its runs
/// locked and its events written without waiting for the runs' rows, the write itself
/// checking that each run is where this writer last saw it. Where one is not (another
/// instance wrote it, a lease raised its epoch), nothing is written and the batch goes the
/// way of two round trips, reading the runs before it decides.
#[derive(Debug, Default)]
struct Known(HashMap<RunId, RunState>);

impl Known {
    /// The state of every run of `appends`, if all are known.
    fn runs(&self, appends: &[Append]) -> Option<HashMap<RunId, RunState>> {
        appends
            .iter()
            .map(|a| Some((a.run_id.clone(), *self.0.get(&a.run_id)?)))
            .collect()
    }

    fn remember(&mut self, runs: HashMap<RunId, RunState>) {
        if self.0.len() + runs.len() > KNOWN_MAX {
            self.0.clear();
        }
        self.0.extend(runs);
    }

    fn forget(&mut self, appends: &[Append]) {
        for append in appends {
            self.0.remove(&append.run_id);
        }
    }
}

/// Why a batch planned against [`Known`] was not written.
enum Unwritten {
    /// A run was not where this writer last saw it, or an append would have been refused
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

/// Writes `appends` in one transaction: the answer of each, or the error that stopped the
/// transaction (then nothing of it was written, or, if the commit's answer was lost, all).
async fn write(
    pool: &Pool,
    sql: &Sql,
    known: &mut Known,
    appends: Vec<Append>,
) -> Result<Vec<Answer>, StoreError> {
    let planned = match known.runs(&appends) {
        Some(runs) => planned(pool, sql, &appends, runs).await,
        None => Err(Unwritten::Moved),
    };
    let written = match planned {
        Ok(written) => Ok(written),
        Err(Unwritten::Moved) => locked(pool, sql, &appends).await,
        Err(Unwritten::Failed(e)) => Err(e),
    };
    match written {
        Ok((answers, runs)) => {
            known.remember(runs);
            Ok(answers)
        }
        Err(e) => {
            known.forget(&appends);
            Err(e)
        }
    }
}

/// The answers, and the runs as the transaction left them.
type Written = (Vec<Answer>, HashMap<RunId, RunState>);

/// Writes `appends` planned against `runs` as this writer last saw them, in one round trip:
/// `BEGIN`, the runs locked, the events written, `COMMIT`.
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
    let (lock, write) = (
        tx.prepare(&sql.lock_runs).await?,
        tx.prepare(&sql.write_events).await?,
    );
    let client = tx.client();
    let names = names(appends);
    let lock_params: [&(dyn ToSql + Sync); 1] = [&names];
    let params = batch.params(&sql.channel);
    let params = params.binds();
    // Every request is answered before the connection goes back to the pool: a batch
    // refused by the write leaves the connection idle (its `COMMIT` rolled back), and the
    // next batch uses it as it is.
    let (begin, lock, write, commit) = tokio::join!(
        client.batch_execute(BEGIN),
        client.execute(&lock, &lock_params),
        client.query_one(&write, &params),
        client.batch_execute("COMMIT"),
    );
    let written = begin.and(lock).and(write);
    match (written, commit) {
        (Ok(row), Ok(())) => {
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

/// Whether `e` is the write finding a run not where the batch was planned.
fn is_runs_moved(e: &tokio_postgres::Error) -> bool {
    let code = e.code().map(SqlState::code);
    code == Some(RUNS_MOVED) || code == Some(SqlState::UNIQUE_VIOLATION.code())
}

/// Writes `appends` in one transaction of two round trips (`BEGIN` pipelined with the lock
/// of the runs and their read; the write pipelined with `COMMIT`), each append checked
/// against its run as read.
async fn locked(pool: &Pool, sql: &Sql, appends: &[Append]) -> Result<Written, StoreError> {
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
    let write = tx.prepare(&sql.write_events).await?;
    let client = tx.client();
    let params = batch.params(&sql.channel);
    let params = params.binds();
    let (row, ()) = tokio::try_join!(
        client.query_one(&write, &params),
        client.batch_execute("COMMIT")
    )
    .map_err(|e| pg(DOING, e))?;
    tx.0 = None;
    Ok((batch.answers(row.get(0)), after))
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

/// A pooled connection inside a transaction of the writer. Dropped before its end was
/// answered (an error, the task aborted), the connection is closed, not pooled: the server
/// rolls the transaction back.
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
        client.batch_execute(BEGIN),
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
