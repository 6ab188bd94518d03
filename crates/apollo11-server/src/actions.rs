//! Operator actions: pause, resume, roll back a run, override or rerun a step. Each is one event in
//! the log with who and why (`by`, `reason`, checked as the command line checks them), refused
//! with 409 when the run's state does not allow it (an archived run allows none); the server drives the run afterwards, as
//! `apollo11 resume` would.

use crate::extract::{Body, RunPath, StepPath};
use crate::server::AppState;
use crate::{drive, ApiError};
use apollo11_core::{check_note, check_operator, limits, OverrideTarget};
use apollo11_runtime::inspect::Pause;
use apollo11_runtime::{EngineError, EventId, Refusal, RunAction, RunId};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

type Shared = State<Arc<AppState>>;
type Answer = Result<(StatusCode, Json<Acted>), ApiError>;

/// The answer of an action: the event it appended (`null` for a resume that only drives
/// the run again).
#[derive(Serialize)]
pub struct Acted {
    event_id: Option<EventId>,
}

impl Acted {
    /// The answer of an action that appended event `id`.
    pub(crate) fn appended(id: EventId) -> Acted {
        Acted { event_id: Some(id) }
    }
}

/// Who acts and why.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Note {
    pub(crate) by: String,
    pub(crate) reason: String,
}

impl Note {
    pub(crate) fn checked(&self) -> Result<(), ApiError> {
        check_operator("by", &self.by).map_err(ApiError::Invalid)?;
        check_note("reason", &self.reason, limits::ERROR_MESSAGE_BYTES_MAX)
            .map_err(ApiError::Invalid)
    }
}

/// `POST /api/v1/runs/{id}/pause`.
pub async fn pause(state: Shared, run: RunPath, note: Body<Note>) -> Answer {
    act(state, run, note, RunAction::Pause).await
}

/// `POST /api/v1/runs/{id}/rollback`.
pub async fn rollback(state: Shared, run: RunPath, note: Body<Note>) -> Answer {
    act(state, run, note, RunAction::Rollback).await
}

/// `POST /api/v1/runs/{id}/resume`: lifts an operator's pause (its event id), or, for a run
/// no operator paused, only drives it again (`event_id` null); refused for a run waiting for
/// an override.
pub async fn resume(state: Shared, run: RunPath, note: Body<Note>) -> Answer {
    act(state, run, note, RunAction::Resume).await
}

async fn act(
    State(state): Shared,
    RunPath(run_id): RunPath,
    Body(note): Body<Note>,
    action: RunAction,
) -> Answer {
    drive::detached(act_on(state, run_id, note, action)).await
}

/// The action, then the drive that follows it, whether or not the request is still waiting.
async fn act_on(state: Arc<AppState>, run_id: RunId, note: Note, action: RunAction) -> Answer {
    note.checked()?;
    refuse_archived(&state, &run_id).await?;
    let engine = &state.engine;
    let appended = match action {
        RunAction::Pause => engine.pause(&run_id, &note.by, &note.reason).await,
        RunAction::Resume => engine.unpause(&run_id, &note.by, &note.reason).await,
        RunAction::Rollback => {
            engine
                .request_rollback(&run_id, &note.by, &note.reason)
                .await
        }
    };
    let event_id: Option<EventId> = match appended {
        Ok(id) => Some(id),
        Err(EngineError::NotAllowed {
            action: RunAction::Resume,
            refusal: Refusal::NotPaused,
            ..
        }) => {
            not_waiting_for_a_person(&state, &run_id).await?;
            None
        }
        Err(e) => return Err(e.into()),
    };
    drive::drive(&state, &run_id).await?;
    Ok((StatusCode::ACCEPTED, Json(Acted { event_id })))
}

/// 409 for an action on a run only the archive holds: it takes no more events.
pub(crate) async fn refuse_archived(state: &AppState, run_id: &RunId) -> Result<(), ApiError> {
    match state.inspector.refusal_if_archived(run_id).await? {
        Some(why) => Err(ApiError::Conflict(why)),
        None => Ok(()),
    }
}

/// A resume of a run no operator paused only drives it again, which cannot help a run that
/// waits for a person because a step or its compensation failed for good: that is refused
/// (409) naming the step, as the inspector disables it.
async fn not_waiting_for_a_person(state: &AppState, run_id: &RunId) -> Result<(), ApiError> {
    let failed = match state.inspector.status(run_id, None).await?.paused {
        Some(Pause::StepFailed { step, .. }) => format!("step `{step}`"),
        Some(Pause::CompensationFailed { step, .. }) => format!("the compensation of `{step}`"),
        _ => return Ok(()),
    };
    Err(ApiError::Conflict(format!(
        "the run is paused because {failed} failed for good: override the step to go on"
    )))
}

/// What an override sets, and who and why.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverrideBody {
    to: String,
    by: String,
    reason: String,
}

/// `POST /api/v1/runs/{id}/steps/{step}/override`.
pub async fn override_step(
    State(state): Shared,
    StepPath { run_id, step }: StepPath,
    Body(body): Body<OverrideBody>,
) -> Answer {
    let to = OverrideTarget::parse(&body.to).ok_or_else(|| {
        ApiError::Invalid(format!(
            "to: `{}` is not one of succeeded, skipped, pending, failed",
            body.to
        ))
    })?;
    Note {
        by: body.by.clone(),
        reason: body.reason.clone(),
    }
    .checked()?;
    drive::detached(async move {
        refuse_archived(&state, &run_id).await?;
        let event_id = state
            .engine
            .override_step(&run_id, &step, to, &body.by, &body.reason)
            .await?;
        drive::drive(&state, &run_id).await?;
        Ok((StatusCode::OK, Json(Acted::appended(event_id))))
    })
    .await
}

/// A rerun: who and why, and whether the steps after the step run again too.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerunBody {
    by: String,
    reason: String,
    #[serde(default)]
    downstream: bool,
}

/// `POST /api/v1/runs/{id}/steps/{step}/rerun`.
pub async fn rerun(
    State(state): Shared,
    StepPath { run_id, step }: StepPath,
    Body(body): Body<RerunBody>,
) -> Answer {
    let RerunBody {
        by,
        reason,
        downstream,
    } = body;
    let note = Note { by, reason };
    note.checked()?;
    drive::detached(async move {
        refuse_archived(&state, &run_id).await?;
        let engine = &state.engine;
        let event_id = (engine.rerun(&run_id, &step, downstream, &note.by, &note.reason)).await?;
        drive::drive(&state, &run_id).await?;
        Ok((StatusCode::ACCEPTED, Json(Acted::appended(event_id))))
    })
    .await
}
