//! `GET /api/v1/schedules`: every schedule of the registered workflows, with its next fire
//! times and its last fire, read from the runs that exist, and that run's state.

use super::{newest_run, pause, runs_of};
use crate::server::AppState;
use crate::ApiError;
use apollo11_runtime::{Clock, RunStatus};
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use std::sync::Arc;

/// How many next fire times a schedule shows.
const NEXT_FIRES_SHOWN: usize = 5;

/// The answer.
#[derive(Serialize)]
pub struct ScheduleList {
    schedules: Vec<ScheduleItem>,
}

/// One schedule.
#[derive(Serialize)]
struct ScheduleItem {
    workflow: String,
    name: String,
    cron: String,
    zone: String,
    catch_up: &'static str,
    overlap: &'static str,
    jitter_ms: u64,
    enabled: bool,
    /// The next fire times (ms since the epoch).
    next_fires: Vec<u64>,
    /// The newest fire time that has a run, and that run.
    last_fire: Option<LastFire>,
    /// Whether an operator paused it.
    paused: bool,
    /// Its latest pause or resume, if it ever had one.
    pause: Option<pause::PauseState>,
}

#[derive(Serialize)]
struct LastFire {
    fire_time: u64,
    run_id: String,
    state: Option<RunStatus>,
}

/// `GET /api/v1/schedules`.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
) -> Result<Json<ScheduleList>, ApiError> {
    let now_ms = Clock::system().now_ms();
    let registry = state.registry();
    let mut pauses = pause::states(&state).await?;
    let mut schedules = Vec::new();
    for registered in registry.all() {
        let runs = runs_of(&state, &registered.spec.name).await;
        for schedule in &registered.schedules {
            let workflow = &registered.spec.name;
            let last_fire = match newest_run(&runs, workflow, schedule) {
                None => None,
                Some((run, fire)) => Some(LastFire {
                    fire_time: fire.ms,
                    state: state
                        .inspector
                        .status(&run, None)
                        .await
                        .ok()
                        .map(|v| v.state),
                    run_id: run.0,
                }),
            };
            let pause = pauses.remove(&(workflow.clone(), schedule.name.clone()));
            let next = schedule
                .cron
                .fires_between(now_ms, u64::MAX, NEXT_FIRES_SHOWN);
            schedules.push(ScheduleItem {
                workflow: workflow.clone(),
                name: schedule.name.clone(),
                cron: schedule.cron_text.clone(),
                zone: schedule.cron.zone().to_owned(),
                catch_up: schedule.catch_up.as_str(),
                overlap: schedule.overlap.as_str(),
                jitter_ms: schedule.jitter_ms,
                enabled: schedule.enabled,
                next_fires: next.iter().map(|f| f.ms).collect(),
                last_fire,
                paused: pause.as_ref().is_some_and(|p| p.paused),
                pause,
            });
        }
    }
    Ok(Json(ScheduleList { schedules }))
}
