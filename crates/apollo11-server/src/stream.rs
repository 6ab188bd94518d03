//! `GET /api/v1/runs/{id}/events/stream`: the run's events as server-sent events, from the
//! first or after `Last-Event-ID` / `?after=N`, followed live through the store's change feed
//! as routed to the run by the `Fanout` (`RunFeed` re-reads the run when it falls behind, so
//! nothing is skipped or repeated), framed by axum's `Sse`. The headers go out at once with
//! a `: keep-alive` comment, another after 15 s without a message; the stream stays open
//! after the run ends, until the client leaves or the server stops.

use crate::extract::RunPath;
use crate::query::{Bounded, Query};
use crate::server::AppState;
use crate::ApiError;
use apollo11_core::{EventId, Seq};
use apollo11_runtime::inspect::EventView;
use apollo11_runtime::RunId;
use apollo11_store::RunFeed;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a stream stays quiet before it says it is alive.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The comment a stream says it is alive with (`: keep-alive`).
const ALIVE: &str = "keep-alive";

/// Messages buffered for a slow client before the feed waits for it.
const BUFFERED: usize = 64;

/// The query of a stream: the events after which it starts (`Last-Event-ID` wins).
#[derive(Deserialize)]
pub struct StreamQuery {
    after: Option<Bounded<0, { u64::MAX }>>,
}

/// The stream of a run's events.
pub async fn events(
    State(state): State<Arc<AppState>>,
    RunPath(run_id): RunPath,
    Query(query): Query<StreamQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let after = match headers.get("last-event-id") {
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| ApiError::Invalid("Last-Event-ID: not an event id".into()))?,
        None => query.after.map_or(0, |a| a.0),
    };
    // An unknown run is a 404 now, not an empty stream.
    state.engine.state(&run_id).await?;
    let (sender, receiver) = mpsc::channel::<Event>(BUFFERED);
    tokio::spawn(follow(state, run_id, EventId(after), sender));
    let events = futures_util::stream::unfold(receiver, |mut receiver| async move {
        let message = receiver.recv().await?;
        Some((Ok::<_, Infallible>(message), receiver))
    });
    let keep_alive = KeepAlive::new().interval(KEEP_ALIVE).text(ALIVE);
    Ok(Sse::new(events).keep_alive(keep_alive).into_response())
}

/// Sends the run's events with id > `after` until the client leaves, the server stops or
/// the store fails.
async fn follow(state: Arc<AppState>, run_id: RunId, after: EventId, sender: mpsc::Sender<Event>) {
    let mut closing = state.closing.clone();
    // A comment first: the client sees the stream open on a quiet run.
    if sender.send(Event::default().comment(ALIVE)).await.is_err() {
        return;
    }
    let subscribe = state
        .fanout
        .subscriber(state.store.as_ref(), run_id.clone());
    let feed = RunFeed::with_subscriber(state.store.as_ref(), run_id, Seq(1), subscribe);
    let mut feed = match feed.await {
        Ok(feed) => feed,
        Err(e) => return tracing::warn!(error = %e, "event stream not started"),
    };
    loop {
        let message = tokio::select! {
            next = feed.next() => match next {
                Ok(event) if event.event_id <= after => continue,
                Ok(event) => message(&event),
                Err(e) => return tracing::warn!(error = %e, "event stream ended"),
            },
            _ = closing.changed() => return,
            () = sender.closed() => return,
        };
        if sender.send(message).await.is_err() {
            return;
        }
    }
}

/// One server-sent event: `id`, `event: event`, `data` the event object on one line.
fn message(event: &apollo11_core::Event) -> Event {
    let data = serde_json::to_string(&EventView::from(event)).unwrap_or_default();
    Event::default()
        .id(event.event_id.0.to_string())
        .event("event")
        .data(data)
}
