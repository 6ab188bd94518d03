//! The change feed: every event after a given id, in id order, each once, as it becomes
//! visible. Stores that can push ([`MemStore`](crate::MemStore), the file log) publish each
//! event once it is durable, into a bounded broadcast channel that never makes the writer
//! wait: a subscriber that falls the channel's length behind is told so
//! ([`Change::FellBehind`]) and re-reads the log from where it stopped. Stores that cannot
//! push get the trait's default, which polls `read_from`.
//!
//! A subscription first reads what the store held when it subscribed (from its starting id
//! on), then what is pushed after that instant: nothing appended between a reader's last
//! read and its subscription is missed.

use crate::{EventStore, StoreError};
use apollo11_core::{Event, EventId, RunId, Seq};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

/// How often the default (polling) feed reads the store: its added latency.
pub const POLL_INTERVAL_MS: u64 = 100;

/// Events read from the store at once while a subscription catches up.
const PAGE_EVENTS: u32 = 1_000;

/// What a push store sends: an event made visible, or the reason it stopped publishing.
pub type Published = Result<Arc<Event>, StoreError>;

/// What a subscription delivers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The next event, in id order.
    Event(Arc<Event>),
    /// The subscriber fell too far behind the store's feed: everything up to and including
    /// `after` was delivered, nothing after it will be. Re-read from `after + 1` with
    /// `read_from` (or subscribe again from `after`). The subscription stays ended.
    FellBehind {
        /// The last event delivered (the starting id when none was).
        after: EventId,
    },
}

type ReadFuture<'s> = Pin<Box<dyn Future<Output = Result<Vec<Event>, StoreError>> + Send + 's>>;
type ReadFrom<'s> = Box<dyn Fn(EventId, u32) -> ReadFuture<'s> + Send + Sync + 's>;

/// A store's events after some id, in order; see the module documentation.
pub struct Subscription<'s> {
    read_from: ReadFrom<'s>,
    /// The last event delivered (or the starting id).
    after: EventId,
    buffered: VecDeque<Arc<Event>>,
    source: Source,
    fell_behind: bool,
}

enum Source {
    /// Read the store every `interval`.
    Poll { interval: Duration },
    /// Read the store up to `backfill_to`, then take what the store pushes.
    Push {
        live: broadcast::Receiver<Published>,
        backfill_to: EventId,
    },
}

impl<'s> Subscription<'s> {
    /// A subscription that polls `store.read_from` every [`POLL_INTERVAL_MS`]: the default
    /// for stores that cannot push.
    pub fn polling<S: EventStore + ?Sized>(store: &'s S, after: EventId) -> Subscription<'s> {
        Subscription {
            read_from: reader(store),
            after,
            buffered: VecDeque::new(),
            source: Source::Poll {
                interval: Duration::from_millis(POLL_INTERVAL_MS),
            },
            fell_behind: false,
        }
    }

    /// A subscription to a push store: `live` must have been subscribed at the instant the
    /// store's last visible event was `visible` (atomically with publishing), so that events
    /// up to `visible` are read from the store and the later ones come from `live`.
    pub fn pushed<S: EventStore + ?Sized>(
        store: &'s S,
        after: EventId,
        visible: EventId,
        live: broadcast::Receiver<Published>,
    ) -> Subscription<'s> {
        Subscription {
            read_from: reader(store),
            after,
            buffered: VecDeque::new(),
            source: Source::Push {
                live,
                backfill_to: visible,
            },
            fell_behind: false,
        }
    }

    /// The last event delivered (or the starting id).
    pub fn after(&self) -> EventId {
        self.after
    }

    /// The next change. Cancel safe: dropping the future loses nothing.
    ///
    /// # Errors
    ///
    /// What the store's read returns when it fails (polling, or reading back what came
    /// before the subscription), or the error the store pushed (a poisoned store).
    pub async fn next(&mut self) -> Result<Change, StoreError> {
        loop {
            if let Some(event) = self.buffered.pop_front() {
                self.after = event.event_id;
                return Ok(Change::Event(event));
            }
            if self.fell_behind {
                return Ok(Change::FellBehind { after: self.after });
            }
            match &mut self.source {
                Source::Poll { interval } => {
                    let interval = *interval;
                    let page = (self.read_from)(EventId(self.after.0 + 1), PAGE_EVENTS).await?;
                    if page.is_empty() {
                        tokio::time::sleep(interval).await;
                    }
                    self.buffered.extend(page.into_iter().map(Arc::new));
                }
                Source::Push { live, backfill_to } => {
                    if self.after < *backfill_to {
                        let to = *backfill_to;
                        let page = (self.read_from)(EventId(self.after.0 + 1), PAGE_EVENTS).await?;
                        let older: Vec<Event> =
                            page.into_iter().take_while(|e| e.event_id <= to).collect();
                        if older.is_empty() {
                            // Nothing left up to `to` (ids have gaps): the rest is pushed.
                            *backfill_to = self.after;
                        }
                        self.buffered.extend(older.into_iter().map(Arc::new));
                        continue;
                    }
                    match live.recv().await {
                        Ok(Ok(event)) if event.event_id > self.after => {
                            self.buffered.push_back(event)
                        }
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => return Err(e),
                        Err(broadcast::error::RecvError::Lagged(_)) => self.fell_behind = true,
                        Err(broadcast::error::RecvError::Closed) => {
                            return Err(StoreError::unavailable("the store's change feed closed"))
                        }
                    }
                }
            }
        }
    }
}

fn reader<'s, S: EventStore + ?Sized>(store: &'s S) -> ReadFrom<'s> {
    Box::new(move |from, max| store.read_from(from, max))
}

/// One run's events from a seq on, in seq order, each once, as they become visible: what a
/// live view of one run (a terminal, a server's event stream) follows. It never ends and
/// never skips: falling behind the store's feed is handled by re-reading the run.
pub struct RunFeed<'s, S: EventStore + ?Sized> {
    store: &'s S,
    run_id: RunId,
    next_seq: Seq,
    subscribe: Subscriber<'s>,
    subscription: Subscription<'s>,
    pending: VecDeque<Arc<Event>>,
}

/// What a [`RunFeed`] subscribes with: a subscription that delivers every event of its run
/// made visible after the instant it is taken (others may pass too; the feed drops them).
pub type Subscriber<'s> = Box<dyn Fn() -> SubscribeFuture<'s> + Send + Sync + 's>;

/// A subscription being taken.
pub type SubscribeFuture<'s> =
    Pin<Box<dyn Future<Output = Result<Subscription<'s>, StoreError>> + Send + 's>>;

impl<'s, S: EventStore + ?Sized> RunFeed<'s, S> {
    /// Follows `run_id` from seq `from` (1 for all of it); a run that does not exist yet is
    /// followed from its first event.
    ///
    /// # Errors
    ///
    /// What the store returns when the subscription or the first read fails.
    pub async fn new(store: &'s S, run_id: RunId, from: Seq) -> Result<RunFeed<'s, S>, StoreError> {
        let subscribe: Subscriber<'s> = Box::new(move || {
            Box::pin(async move { store.subscribe(store.last_event_id().await?).await })
        });
        RunFeed::with_subscriber(store, run_id, from, subscribe).await
    }

    /// As [`RunFeed::new`], taking its subscriptions from `subscribe` instead of the
    /// store's whole feed: a server following many runs routes the one feed to each run's
    /// followers, so that none wakes for another run's events.
    ///
    /// # Errors
    ///
    /// What `subscribe` or the first read returns when it fails.
    pub async fn with_subscriber(
        store: &'s S,
        run_id: RunId,
        from: Seq,
        subscribe: Subscriber<'s>,
    ) -> Result<RunFeed<'s, S>, StoreError> {
        let from = Seq(from.0.max(1));
        let (subscription, pending) = Self::catch_up(store, &subscribe, &run_id, from).await?;
        Ok(RunFeed {
            store,
            run_id,
            next_seq: from,
            subscribe,
            subscription,
            pending,
        })
    }

    /// Subscribes, then reads the run from `from`: the read covers everything up to the
    /// subscription's start, and the subscription everything after it.
    async fn catch_up(
        store: &'s S,
        subscribe: &Subscriber<'s>,
        run_id: &RunId,
        from: Seq,
    ) -> Result<(Subscription<'s>, VecDeque<Arc<Event>>), StoreError> {
        let subscription = subscribe().await?;
        let read = store.read_run(run_id, from).await?;
        Ok((subscription, read.into_iter().map(Arc::new).collect()))
    }

    /// The seq the next event will have.
    pub fn next_seq(&self) -> Seq {
        self.next_seq
    }

    /// The run's next event.
    ///
    /// # Errors
    ///
    /// What the store returns when a read or the subscription fails.
    pub async fn next(&mut self) -> Result<Arc<Event>, StoreError> {
        loop {
            while let Some(event) = self.pending.pop_front() {
                if event.seq == self.next_seq {
                    self.next_seq = Seq(event.seq.0 + 1);
                    return Ok(event);
                }
                // Older seqs came twice (read and pushed); a newer one means a gap that
                // only the store can fill.
                if event.seq > self.next_seq {
                    self.pending.clear();
                    self.resubscribe().await?;
                }
            }
            match self.subscription.next().await? {
                Change::Event(event) if event.run_id == self.run_id => {
                    self.pending.push_back(event)
                }
                Change::Event(_) => {}
                Change::FellBehind { .. } => self.resubscribe().await?,
            }
        }
    }

    async fn resubscribe(&mut self) -> Result<(), StoreError> {
        let (subscription, pending) =
            Self::catch_up(self.store, &self.subscribe, &self.run_id, self.next_seq).await?;
        self.subscription = subscription;
        self.pending = pending;
        Ok(())
    }
}
