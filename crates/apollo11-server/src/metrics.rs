//! `GET /metrics`: every metric of the log, the runtime and the dispatcher in the Prometheus
//! text format, from the recorder the process installed ([`install`]), and the gauges of the
//! dispatcher's workers and queue computed at the scrape (`worker_gauges`).

use crate::server::AppState;
use crate::ApiError;
use apollo11_dispatch::metrics as dispatch;
use apollo11_dispatch::Dispatcher;
use apollo11_prometheus::{Gauge, InstallError, Prometheus, Sample};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The content type of the Prometheus text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Installs the Prometheus recorder for this process with the log's, the runtime's and the
/// dispatcher's histogram buckets and describes their metrics; the server answers `/metrics`
/// from it.
///
/// # Errors
///
/// A recorder is installed in this process already, or its upkeep thread cannot start.
pub fn install() -> Result<Prometheus, InstallError> {
    let prometheus = apollo11_prometheus::install(&[
        apollo11_log::metrics::HISTOGRAM_BUCKETS,
        apollo11_runtime::metrics::HISTOGRAM_BUCKETS,
        dispatch::HISTOGRAM_BUCKETS,
        crate::firing::HISTOGRAM_BUCKETS,
    ])?;
    apollo11_log::metrics::describe();
    apollo11_runtime::metrics::describe();
    dispatch::describe();
    crate::firing::describe();
    Ok(prometheus)
}

/// `GET /metrics`.
pub(crate) async fn scrape(State(state): State<Arc<AppState>>) -> Result<Response, ApiError> {
    let prometheus = state.metrics.as_ref().ok_or_else(|| {
        ApiError::NotFound("this server records no metrics (started without a recorder)".into())
    })?;
    let text = prometheus.render_with(&worker_gauges(&state.workers));
    Ok(([(header::CONTENT_TYPE, TEXT_FORMAT)], text).into_response())
}

/// The dispatcher's gauges now (names and meanings: `apollo11_dispatch::metrics`).
fn worker_gauges(workers: &Dispatcher) -> [Gauge<'static>; 3] {
    let now = dispatch::gauges(&workers.workers(), &workers.queued());
    let queued = (now.queued.iter()).map(|q| {
        let matched = if q.matched { "true" } else { "false" };
        let labels = [("needs", q.needs.as_str()), ("matched", matched)];
        Sample::new(&labels, f64::from(q.tries))
    });
    [
        Gauge {
            name: dispatch::WORKERS_CONNECTED,
            help: "Workers heard from within the heartbeat timeout.",
            samples: vec![Sample::new(&[], f64::from(now.connected))],
        },
        Gauge {
            name: dispatch::WORKER_SLOTS,
            help: "Slots of the connected workers, in all and busy with a try.",
            samples: vec![
                Sample::new(&[("state", "total")], f64::from(now.slots)),
                Sample::new(&[("state", "busy")], f64::from(now.busy)),
            ],
        },
        Gauge {
            name: dispatch::WORKER_QUEUED_TRIES,
            help: "Tries waiting for a worker, by the labels they need and whether a connected worker carries them.",
            samples: queued.collect(),
        },
    ]
}
