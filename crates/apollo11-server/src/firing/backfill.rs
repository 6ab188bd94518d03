//! `POST /api/v1/schedules/backfill`: the runs of every fire time of a schedule in a range
//! that has none, started in fire-time order with at most `max_parallel` running at once.
//! Idempotent: each fire's run id is the one the schedule would give it, so a fire that
//! ran (by the schedule, or an earlier backfill) is left alone; a dry run says what would
//! start.

use super::{existing_runs, run_id, start, Fired, RETRY_MS};
use crate::extract::Body;
use crate::server::AppState;
use crate::workflows::Registered;
use crate::ApiError;
use apollo11_runtime::{Clock, RunId, RunStatus};
use apollo11_schedule::FireTime;
use apollo11_shell::definition::Schedule;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;

/// More fire times than this need `yes`.
pub const FIRES_CONFIRM_OVER: usize = 10_000;
/// More fire times than this are refused.
pub const FIRES_MAX: usize = 1_000_000;
/// Run ids an answer lists at most.
const LISTED_MAX: usize = 1_000;

/// The request.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backfill {
    workflow: String,
    /// The schedule; may be left out when the workflow has one.
    schedule: Option<String>,
    /// The range, ms since the epoch, both ends included.
    from: u64,
    to: u64,
    #[serde(default = "default_parallel")]
    max_parallel: u32,
    #[serde(default)]
    dry_run: bool,
    /// Confirms more than [`FIRES_CONFIRM_OVER`] fire times.
    #[serde(default)]
    yes: bool,
}

fn default_parallel() -> u32 {
    4
}

/// The answer.
#[derive(Serialize)]
pub struct Answer {
    workflow: String,
    schedule: String,
    /// Fire times in the range.
    fires: usize,
    /// Of those, the ones that have a run already.
    existing: usize,
    /// The runs started (or, in a dry run, that would be), in order; the first 1,000.
    starting: Vec<String>,
    /// How many start.
    starting_count: usize,
    dry_run: bool,
}

/// `POST /api/v1/schedules/backfill`: 202 with the runs it starts (in the background), 200
/// for a dry run.
pub(crate) async fn backfill(
    State(state): State<Arc<AppState>>,
    Body(asked): Body<Backfill>,
) -> Result<(StatusCode, Json<Answer>), ApiError> {
    let registry = state.registry();
    let registered = (registry.get(&asked.workflow)).ok_or_else(|| {
        ApiError::NotFound(format!("no workflow `{}` is registered", asked.workflow))
    })?;
    let schedule = which(registered, asked.schedule.as_deref())?.clone();
    let fires = fire_times(&schedule, &asked)?;
    let workflow = registered.spec.name.clone();
    let existing = existing_runs(&state, &workflow).await?;
    let todo: Vec<FireTime> = (fires.iter())
        .filter(|f| !existing.contains(&run_id(&workflow, &schedule.name, f)))
        .copied()
        .collect();
    let answer = Answer {
        starting: (todo.iter().take(LISTED_MAX))
            .map(|f| run_id(&workflow, &schedule.name, f))
            .collect(),
        starting_count: todo.len(),
        existing: fires.len() - todo.len(),
        fires: fires.len(),
        workflow,
        schedule: schedule.name.clone(),
        dry_run: asked.dry_run,
    };
    if asked.dry_run {
        return Ok((StatusCode::OK, Json(answer)));
    }
    let parallel = asked.max_parallel as usize;
    tokio::spawn(start_all(
        state.clone(),
        schedule,
        answer.workflow.clone(),
        todo,
        parallel,
    ));
    Ok((StatusCode::ACCEPTED, Json(answer)))
}

/// The schedule named, or the workflow's only one.
fn which<'a>(registered: &'a Registered, name: Option<&str>) -> Result<&'a Schedule, ApiError> {
    let workflow = &registered.spec.name;
    match name {
        Some(name) => (registered.schedules.iter().find(|s| s.name == name)).ok_or_else(|| {
            ApiError::NotFound(format!("workflow `{workflow}` has no schedule `{name}`"))
        }),
        None => match &registered.schedules[..] {
            [only] => Ok(only),
            [] => Err(ApiError::NotFound(format!(
                "workflow `{workflow}` has no schedule"
            ))),
            _ => Err(ApiError::Invalid(format!(
                "workflow `{workflow}` has several schedules: name one"
            ))),
        },
    }
}

/// The fire times of the range, checked.
fn fire_times(schedule: &Schedule, asked: &Backfill) -> Result<Vec<FireTime>, ApiError> {
    if asked.from > asked.to {
        return Err(ApiError::Invalid("from is after to".into()));
    }
    if !(1..=1_000).contains(&asked.max_parallel) {
        return Err(ApiError::Invalid("max_parallel is 1 to 1000".into()));
    }
    let after = asked.from.saturating_sub(1);
    let fires = schedule.cron.fires_between(after, asked.to, FIRES_MAX + 1);
    if fires.len() > FIRES_MAX {
        return Err(ApiError::Invalid(format!(
            "the range holds more than {FIRES_MAX} fire times: backfill it in parts"
        )));
    }
    if fires.len() > FIRES_CONFIRM_OVER && !asked.yes {
        return Err(ApiError::Invalid(format!(
            "the range holds {} fire times, more than {FIRES_CONFIRM_OVER}: confirm with yes",
            fires.len()
        )));
    }
    Ok(fires)
}

/// Starts each fire's run in order, at most `parallel` of them running at once.
async fn start_all(
    state: Arc<AppState>,
    schedule: Schedule,
    workflow: String,
    todo: Vec<FireTime>,
    parallel: usize,
) {
    let clock = Clock::system();
    let mut running: VecDeque<RunId> = VecDeque::new();
    for fire in todo {
        loop {
            let mut still = VecDeque::new();
            for run in running.drain(..) {
                let view = state.inspector.status(&run, None).await;
                if view.is_ok_and(|v| v.state == RunStatus::Running) {
                    still.push_back(run);
                }
            }
            running = still;
            if running.len() < parallel {
                break;
            }
            clock.sleep_until_ms(clock.now_ms() + RETRY_MS).await;
        }
        let registry = state.registry();
        let Some(registered) = registry.get(&workflow) else {
            tracing::warn!(
                workflow,
                "backfill stopped: the workflow is no longer registered"
            );
            return;
        };
        match start(&state, registered, &schedule, &fire).await {
            Fired::Started(run, _) => running.push_back(run),
            Fired::Existed(_) | Fired::Dropped => {}
            Fired::Later => {
                tracing::warn!(workflow, "backfill stopped: the store is out of reach");
                return;
            }
        }
    }
}
