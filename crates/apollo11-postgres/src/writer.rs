//! The writer task: appends from any number of callers are queued, and each time the task is
//! free it takes everything queued (up to [`BATCH_EVENTS_MAX`]) and writes it in one
//! transaction: the runs locked, every append's fence and seq checked ([`plan`]), ids taken,
//! one multi-row insert, the runs moved on, the change feed notified, one commit. Each caller
//! then gets its own answer.

use crate::error::{pg, pool};
use crate::plan::{plan, Ask, RunState};
use crate::rows::EventColumns;
use crate::sql::Sql;
use apollo11_core::{EventId, RunId, Seq};
use apollo11_store::{NewEvent, StoreError};
use deadpool_postgres::{Pool, Transaction};
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

/// Writes `appends` in one transaction; the answer of each, or the error that stopped the
/// transaction (then nothing of it was written, or, if the commit's answer was lost, all).
async fn write(pool: &Pool, sql: &Sql, appends: Vec<Append>) -> Result<Vec<Answer>, StoreError> {
    let mut client = pool.get().await.map_err(|e| self::pool(DOING, e))?;
    let tx = client.transaction().await.map_err(|e| pg(DOING, e))?;
    let mut runs = lock_runs(&tx, sql, &appends).await?;
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
    let accepted: usize = appends
        .iter()
        .zip(&verdicts)
        .filter(|(_, v)| v.is_ok())
        .map(|(a, _)| a.events.len())
        .sum();
    if accepted == 0 {
        // Nothing to write; the rows of new runs that lock_runs made go too.
        tx.rollback().await.map_err(|e| pg(DOING, e))?;
        return Ok(verdicts
            .into_iter()
            .map(|v| v.map(|()| Vec::new()))
            .collect());
    }
    let stmt = tx
        .prepare_cached(&sql.next_ids)
        .await
        .map_err(|e| pg(DOING, e))?;
    let last: i64 = tx
        .query_one(&stmt, &[&(accepted as i64)])
        .await
        .map_err(|e| pg(DOING, e))?
        .get(0);
    let (columns, answers) = assign(appends, verdicts, last - accepted as i64 + 1);
    insert(&tx, sql, &columns, last).await?;
    tx.commit().await.map_err(|e| pg(DOING, e))?;
    Ok(answers)
}

/// Locks the runs of `appends` (creating the rows of new ones): each run's state.
async fn lock_runs(
    tx: &Transaction<'_>,
    sql: &Sql,
    appends: &[Append],
) -> Result<HashMap<RunId, RunState>, StoreError> {
    let mut names: Vec<&str> = appends.iter().map(|a| a.run_id.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let stmt = tx
        .prepare_cached(&sql.lock_runs)
        .await
        .map_err(|e| pg(DOING, e))?;
    let rows = tx.query(&stmt, &[&names]).await.map_err(|e| pg(DOING, e))?;
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

/// Gives the accepted appends their ids from `first_id` on: the rows to insert, and each
/// append's answer.
fn assign(
    appends: Vec<Append>,
    verdicts: Vec<Result<(), StoreError>>,
    first_id: i64,
) -> (EventColumns, Vec<Answer>) {
    let mut columns = EventColumns::default();
    let mut next = first_id as u64;
    let answers = appends
        .into_iter()
        .zip(verdicts)
        .map(|(append, verdict)| {
            verdict?;
            let mut ids = Vec::with_capacity(append.events.len());
            for (i, event) in append.events.into_iter().enumerate() {
                let seq = Seq(append.expected.0 + i as u32);
                columns.push(EventId(next), &append.run_id, seq, event);
                ids.push(EventId(next));
                next += 1;
            }
            Ok(ids)
        })
        .collect();
    (columns, answers)
}

/// Inserts the rows, moves their runs on and notifies the feed, pipelined in one round trip.
async fn insert(
    tx: &Transaction<'_>,
    sql: &Sql,
    columns: &EventColumns,
    last: i64,
) -> Result<(), StoreError> {
    let (runs, seqs, ids) = columns.run_ends();
    let prepare = |statement| tx.prepare_cached(statement);
    let (insert, update, notify) = tokio::try_join!(
        prepare(&sql.insert_events),
        prepare(&sql.update_runs),
        prepare(&sql.notify),
    )
    .map_err(|e| pg(DOING, e))?;
    let last = last.to_string();
    let (insert_params, update_params) = (columns.params(), [&runs as _, &seqs as _, &ids as _]);
    let notify_params: [&(dyn ToSql + Sync); 2] = [&sql.channel, &last];
    tokio::try_join!(
        tx.execute(&insert, &insert_params),
        tx.execute(&update, &update_params),
        tx.execute(&notify, &notify_params),
    )
    .map_err(|e| pg(DOING, e))?;
    Ok(())
}
