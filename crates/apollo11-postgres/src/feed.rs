//! The change feed: a task LISTENs on the schema's channel (every commit of events, by any
//! instance, NOTIFYs it with its last id), reads what is new in id order and pushes it into a
//! bounded broadcast channel; a subscriber that falls the channel's length behind is told so.
//! Without a listening connection (lost, or not yet made) the task polls, and reconnects.
//! With nobody subscribed the task reads nothing: the first subscriber moves the mark on to
//! the last visible event itself, so an engine nobody watches pays no read per commit.

use crate::metrics;
use crate::read::{last_event_id, read_from};
use crate::sql::Sql;
use apollo11_core::{limits, EventId};
use apollo11_store::feed::{Published, POLL_INTERVAL_MS};
use apollo11_store::StoreError;
use deadpool_postgres::Pool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, Notify};
use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

/// Events read at once while publishing.
const PAGE_EVENTS: u32 = 1_000;

/// How long the task waits for a notification before reading anyway (one lost in a
/// reconnection is found this late).
const QUIET_CHECK: Duration = Duration::from_secs(1);

/// How soon the task reads again when events were announced that it could not read yet
/// (an older transaction of the cluster still running); doubled at each read that finds
/// them still held back, up to [`QUIET_CHECK`].
const HELD_CHECK: Duration = Duration::from_millis(5);

/// What subscribers share with the task.
#[derive(Debug)]
pub struct Feed {
    live: broadcast::Sender<Published>,
    /// The last event pushed: a subscription reads the store up to it and is pushed the rest.
    /// While nobody is subscribed it stays where it was.
    published: Mutex<EventId>,
    /// Wakes the task when a subscriber arrives, to push what it heard meanwhile.
    subscribed: Notify,
}

impl Feed {
    fn new() -> Feed {
        Feed {
            live: broadcast::channel(limits::CHANGE_FEED_EVENTS_MAX as usize).0,
            published: Mutex::new(EventId(0)),
            subscribed: Notify::new(),
        }
    }

    /// A receiver of what is pushed from now on, and the last event pushed before it. The
    /// first subscriber moves the mark on to the last visible event (the task left it
    /// behind while nobody was subscribed), so it reads that much of the store itself
    /// rather than being pushed it all.
    pub async fn subscribe(
        &self,
        pool: &Pool,
        sql: &Sql,
    ) -> Result<(EventId, broadcast::Receiver<Published>), StoreError> {
        let last = match self.live.receiver_count() {
            0 => Some(last_event_id(pool, sql).await?),
            _ => None,
        };
        let mut published = self.lock();
        if let (Some(last), 0) = (last, self.live.receiver_count()) {
            // The task pushes nothing while nobody is subscribed, and reads from the mark
            // on once someone is: events after `last` are pushed.
            *published = last.max(*published);
        }
        let live = self.live.subscribe();
        self.subscribed.notify_one();
        Ok((*published, live))
    }

    fn lock(&self) -> MutexGuard<'_, EventId> {
        // Only an id is under the lock: a panic cannot leave it half-written.
        self.published.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How the feed's own connection is made: the store's settings and TLS.
pub type Connect = (tokio_postgres::Config, MakeRustlsConnect);

/// Starts the task for `channel`; abort the handle to stop it.
pub fn spawn(pool: Pool, sql: Arc<Sql>, connect: Connect) -> (Arc<Feed>, JoinHandle<()>) {
    let feed = Arc::new(Feed::new());
    let task = tokio::spawn(run(feed.clone(), pool, sql, connect));
    (feed, task)
}

async fn run(feed: Arc<Feed>, pool: Pool, sql: Arc<Sql>, connect: Connect) {
    let mut listener = None;
    let (mut listening, mut reading) = (Streak::new(LISTEN), Streak::new(READ));
    let heard = Arc::new(AtomicU64::new(0));
    let mut held = HELD_CHECK;
    loop {
        if listener.is_none() {
            listener = listening.settle(listen(&connect, &sql.channel, &heard).await);
        }
        // Announced but not read yet: committed while an older transaction still ran, or
        // while nobody was subscribed (then the next notification or subscriber wakes it).
        let behind = heard.load(Ordering::Relaxed) > feed.lock().0;
        let quiet = if behind && feed.live.receiver_count() > 0 {
            let wait = held;
            held = (held * 2).min(QUIET_CHECK);
            wait
        } else {
            held = HELD_CHECK;
            QUIET_CHECK
        };
        match &mut listener {
            Some((_, notified)) => tokio::select! {
                heard = tokio::time::timeout(quiet, notified.recv()) => {
                    if let Ok(None) = heard {
                        listening.failed("the listening connection ended");
                        listener = None;
                    }
                }
                () = feed.subscribed.notified() => {}
            },
            None => tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)).await,
        }
        // A failed read is tried again on the next round; subscribers only wait.
        reading.settle(publish(&feed, &pool, &sql).await);
    }
}

/// One of the feed's recurring jobs, and the metric that counts its failures.
struct Job {
    what: &'static str,
    metric: &'static str,
}

const LISTEN: Job = Job {
    what: "LISTEN on the change feed's channel",
    metric: metrics::FEED_LISTEN_FAILURES_TOTAL,
};

const READ: Job = Job {
    what: "read new events for the change feed",
    metric: metrics::FEED_READ_FAILURES_TOTAL,
};

/// Failures of a job in a row: each is counted, the first of a streak is logged as a
/// warning and the success that ends it as information, so a database down for an hour
/// logs two lines, not one per round.
struct Streak {
    job: Job,
    failing: bool,
}

impl Streak {
    fn new(job: Job) -> Streak {
        Streak {
            job,
            failing: false,
        }
    }

    /// `result`'s value, after counting and logging it.
    fn settle<T, E: std::fmt::Display>(&mut self, result: Result<T, E>) -> Option<T> {
        match result {
            Ok(value) => {
                if std::mem::take(&mut self.failing) {
                    tracing::info!("could {} again", self.job.what);
                }
                Some(value)
            }
            Err(e) => {
                self.failed(e);
                None
            }
        }
    }

    fn failed(&mut self, cause: impl std::fmt::Display) {
        ::metrics::counter!(self.job.metric).increment(1);
        if !std::mem::replace(&mut self.failing, true) {
            tracing::warn!(
                "could not {}: {cause}; the feed reads the store every {POLL_INTERVAL_MS} ms \
                 meanwhile and tries again",
                self.job.what
            );
        }
    }
}

/// A connection LISTENing on `channel`, and where its notifications arrive (closed when the
/// connection ends). Notifications that arrive while one waits are merged into it; the
/// highest id announced goes into `heard`.
async fn listen(
    (config, tls): &Connect,
    channel: &str,
    heard: &Arc<AtomicU64>,
) -> Result<(tokio_postgres::Client, mpsc::Receiver<()>), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(tls.clone()).await?;
    let (tell, notified) = mpsc::channel(1);
    let heard = heard.clone();
    tokio::spawn(async move {
        while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    heard.fetch_max(n.payload().parse().unwrap_or(0), Ordering::Relaxed);
                    if let Err(mpsc::error::TrySendError::Closed(())) = tell.try_send(()) {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!("the change feed's listening connection failed: {e}");
                    break;
                }
            }
        }
    });
    client.batch_execute(&format!("LISTEN {channel}")).await?;
    Ok((client, notified))
}

/// Pushes every event after the last published, in id order; nothing while nobody is
/// subscribed (the first subscriber moves the mark on, [`Feed::subscribe`]).
async fn publish(feed: &Feed, pool: &Pool, sql: &Sql) -> Result<(), StoreError> {
    loop {
        let from = EventId(feed.lock().0 + 1);
        if feed.live.receiver_count() == 0 {
            return Ok(());
        }
        let page = read_from(pool, sql, from, PAGE_EVENTS).await?;
        let full = page.len() == PAGE_EVENTS as usize;
        let mut published = feed.lock();
        for event in page {
            if event.event_id <= *published {
                continue;
            }
            *published = event.event_id;
            // No subscriber left is no error.
            let _ = feed.live.send(Ok(Arc::new(event)));
        }
        if !full {
            return Ok(());
        }
    }
}
