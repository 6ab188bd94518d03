//! Runs `gc` archived (`apollo11 gc`, `serve --gc-every`): only the data dir's archive files
//! hold them. The server answers about them from there as before, lists them with
//! `GET /api/v1/runs?all=true`, and refuses every action on them with 409, as their run
//! object's `allowed` says.

use crate::server::{AppState, Backend};
use crate::ApiError;
use apollo11_core::Seq;
use apollo11_runtime::inspect::{archived_refusal, RunFilter, RunRow};
use apollo11_runtime::RunId;
use apollo11_store::EventStore;
use std::collections::HashSet;

/// Whether only the archive holds `run_id` (never, with a shared store: it has no archive).
pub(crate) async fn is_archived(state: &AppState, run_id: &RunId) -> Result<bool, ApiError> {
    let Backend::FileLog(log) = &state.backend else {
        return Ok(false);
    };
    if log.holds_live(run_id) {
        return Ok(false);
    }
    Ok(state.store.read_event(run_id, Seq(1)).await?.is_some())
}

/// 409 for an action on an archived run: it takes no more events.
pub(crate) async fn refuse(state: &AppState, run_id: &RunId) -> Result<(), ApiError> {
    match is_archived(state, run_id).await? {
        true => Err(ApiError::Conflict(archived_refusal(run_id))),
        false => Ok(()),
    }
}

/// The archived runs `filter` admits, newest first (each folded from its archive: a run that
/// cannot be read is left out, as `apollo11 runs --all` names it on stderr).
pub(crate) async fn rows(state: &AppState, filter: &RunFilter) -> Result<Vec<RunRow>, ApiError> {
    let Backend::FileLog(log) = &state.backend else {
        return Ok(Vec::new());
    };
    let mut summaries = log.archived_runs().await?;
    let live = state.store.list_runs().await?;
    let live: HashSet<&RunId> = live.iter().map(|s| &s.run_id).collect();
    summaries.retain(|s| !live.contains(&s.run_id));
    Ok(state.inspector.runs_of(summaries, filter).await.runs)
}
