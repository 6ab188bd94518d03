//! `GET /metrics`: every metric of the log and the runtime in the Prometheus text format,
//! from the recorder the process installed ([`install`]).

use crate::server::AppState;
use crate::ApiError;
use apollo11_prometheus::{InstallError, Prometheus};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The content type of the Prometheus text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Installs the Prometheus recorder for this process with the log's and the runtime's
/// histogram buckets and describes their metrics; the server answers `/metrics` from it.
///
/// # Errors
///
/// A recorder is installed in this process already, or its upkeep thread cannot start.
pub fn install() -> Result<Prometheus, InstallError> {
    let prometheus = apollo11_prometheus::install(&[
        apollo11_log::metrics::HISTOGRAM_BUCKETS,
        apollo11_runtime::metrics::HISTOGRAM_BUCKETS,
    ])?;
    apollo11_log::metrics::describe();
    apollo11_runtime::metrics::describe();
    Ok(prometheus)
}

/// `GET /metrics`.
pub(crate) async fn scrape(State(state): State<Arc<AppState>>) -> Result<Response, ApiError> {
    let prometheus = state.metrics.as_ref().ok_or_else(|| {
        ApiError::NotFound("this server records no metrics (started without a recorder)".into())
    })?;
    Ok(([(header::CONTENT_TYPE, TEXT_FORMAT)], prometheus.render()).into_response())
}
