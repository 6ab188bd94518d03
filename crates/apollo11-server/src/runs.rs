//! The read routes (runs, one run now or at an event, its events, its plan, workflows) and
//! the two that change the registry or start a run.

use crate::extract::{Body, RunPath, StepPath, START_BODY_BYTES_MAX};
use crate::query::{Bounded, Flag, Query};
use crate::server::AppState;
use crate::workflows::{without_dir, Registry, WorkflowList};
use crate::{drive, idempotent, ApiError};
use apollo11_client::segment;
use apollo11_core::EventId;
use apollo11_runtime::inspect::{EventPage, Plan, RunFilter, RunRow, RunView};
use apollo11_runtime::{RerunPlan, RunId, RunStatus};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

type Shared = State<Arc<AppState>>;

/// `GET /api/v1/workflows`.
pub async fn workflows(State(state): Shared) -> Json<WorkflowList> {
    Json(state.registry().listed())
}

/// `POST /api/v1/workflows/reload`: the previous set stays when a file is invalid.
pub async fn reload(State(state): Shared) -> Result<Json<WorkflowList>, ApiError> {
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
    Ok(Json(registry.listed()))
}

/// The query of `GET /api/v1/runs`.
#[derive(Deserialize)]
pub struct ListQuery {
    limit: Option<Bounded<1, 1000>>,
    state: Option<States>,
    workflow: Option<String>,
    cursor: Option<Cursor>,
    #[serde(default)]
    all: Flag,
}

/// `GET /api/v1/runs?state=&workflow=&limit=&cursor=&all=`: newest first, paged; with
/// `all=true` the archived runs too, each marked `"archived": true`.
pub async fn list(
    State(state): Shared,
    Query(query): Query<ListQuery>,
) -> Result<Json<RunListPage>, ApiError> {
    let limit = query.limit.map_or(100, |l| l.0) as usize;
    let mut filter = RunFilter::all();
    for status in query.state.into_iter().flat_map(|s| s.0) {
        filter = filter.state(status);
    }
    if let Some(workflow) = &query.workflow {
        filter = filter.workflow(workflow);
    }
    let after = query.cursor.as_ref().map(Cursor::at);
    let rows = (state.inspector)
        .runs_page_with(&filter, after, limit + 1, query.all.0)
        .await?;
    let next = (rows.len() > limit).then(|| Cursor::of(&rows[limit - 1].row).to_text());
    let runs = (rows.into_iter().take(limit))
        .map(|listed| RunListRow {
            row: listed.row,
            archived: listed.archived,
        })
        .collect();
    Ok(Json(RunListPage {
        runs,
        next_cursor: next,
    }))
}

/// A page of `GET /api/v1/runs`.
#[derive(Serialize)]
pub struct RunListPage {
    runs: Vec<RunListRow>,
    /// Where the next page starts; `null` on the last.
    next_cursor: Option<String>,
}

/// A run of a page: the inspector's row, and whether only the archive holds the run.
#[derive(Serialize)]
pub struct RunListRow {
    #[serde(flatten)]
    row: RunRow,
    archived: bool,
}

/// `state=`: run states, separated by commas.
struct States(Vec<RunStatus>);

impl<'de> Deserialize<'de> for States {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let parse = |name: &str| {
            serde_json::from_value(json!(name)).map_err(|_| {
                let names = RunStatus::ALL.map(RunStatus::name).join(", ");
                D::Error::custom(format!("`{name}` is not one of {names}"))
            })
        };
        text.split(',')
            .map(parse)
            .collect::<Result<_, _>>()
            .map(States)
    }
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

    fn parse(text: &str) -> Option<Cursor> {
        let bytes = (0..text.len())
            .step_by(2)
            .map(|i| {
                text.get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            })
            .collect::<Option<Vec<u8>>>()?;
        let text = String::from_utf8(bytes).ok()?;
        let (created_at, run_id) = text.split_once('.')?;
        Some(Cursor {
            created_at: created_at.parse().ok()?,
            run_id: run_id.to_owned(),
        })
    }
}

impl<'de> Deserialize<'de> for Cursor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Cursor::parse(&text).ok_or_else(|| D::Error::custom("not a next_cursor this server gave"))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    workflow: String,
    run_id: Option<String>,
    /// The digest of the definition the client means; another registered is refused.
    digest: Option<String>,
    /// Values of the workflow's parameters, by name (defaults fill in the rest).
    #[serde(default)]
    params: BTreeMap<String, Value>,
}

/// `POST /api/v1/runs`: 201 with a new run; 200 with the run an earlier request under the
/// same `Idempotency-Key` started.
pub async fn start(
    State(state): Shared,
    headers: HeaderMap,
    Body(body): Body<StartBody, START_BODY_BYTES_MAX>,
) -> Result<Response, ApiError> {
    let key = idempotent::key(&headers)?;
    let (run_id, rested) = drive::detached(async move {
        let request = key.as_deref().map(|key| {
            let what = json!({
                "workflow": body.workflow,
                "run_id": body.run_id,
                "digest": body.digest,
                "params": body.params,
            });
            idempotent::request(key, &what)
        });
        let keyed = key
            .as_deref()
            .map(|key| idempotent::run_id(&body.workflow, key));
        let asked = drive::Start {
            name: &body.workflow,
            run_id: body.run_id.or(keyed),
            digest: body.digest.as_deref(),
            params: &body.params,
            request,
            attributes: BTreeMap::new(),
        };
        drive::start(&state, asked).await
    })
    .await?;
    let status = if rested.is_some() {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(Started { run_id })).into_response())
}

/// The answer of a start.
#[derive(Serialize)]
pub struct Started {
    run_id: RunId,
}

/// The query of `GET /api/v1/runs/{id}`.
#[derive(Deserialize)]
pub struct StatusQuery {
    at: Option<Bounded<0, { u64::MAX }>>,
}

/// `GET /api/v1/runs/{id}?at=N`.
pub async fn status(
    State(state): Shared,
    RunPath(run_id): RunPath,
    Query(query): Query<StatusQuery>,
) -> Result<Json<RunView<String>>, ApiError> {
    let at = query.at.map(|at| EventId(at.0));
    let mut view = state.inspector.status_or_archived(&run_id, at).await?;
    apollo11_shell::shell::name_waits(&mut view);
    Ok(Json(run_object(view)))
}

/// The run object: the inspector's view, with each step's `log` the route of its log.
fn run_object(view: RunView) -> RunView<String> {
    view.map_logs(|run_id, step, log| {
        let compensation = if log.compensation {
            "&compensation=true"
        } else {
            ""
        };
        format!(
            "/api/v1/runs/{}/steps/{}/log?attempt={}{compensation}",
            segment(&run_id.0),
            segment(step),
            log.attempt
        )
    })
}

/// The query of `GET /api/v1/runs/{id}/events`.
#[derive(Deserialize)]
pub struct EventsQuery {
    after: Option<Bounded<0, { u64::MAX }>>,
    limit: Option<Bounded<1, 10_000>>,
}

/// `GET /api/v1/runs/{id}/events?after=N&limit=M`.
pub async fn events(
    State(state): Shared,
    RunPath(run_id): RunPath,
    Query(query): Query<EventsQuery>,
) -> Result<Json<EventPage>, ApiError> {
    let after = EventId(query.after.map_or(0, |a| a.0));
    let limit = query.limit.map_or(1000, |l| l.0) as usize;
    let page = state.inspector.events(&run_id, after, limit).await?;
    Ok(Json(page))
}

/// Whether the steps after the step run again too.
#[derive(Deserialize)]
pub struct RerunQuery {
    #[serde(default)]
    downstream: Flag,
}

/// `GET /api/v1/runs/{id}/steps/{step}/rerun`: what a rerun would do; 409 naming why the run
/// refuses it.
pub async fn rerun_plan(
    State(state): Shared,
    StepPath { run_id, step }: StepPath,
    Query(query): Query<RerunQuery>,
) -> Result<Json<RerunPlan>, ApiError> {
    let plan = state
        .inspector
        .rerun_plan(&run_id, &step, query.downstream.0);
    Ok(Json(plan.await?))
}

/// `GET /api/v1/runs/{id}/plan`.
pub async fn plan(State(state): Shared, RunPath(run_id): RunPath) -> Result<Json<Plan>, ApiError> {
    Ok(Json(state.inspector.plan(&run_id).await?))
}
