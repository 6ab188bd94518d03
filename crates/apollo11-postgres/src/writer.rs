//! The writer task: appends from any number of callers are queued, and whenever fewer
//! batches are in flight than it allows, the task takes what is queued (up to
//! [`BATCH_EVENTS_MAX`] events) and writes it in one transaction (`commit.rs`); batches
//! run side by side on connections of the pool. A run is never in two batches in flight:
//! an append whose run is being written waits for that batch's end, so each run's batches
//! take their transaction ids, hence their event ids, in its seq order. Each caller then
//! gets its own answer.

use crate::commit::{write, Written};
use crate::plan::RunState;
use crate::sql::{Sql, ID_SHIFT};
use apollo11_core::{limits, EventId, RunId, Seq};
use apollo11_store::{NewEvent, StoreError};
use deadpool_postgres::Pool;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

/// Events written in one transaction at most; more wait for the next.
pub const BATCH_EVENTS_MAX: usize = 8_192;

// A batch's events are numbered below `1 << ID_SHIFT` in its ids.
const _: () = assert!(BATCH_EVENTS_MAX < 1 << ID_SHIFT);
const _: () = assert!(limits::APPEND_BATCH_EVENTS_MAX as usize <= BATCH_EVENTS_MAX);

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

/// An append without its reply.
pub struct Append {
    /// The run.
    pub run_id: RunId,
    /// The epoch of a fenced append.
    pub epoch: Option<u64>,
    /// The seq of its first event.
    pub expected: Seq,
    /// The events, checked already.
    pub events: Vec<NewEvent>,
}

/// Starts the writer, with at most `side_by_side` batches in flight; it ends when every
/// sender is dropped.
pub fn spawn(pool: Pool, sql: Arc<Sql>, side_by_side: usize) -> mpsc::Sender<Request> {
    let (tx, rx) = mpsc::channel(QUEUE_MAX);
    tokio::spawn(run(pool, sql, rx, side_by_side.max(1)));
    tx
}

/// A batch that ended: its appends, their replies, and what its transaction did.
struct Landed {
    appends: Vec<Append>,
    replies: Vec<oneshot::Sender<Answer>>,
    written: Result<Written, StoreError>,
}

async fn run(pool: Pool, sql: Arc<Sql>, mut queue: mpsc::Receiver<Request>, side_by_side: usize) {
    let mut known = Known::default();
    let mut waiting = Waiting::default();
    let mut flights = JoinSet::new();
    let mut open = true;
    loop {
        while flights.len() < side_by_side {
            let Some((appends, replies, runs)) = waiting.take(&known) else {
                break;
            };
            let (pool, sql) = (pool.clone(), sql.clone());
            flights.spawn(async move {
                let written = write(&pool, &sql, runs, &appends).await;
                Landed {
                    appends,
                    replies,
                    written,
                }
            });
        }
        if !open && flights.is_empty() {
            return;
        }
        tokio::select! {
            landed = flights.join_next(), if !flights.is_empty() => match landed {
                Some(Ok(landed)) => waiting.land(&mut known, landed),
                // A batch's task panicked: end, so that every caller is told the writer
                // ended rather than waiting on runs it left busy.
                _ => return,
            },
            next = queue.recv(), if open && waiting.room() => match next {
                Some(request) => {
                    waiting.push(request);
                    // Callers just answered are queueing their next appends: let them, so
                    // that they join this batch (and its one WAL flush) rather than the next.
                    tokio::task::yield_now().await;
                    while waiting.room() {
                        let Ok(next) = queue.try_recv() else { break };
                        waiting.push(next);
                    }
                }
                None => open = false,
            },
        }
    }
}

/// A batch to write: its appends, their replies, and its runs as the writer last saw them
/// if it knows all of them.
type Taken = (
    Vec<Append>,
    Vec<oneshot::Sender<Answer>>,
    Option<HashMap<RunId, RunState>>,
);

/// Appends taken from the queue, not yet in a batch, in the order they came; and the runs
/// of the batches in flight.
#[derive(Default)]
struct Waiting {
    requests: VecDeque<Request>,
    busy: HashSet<RunId>,
}

impl Waiting {
    fn room(&self) -> bool {
        self.requests.len() < QUEUE_MAX
    }

    fn push(&mut self, request: Request) {
        self.requests.push_back(request);
    }

    /// The next batch: waiting appends in order, up to [`BATCH_EVENTS_MAX`] events, but
    /// none of a run in flight (its later appends stay behind it); their runs become busy.
    /// With the runs' states as the writer last saw them, if it knows all of them.
    fn take(&mut self, known: &Known) -> Option<Taken> {
        let (mut taken, mut events, mut left) = (Vec::new(), 0, VecDeque::new());
        while let Some(request) = self.requests.pop_front() {
            if events + request.events.len() > BATCH_EVENTS_MAX {
                self.requests.push_front(request);
                break;
            }
            if self.busy.contains(&request.run_id) {
                left.push_back(request);
                continue;
            }
            events += request.events.len();
            taken.push(request);
        }
        left.append(&mut self.requests);
        self.requests = left;
        if taken.is_empty() {
            return None;
        }
        let (replies, appends): (Vec<_>, Vec<_>) = taken
            .into_iter()
            .map(|r| {
                let append = Append {
                    run_id: r.run_id,
                    epoch: r.epoch,
                    expected: r.expected,
                    events: r.events,
                };
                (r.reply, append)
            })
            .unzip();
        self.busy.extend(appends.iter().map(|a| a.run_id.clone()));
        let runs = known.runs(&appends);
        Some((appends, replies, runs))
    }

    /// Ends a batch: its runs free, the writer's knowledge of them updated, every caller
    /// answered.
    fn land(&mut self, known: &mut Known, landed: Landed) {
        for append in &landed.appends {
            self.busy.remove(&append.run_id);
        }
        let answers = match landed.written {
            Ok((answers, runs)) => {
                known.remember(runs);
                answers
            }
            Err(e) => {
                known.forget(&landed.appends);
                vec![Err(e); landed.replies.len()]
            }
        };
        for (reply, answer) in landed.replies.into_iter().zip(answers) {
            // A caller that stopped waiting is no error.
            let _ = reply.send(answer);
        }
    }
}

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
