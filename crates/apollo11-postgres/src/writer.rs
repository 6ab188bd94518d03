//! The writer task: appends from any number of callers are queued, and each time the task is
//! free it takes everything queued (up to [`BATCH_EVENTS_MAX`]) and writes it in one
//! transaction of two round trips: the runs locked (with `BEGIN`), every append's fence and
//! seq checked ([`plan`]), then one statement (ids taken, one multi-row insert, the runs
//! moved on, the change feed notified) with `COMMIT`. Each caller then gets its own answer.

use crate::error::{pg, pool};
use crate::plan::{plan, Ask, RunState};
use crate::rows::EventColumns;
use crate::sql::Sql;
use apollo11_core::{EventId, RunId, Seq};
use apollo11_store::{NewEvent, StoreError};
use deadpool_postgres::{Object, Pool};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::ToSql;

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
        let answers = match write(&pool, &sql, appends).await {
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

/// Writes `appends` in one transaction of two round trips (`BEGIN` pipelined with the lock
/// of the runs; the write pipelined with `COMMIT`): the answer of each, or the error that
/// stopped the transaction (then nothing of it was written, or, if the commit's answer was
/// lost, all).
async fn write(pool: &Pool, sql: &Sql, appends: Vec<Append>) -> Result<Vec<Answer>, StoreError> {
    let client = pool.get().await.map_err(|e| self::pool(DOING, e))?;
    let mut tx = Open(Some(client));
    let mut runs = lock_runs(tx.client(), sql, &appends).await?;
    let asks: Vec<Ask<'_>> = appends
        .iter()
        .map(|a| Ask {
            run_id: &a.run_id,
            epoch: a.epoch,
            expected: a.expected,
            events: a.events.len() as u32,
        })
        .collect();
    let verdicts = plan(&asks, &mut runs);
    let (columns, counts) = rows(appends, verdicts);
    if columns.is_empty() {
        // Nothing to write; the rows of new runs that lock_runs made go too.
        tx.end("ROLLBACK").await?;
        return Ok(answers(counts, 0));
    }
    let before = insert(&mut tx, sql, &columns).await?;
    Ok(answers(counts, before as u64))
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

/// Opens the transaction and locks the runs of `appends` (creating the rows of new ones),
/// in one round trip: each run's state.
async fn lock_runs(
    client: &Object,
    sql: &Sql,
    appends: &[Append],
) -> Result<HashMap<RunId, RunState>, StoreError> {
    let mut names: Vec<&str> = appends.iter().map(|a| a.run_id.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let stmt = client
        .prepare_cached(&sql.lock_runs)
        .await
        .map_err(|e| pg(DOING, e))?;
    let params: [&(dyn ToSql + Sync); 1] = [&names];
    let ((), rows) = tokio::try_join!(client.batch_execute("BEGIN"), client.query(&stmt, &params))
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

/// The events of the accepted appends as rows, in order; for each append, how many of them
/// it has, or why it was refused.
fn rows(
    appends: Vec<Append>,
    verdicts: Vec<Result<(), StoreError>>,
) -> (EventColumns, Vec<Result<usize, StoreError>>) {
    let mut columns = EventColumns::default();
    let counts = appends
        .into_iter()
        .zip(verdicts)
        .map(|(append, verdict)| {
            verdict?;
            let count = append.events.len();
            for (i, event) in append.events.into_iter().enumerate() {
                columns.push(&append.run_id, Seq(append.expected.0 + i as u32), event);
            }
            Ok(count)
        })
        .collect();
    (columns, counts)
}

/// Each append's answer, its events having the ids after `before` in order.
fn answers(counts: Vec<Result<usize, StoreError>>, before: u64) -> Vec<Answer> {
    let mut next = before + 1;
    counts
        .into_iter()
        .map(|count| {
            let first = next;
            next += count? as u64;
            Ok((first..next).map(EventId).collect())
        })
        .collect()
}

/// Writes the rows (ids taken, runs moved on, feed notified) and commits, pipelined in one
/// round trip: the id before the first row's.
async fn insert(tx: &mut Open, sql: &Sql, columns: &EventColumns) -> Result<i64, StoreError> {
    let client = tx.client();
    let stmt = client
        .prepare_cached(&sql.write_events)
        .await
        .map_err(|e| pg(DOING, e))?;
    let (runs, seqs, positions) = columns.run_ends();
    let count = columns.len() as i64;
    let rest: [&(dyn ToSql + Sync); 5] = [&count, &runs, &seqs, &positions, &sql.channel];
    let params: Vec<&(dyn ToSql + Sync)> = columns.params().into_iter().chain(rest).collect();
    let (row, ()) = tokio::try_join!(
        client.query_one(&stmt, &params),
        client.batch_execute("COMMIT")
    )
    .map_err(|e| pg(DOING, e))?;
    tx.0 = None;
    Ok(row.get(0))
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
        let got: Vec<String> = answers(vec![Ok(2), Err(refused), Ok(1), Ok(3)], 10)
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
