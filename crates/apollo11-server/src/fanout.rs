//! One subscription to the store's change feed for the whole server, routed by run: each
//! event stream waits on a channel of its own run's events only, so a server with many
//! streams open does work in proportion to the events each stream shows, not to every
//! event times every stream.
//!
//! A stream registers under the same lock the router holds while it routes an event, and
//! gets the id of the last event routed: its [`Subscription`] delivers every event of its
//! run after that id, and the run's events up to it come from reading the run
//! ([`RunFeed`](apollo11_store::RunFeed) reads it, drops what comes twice and re-reads
//! after a gap or a lag).

use apollo11_core::{EventId, RunId};
use apollo11_store::feed::{Published, Subscriber};
use apollo11_store::{Change, EventStore, StoreError, Subscription};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{broadcast, watch};

/// Events a run's channel holds for a slow stream before that stream must re-read its run.
const RUN_BUFFER: usize = 1_024;

/// The routes from the store's feed to each followed run.
pub struct Fanout {
    routes: Mutex<Routes>,
}

struct Routes {
    /// The last event routed.
    routed: EventId,
    /// The channel of each run some stream follows.
    runs: HashMap<RunId, broadcast::Sender<Published>>,
}

impl Fanout {
    /// Routes that start after `last`, the store's last visible event.
    pub fn new(last: EventId) -> Fanout {
        Fanout {
            routes: Mutex::new(Routes {
                routed: last,
                runs: HashMap::new(),
            }),
        }
    }

    fn routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A subscription to `run_id`'s events routed from now on.
    pub fn subscribe<'s, S: EventStore + ?Sized>(
        &self,
        store: &'s S,
        run_id: &RunId,
    ) -> Subscription<'s> {
        let mut routes = self.routes();
        routes.runs.retain(|_, sender| sender.receiver_count() > 0);
        let sender = routes
            .runs
            .entry(run_id.clone())
            .or_insert_with(|| broadcast::channel(RUN_BUFFER).0);
        let live = sender.subscribe();
        Subscription::pushed(store, routes.routed, routes.routed, live)
    }

    /// What a [`RunFeed`](apollo11_store::RunFeed) of `run_id` subscribes with.
    pub fn subscriber<'s, S: EventStore + ?Sized>(
        self: &'s Arc<Self>,
        store: &'s S,
        run_id: RunId,
    ) -> Subscriber<'s> {
        Box::new(move || {
            let subscription = self.subscribe(store, &run_id);
            Box::pin(async move { Ok(subscription) })
        })
    }

    /// Routes the store's feed until `closing` turns true or the store fails; the runs'
    /// channels close then, and their streams end.
    pub async fn route<S: EventStore + ?Sized>(
        &self,
        store: &S,
        mut closing: watch::Receiver<bool>,
    ) {
        let failed = tokio::select! {
            failed = self.route_all(store) => failed,
            _ = closing.wait_for(|closing| *closing) => return self.routes().runs.clear(),
        };
        tracing::warn!(error = %failed, "event streams ended");
        let mut routes = self.routes();
        for (_, sender) in routes.runs.drain() {
            let _ = sender.send(Err(failed.clone()));
        }
    }

    async fn route_all<S: EventStore + ?Sized>(&self, store: &S) -> StoreError {
        loop {
            let after = self.routes().routed;
            let mut feed = match store.subscribe(after).await {
                Ok(feed) => feed,
                Err(e) => return e,
            };
            loop {
                match feed.next().await {
                    Ok(Change::Event(event)) => self.send(event),
                    // Subscribe again from the last routed event: the store is read from there.
                    Ok(Change::FellBehind { .. }) => break,
                    Err(e) => return e,
                }
            }
        }
    }

    fn send(&self, event: Arc<apollo11_core::Event>) {
        let mut routes = self.routes();
        routes.routed = event.event_id;
        let run_id = event.run_id.clone();
        let gone = match routes.runs.get(&run_id) {
            Some(sender) => sender.send(Ok(event)).is_err(),
            None => false,
        };
        if gone {
            routes.runs.remove(&run_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo11_core::{EventKind, Payload, Seq, StepName};
    use apollo11_store::{MemStore, NewEvent, RunFeed};
    use std::time::Duration;

    fn started(step: u32) -> NewEvent {
        NewEvent {
            step: Some(StepName(format!("s{step}"))),
            kind: EventKind::Started,
            attempt: 1,
            at_ms: 0,
            instance: "test".into(),
            payload: Payload::Inline(Vec::new()),
        }
    }

    /// Appends `n` events to `run`, after its `before` events, one append each.
    async fn append(store: &MemStore, run: &str, before: u32, n: u32) {
        for i in before..before + n {
            let run_id = RunId(run.into());
            store
                .append(&run_id, Seq(i + 1), vec![started(i)])
                .await
                .unwrap();
        }
    }

    /// A fanout routing `store` on a task of its own, until the returned sender says stop.
    async fn routed(store: &Arc<MemStore>) -> (Arc<Fanout>, watch::Sender<bool>) {
        let fanout = Arc::new(Fanout::new(store.last_event_id().await.unwrap()));
        let (stop, closing) = watch::channel(false);
        let (f, s) = (fanout.clone(), store.clone());
        tokio::spawn(async move { f.route(s.as_ref(), closing).await });
        (fanout, stop)
    }

    /// The seqs of the next `n` events of `feed`, which must all be `run`'s.
    async fn seqs(feed: &mut RunFeed<'_, MemStore>, run: &str, n: usize) -> Vec<u32> {
        let mut seqs = Vec::new();
        for _ in 0..n {
            let next = tokio::time::timeout(Duration::from_secs(5), feed.next());
            let event = next.await.expect("an event within 5 s").unwrap();
            assert_eq!(event.run_id.0, run);
            seqs.push(event.seq.0);
        }
        seqs
    }

    #[tokio::test]
    async fn a_run_subscription_gets_its_run_only_from_the_instant_it_is_taken() {
        let store = Arc::new(MemStore::new());
        append(&store, "a", 0, 2).await;
        let (fanout, _stop) = routed(&store).await;
        let mut live = fanout.subscribe(store.as_ref(), &RunId("a".into()));
        append(&store, "b", 0, 3).await;
        append(&store, "a", 2, 2).await;
        for seq in [3, 4] {
            let next = tokio::time::timeout(Duration::from_secs(5), live.next());
            match next.await.expect("an event within 5 s").unwrap() {
                Change::Event(event) => {
                    assert_eq!((event.run_id.0.as_str(), event.seq.0), ("a", seq))
                }
                other => panic!("expected run a's event {seq}, got {other:?}"),
            }
        }
        // Run b's events were never routed to run a's channel.
        let quiet = tokio::time::timeout(Duration::from_millis(100), live.next()).await;
        assert!(quiet.is_err(), "nothing more for run a: {quiet:?}");
    }

    #[tokio::test]
    async fn a_feed_through_the_fanout_reads_the_past_then_follows_without_gap_or_repeat() {
        let store = Arc::new(MemStore::new());
        append(&store, "a", 0, 3).await;
        let (fanout, _stop) = routed(&store).await;
        let subscribe = fanout.subscriber(store.as_ref(), RunId("a".into()));
        let feed = RunFeed::with_subscriber(store.as_ref(), RunId("a".into()), Seq(1), subscribe);
        let mut feed = feed.await.unwrap();
        append(&store, "b", 0, 2).await;
        append(&store, "a", 3, 2).await;
        assert_eq!(seqs(&mut feed, "a", 5).await, vec![1, 2, 3, 4, 5]);
    }

    #[tokio::test]
    async fn a_stream_that_falls_behind_its_run_s_channel_re_reads_and_misses_nothing() {
        let store = Arc::new(MemStore::new());
        let (fanout, _stop) = routed(&store).await;
        let subscribe = fanout.subscriber(store.as_ref(), RunId("a".into()));
        let feed = RunFeed::with_subscriber(store.as_ref(), RunId("a".into()), Seq(1), subscribe);
        let mut feed = feed.await.unwrap();
        let many = RUN_BUFFER as u32 + 10;
        append(&store, "a", 0, many).await;
        let expected: Vec<u32> = (1..=many).collect();
        assert_eq!(seqs(&mut feed, "a", many as usize).await, expected);
    }

    #[tokio::test]
    async fn closing_ends_every_run_s_channel() {
        let store = Arc::new(MemStore::new());
        let (fanout, stop) = routed(&store).await;
        let mut live = fanout.subscribe(store.as_ref(), &RunId("a".into()));
        stop.send(true).unwrap();
        let next = tokio::time::timeout(Duration::from_secs(5), live.next()).await;
        assert!(
            next.expect("the end within 5 s").is_err(),
            "the channel closed"
        );
    }
}
