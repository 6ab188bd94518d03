//! The read routes (runs, one run now or at an event, its events, its plan, workflows) and
//! the two that change the registry or start a run.

use crate::client::segment;
use crate::extract::{Body, Names, Params};
use crate::server::AppState;
use crate::workflows::{without_dir, Registry};
use crate::{archived, drive, ApiError};
use apollo11_core::EventId;
use apollo11_runtime::inspect::{RunFilter, RunRow, RunView};
use apollo11_runtime::{RunId, RunStatus};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

type Shared = State<Arc<AppState>>;

/// `GET /api/v1/workflows`.
pub async fn workflows(State(state): Shared) -> Json<Value> {
    Json(state.registry().to_json())
}

/// `POST /api/v1/workflows/reload`: the previous set stays when a file is invalid.
pub async fn reload(State(state): Shared) -> Result<Json<Value>, ApiError> {
    let (dir, data_dir) = (state.workflows_dir.clone(), state.data_dir.clone());
    let from = dir.clone();
    let loaded = tokio::task::spawn_blocking(move || Registry::load(from.as_deref(), &data_dir))
        .await
        .map_err(|e| ApiError::Unavailable(format!("reloading: {e}")))?;
    let registry = Arc::new(loaded.map_err(|e| {
        tracing::warn!(error = %e, "workflows not reloaded");
        ApiError::Invalid(dir.as_deref().map_or(e.clone(), |dir| without_dir(&e, dir)))
    })?);
    *state.registry.write().unwrap_or_else(|p| p.into_inner()) = registry.clone();
    Ok(Json(registry.to_json()))
}

/// `GET /api/v1/runs?state=&workflow=&limit=&cursor=&all=`: newest first, paged; with
/// `all=true` the archived runs too, each marked `"archived": true`.
pub async fn list(State(state): Shared, params: Params) -> Result<Json<Value>, ApiError> {
    let limit = params.number("limit", 100, 1, 1000)? as usize;
    let mut filter = RunFilter::all();
    for name in params.text("state").into_iter().flat_map(|s| s.split(',')) {
        filter = filter.state(run_status(name)?);
    }
    if let Some(workflow) = params.text("workflow") {
        filter = filter.workflow(workflow);
    }
    let after = params.text("cursor").map(Cursor::parse).transpose()?;
    let after = after.as_ref().map(Cursor::at);
    let live = state.inspector.runs_page(&filter, after, limit + 1).await?;
    let mut rows: Vec<(RunRow, bool)> = live.into_iter().map(|row| (row, false)).collect();
    if params.flag("all")? {
        let archived = archived::rows(&state, &filter).await?.into_iter();
        rows.extend(archived.map(|row| (row, true)).filter(|(row, _)| {
            after.is_none_or(|after| (row.created_at, row.run_id.as_str()) < after)
        }));
        rows.sort_by(|(a, _), (b, _)| {
            (b.created_at, b.run_id.as_str()).cmp(&(a.created_at, a.run_id.as_str()))
        });
    }
    let next = (rows.len() > limit).then(|| Cursor::of(&rows[limit - 1].0).to_text());
    let runs: Vec<Value> = (rows.iter().take(limit))
        .map(|(row, archived)| {
            let mut value = json!(row);
            value["archived"] = json!(archived);
            value
        })
        .collect();
    Ok(Json(json!({"runs": runs, "next_cursor": next})))
}

fn run_status(name: &str) -> Result<RunStatus, ApiError> {
    serde_json::from_value(json!(name)).map_err(|_| {
        ApiError::Invalid(format!(
            "state: `{name}` is not one of running, succeeded, failed, rolled_back, paused"
        ))
    })
}

/// Where a page of runs ends: runs sort by creation time, then id.
struct Cursor {
    created_at: u64,
    run_id: String,
}

impl Cursor {
    fn at(&self) -> (u64, &str) {
        (self.created_at, &self.run_id)
    }

    fn of(row: &RunRow) -> Cursor {
        Cursor {
            created_at: row.created_at,
            run_id: row.run_id.0.clone(),
        }
    }

    /// Opaque to clients: hex of `created_at.run_id`.
    fn to_text(&self) -> String {
        let text = format!("{}.{}", self.created_at, self.run_id);
        text.bytes().map(|b| format!("{b:02x}")).collect()
    }

    fn parse(text: &str) -> Result<Cursor, ApiError> {
        let bad = || ApiError::Invalid("cursor: not a next_cursor this server gave".into());
        let bytes = (0..text.len())
            .step_by(2)
            .map(|i| {
                text.get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            })
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(bad)?;
        let text = String::from_utf8(bytes).map_err(|_| bad())?;
        let (created_at, run_id) = text.split_once('.').ok_or_else(bad)?;
        Ok(Cursor {
            created_at: created_at.parse().map_err(|_| bad())?,
            run_id: run_id.to_owned(),
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    workflow: String,
    run_id: Option<String>,
    /// The digest of the definition the client means; another registered is refused.
    digest: Option<String>,
}

/// `POST /api/v1/runs`.
pub async fn start(
    State(state): Shared,
    Body(body): Body<StartBody>,
) -> Result<Response, ApiError> {
    let run_id = drive::detached(async move {
        let digest = body.digest.as_deref();
        drive::start(&state, &body.workflow, body.run_id, digest).await
    })
    .await?;
    Ok((StatusCode::CREATED, Json(json!({"run_id": run_id}))).into_response())
}

/// `GET /api/v1/runs/{id}?at=N`.
pub async fn status(
    State(state): Shared,
    Names(names): Names,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    let run_id = RunId(names[0].clone());
    let at = match params.text("at") {
        Some(_) => Some(EventId(params.number("at", 0, 0, u64::MAX)?)),
        None => None,
    };
    let mut view = state.inspector.status(&run_id, at).await?;
    // Only a finished run is archived: a running one needs no look at the list of runs.
    if view.state != RunStatus::Running && archived::is_archived(&state, &run_id).await? {
        view = view.archived();
    }
    Ok(Json(run_json(&view)))
}

/// The run object: the inspector's view, with each step's `log` the route of its log.
fn run_json(view: &RunView) -> Value {
    let mut value = serde_json::to_value(view).unwrap_or_default();
    for step in &view.steps {
        let url = step.log.map(|log| {
            let compensation = if log.compensation {
                "&compensation=true"
            } else {
                ""
            };
            format!(
                "/api/v1/runs/{}/steps/{}/log?attempt={}{compensation}",
                segment(&view.run_id.0),
                segment(&step.name),
                log.attempt
            )
        });
        value["steps"][&step.name]["log"] = json!(url);
    }
    value
}

/// `GET /api/v1/runs/{id}/events?after=N&limit=M`.
pub async fn events(
    State(state): Shared,
    Names(names): Names,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    let after = EventId(params.number("after", 0, 0, u64::MAX)?);
    let limit = params.number("limit", 1000, 1, 10_000)? as usize;
    let page = state
        .inspector
        .events(&RunId(names[0].clone()), after, limit)
        .await?;
    Ok(Json(json!(page)))
}

/// `GET /api/v1/runs/{id}/plan`.
pub async fn plan(State(state): Shared, Names(names): Names) -> Result<Json<Value>, ApiError> {
    let plan = state.inspector.plan(&RunId(names[0].clone())).await?;
    Ok(Json(json!(plan)))
}
