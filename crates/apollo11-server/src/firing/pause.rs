//! `POST /api/v1/schedules/{workflow}/{name}/pause` and `/resume`: an operator stops a
//! schedule firing, or lets it fire again, with who and why. The state is a control of the
//! store (`schedule/WORKFLOW/NAME`), written with compare-and-set before the answer, so it
//! outlives the server and every instance sharing the store reads it at its next round.
//! The record keeps the latest change: paused or not, by whom, why, since when.

use crate::actions::Note;
use crate::extract::{Body, SchedulePath};
use crate::server::AppState;
use crate::ApiError;
use apollo11_runtime::Clock;
use apollo11_store::{ControlStore, StoreError};
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The keys of schedules' controls start with this.
const PREFIX: &str = "schedule/";
/// Writes tried when another writer changes the record meanwhile.
const WRITES_TRIED: usize = 3;

/// A schedule's latest pause or resume.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseState {
    /// Whether the schedule is paused.
    pub paused: bool,
    /// Who paused or resumed it.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When (ms since the epoch): paused or resumed since then.
    pub since: u64,
}

/// The pause states of every schedule that has one, by workflow and schedule.
pub type PauseStates = BTreeMap<(String, String), PauseState>;

fn key(workflow: &str, schedule: &str) -> String {
    format!("{PREFIX}{workflow}/{schedule}")
}

/// Every schedule's pause state, read from the store (a record that does not decode is
/// left out, logged).
pub(crate) async fn states(state: &AppState) -> Result<PauseStates, StoreError> {
    let mut states = BTreeMap::new();
    for control in state.store.list_controls(PREFIX).await? {
        let Some(rest) = control.key.strip_prefix(PREFIX) else {
            continue;
        };
        let Some((workflow, schedule)) = rest.split_once('/') else {
            continue;
        };
        match serde_json::from_slice::<PauseState>(&control.value) {
            Ok(pause) => {
                states.insert((workflow.to_owned(), schedule.to_owned()), pause);
            }
            Err(e) => tracing::warn!(key = %control.key, error = %e, "schedule control not read"),
        }
    }
    Ok(states)
}

/// `POST /api/v1/schedules/{workflow}/{name}/pause`.
pub(crate) async fn pause(
    state: State<Arc<AppState>>,
    path: SchedulePath,
    note: Body<Note>,
) -> Result<Json<PauseState>, ApiError> {
    set(state, path, note, true).await
}

/// `POST /api/v1/schedules/{workflow}/{name}/resume`.
pub(crate) async fn resume(
    state: State<Arc<AppState>>,
    path: SchedulePath,
    note: Body<Note>,
) -> Result<Json<PauseState>, ApiError> {
    set(state, path, note, false).await
}

/// Records the schedule paused (or not), by the note's operator: 404 for a schedule no
/// registered workflow declares, 409 when it already is (naming who made it so).
async fn set(
    State(state): State<Arc<AppState>>,
    SchedulePath {
        workflow,
        name: schedule,
    }: SchedulePath,
    Body(note): Body<Note>,
    paused: bool,
) -> Result<Json<PauseState>, ApiError> {
    note.checked()?;
    let declared = (state.registry().get(&workflow))
        .is_some_and(|r| r.schedules.iter().any(|s| s.name == schedule));
    if !declared {
        return Err(ApiError::NotFound(format!(
            "no schedule `{workflow}/{schedule}` is registered"
        )));
    }
    let key = key(&workflow, &schedule);
    let wanted = PauseState {
        paused,
        by: note.by,
        reason: note.reason,
        since: Clock::system().now_ms(),
    };
    let value = serde_json::to_vec(&wanted).expect("a pause state serializes");
    for _ in 0..WRITES_TRIED {
        let (version, now) = current(&state, &key).await?;
        if now.as_ref().map_or(!paused, |p| p.paused == paused) {
            return Err(ApiError::Conflict(already(
                &workflow, &schedule, paused, now,
            )));
        }
        match state.store.put_control(&key, version, value.clone()).await {
            Ok(_) => {
                let verb = if paused { "paused" } else { "resumed" };
                tracing::info!(workflow, schedule, by = %wanted.by, reason = %wanted.reason,
                    "schedule {verb}");
                return Ok(Json(wanted));
            }
            Err(StoreError::ControlConflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Conflict(format!(
        "schedule `{workflow}/{schedule}` was changed by others {WRITES_TRIED} times meanwhile; try again"
    )))
}

/// The record under `key` (version 0 and none when there is none).
async fn current(state: &AppState, key: &str) -> Result<(u64, Option<PauseState>), ApiError> {
    let found = state.store.list_controls(key).await?;
    let Some(control) = found.into_iter().find(|c| c.key == key) else {
        return Ok((0, None));
    };
    let pause = serde_json::from_slice(&control.value).ok();
    Ok((control.version, pause))
}

/// Why a pause (or resume) of a schedule already so is refused.
fn already(workflow: &str, schedule: &str, paused: bool, now: Option<PauseState>) -> String {
    let state = if paused {
        "already paused"
    } else {
        "not paused"
    };
    match now {
        Some(p) => format!(
            "schedule `{workflow}/{schedule}` is {state}: by {} ({})",
            p.by, p.reason
        ),
        None => format!("schedule `{workflow}/{schedule}` is {state}"),
    }
}
