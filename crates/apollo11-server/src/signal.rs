//! `POST /api/v1/runs/{id}/steps/{step}/signal`: an operator's signal (or approval) to a
//! waiting step, with who, why and the JSON data that becomes the step's output. One
//! `Signalled` event; refused with 409 (`not_waiting`) when the step is not waiting for a
//! signal, and nothing is appended then. The server drives the run afterwards.

use crate::actions::{refuse_archived, Acted, Note};
use crate::extract::{Body, StepPath};
use crate::server::AppState;
use crate::{drive, ApiError};
use apollo11_core::limits;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// A signal: its data (the step's output; none when absent), who and why.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalBody {
    #[serde(default)]
    data: Option<Value>,
    by: String,
    reason: String,
}

/// `POST /api/v1/runs/{id}/steps/{step}/signal`.
pub async fn signal(
    State(state): State<Arc<AppState>>,
    StepPath { run_id, step }: StepPath,
    Body(body): Body<SignalBody>,
) -> Result<(StatusCode, Json<Acted>), ApiError> {
    let SignalBody { data, by, reason } = body;
    let note = Note { by, reason };
    note.checked()?;
    if let Some(data) = &data {
        let bytes = serde_json::to_vec(data).map_or(0, |b| b.len());
        if bytes > limits::SIGNAL_DATA_BYTES_MAX as usize {
            return Err(ApiError::Invalid(format!(
                "data: {bytes} bytes of JSON; a signal carries at most {}",
                limits::SIGNAL_DATA_BYTES_MAX
            )));
        }
    }
    drive::detached(async move {
        refuse_archived(&state, &run_id).await?;
        let engine = &state.engine;
        let id = (engine.signal(&run_id, &step, data.as_ref(), &note.by, &note.reason)).await?;
        drive::drive(&state, &run_id).await?;
        Ok((StatusCode::ACCEPTED, Json(Acted::appended(id))))
    })
    .await
}
