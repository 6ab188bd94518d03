//! Schedules fired: each enabled schedule of each registered workflow starts one run per
//! fire time. The run's id is derived from the workflow, the schedule and the fire time
//! (`WORKFLOW-SCHEDULE-20261206T030000Z`), so the store refuses a second start of one fire:
//! after a restart, on another instance sharing the database, after a crash between
//! deciding and creating. The run pins which schedule and fire time started it
//! (`started_by.*` attributes, shown in its view).
//!
//! What happened before this process started is read from the runs that exist: the newest
//! run of a schedule is its last fire, and the fire times after it up to now are caught up
//! as the schedule's `catch_up` says. Fire times are read on the engine's clock.
//!
//! A schedule an operator paused (a control of the store, read every round) fires nothing;
//! resumed, it catches up as at a start.

mod backfill;
mod metrics;
mod pause;
mod view;

pub(crate) use backfill::backfill;
pub use metrics::{describe, HISTOGRAM_BUCKETS};
use pause::PauseStates;
pub(crate) use pause::{pause, resume};
pub(crate) use view::list;

use crate::drive::{self, Rested, Start};
use crate::server::AppState;
use crate::workflows::{Registered, Registry};
use crate::ApiError;
use apollo11_runtime::inspect::{RunFilter, STARTED_BY};
use apollo11_runtime::{Clock, RunId, RunStatus};
use apollo11_schedule::{jitter_ms, FireTime, Overlap};
use apollo11_shell::definition::{Schedule, CATCH_UP_MAX};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// The definition attribute naming the schedule that started a run.
pub fn schedule_attribute() -> String {
    format!("{STARTED_BY}schedule")
}

/// The definition attribute holding the fire time that started a run (RFC 3339, UTC).
pub fn fire_time_attribute() -> String {
    format!("{STARTED_BY}fire_time")
}

/// The longest a round sleeps: a reload of the workflows is seen within it.
const ROUND_MAX_MS: u64 = 1_000;
/// How soon a round comes back for a fire that waits (a run to end, the store to answer).
const RETRY_MS: u64 = 200;

/// The run a fire of `schedule` of `workflow` starts.
pub fn run_id(workflow: &str, schedule: &str, fire: &FireTime) -> String {
    apollo11_shell::run_folder::run_id_of(workflow, &format!("{schedule}-{}", fire.stamp()))
}

/// Where one schedule stands in this process.
struct Track {
    /// The newest fire time taken in hand.
    last_ms: u64,
    /// The run of the newest fire that has one (by this instance or another).
    last_run: Option<RunId>,
    /// How `last_run` came to rest, when this process started it.
    rested: Option<Rested>,
    /// Fire times taken in hand, not started yet (caught up, or queued behind a run), each
    /// with whether it was caught up after downtime.
    pending: VecDeque<(FireTime, bool)>,
}

/// Fires the schedules of the registered workflows until aborted.
pub async fn fire_rounds(state: Arc<AppState>) {
    let clock = Clock::system();
    let mut tracks: BTreeMap<(String, String), Track> = BTreeMap::new();
    let mut paused = PauseStates::new();
    loop {
        let registry = state.registry();
        let wake = clock.now_ms() + ROUND_MAX_MS;
        match pause::states(&state).await {
            Ok(read) => paused = read,
            Err(e) => tracing::warn!(error = %e, "paused schedules not read: as they were"),
        }
        let is_paused = |key: &(String, String)| paused.get(key).is_some_and(|p| p.paused);
        // A schedule removed, disabled by a reload or paused is forgotten: seen again, it
        // catches up as at a start.
        tracks.retain(|key @ (workflow, name), _| {
            !is_paused(key) && enabled(&registry, workflow, name).is_some()
        });
        for registered in registry.all() {
            // The workflow's runs, read once for the schedules of it first seen.
            let mut runs = None;
            for schedule in registered.schedules.iter().filter(|s| s.enabled) {
                let key = (registered.spec.name.clone(), schedule.name.clone());
                metrics::paused(&key.0, &key.1, is_paused(&key));
                if is_paused(&key) {
                    continue;
                }
                if let Entry::Vacant(new) = tracks.entry(key) {
                    if runs.is_none() {
                        runs = Some(runs_of(&state, &registered.spec.name).await);
                    }
                    let runs = runs.as_ref().expect("read just now");
                    new.insert(first_sight(runs, registered, schedule, clock.now_ms()));
                }
            }
        }
        // Side by side: each schedule's fires are its own, and starts made at once share
        // the store's commits.
        let rounds = tracks.iter_mut().filter_map(|((workflow, name), track)| {
            let (registered, schedule) = enabled(&registry, workflow, name)?;
            let (state, clock) = (&state, &clock);
            Some(async move {
                let due = round(state, registered, schedule, track, clock).await;
                let next = next_due(registered, schedule, track);
                metrics::standing(workflow, name, next, track.pending.len());
                due
            })
        });
        let due = futures_util::future::join_all(rounds).await;
        clock
            .sleep_until_ms(due.into_iter().fold(wake, u64::min))
            .await;
    }
}

/// The workflow `workflow` and its schedule `name`, if registered and enabled.
fn enabled<'r>(
    registry: &'r Registry,
    workflow: &str,
    name: &str,
) -> Option<(&'r Registered, &'r Schedule)> {
    let registered = registry.get(workflow)?;
    let schedule = (registered.schedules.iter()).find(|s| s.enabled && s.name == name)?;
    Some((registered, schedule))
}

/// A schedule first seen: its last fire read from the runs that exist, and the fire times
/// missed since caught up as its `catch_up` says. Without any run of it, nothing is missed.
fn first_sight(
    runs: &BTreeSet<String>,
    registered: &Registered,
    schedule: &Schedule,
    now_ms: u64,
) -> Track {
    let workflow = &registered.spec.name;
    let newest = newest_run(runs, workflow, schedule);
    let Some((run, last)) = newest else {
        return Track {
            last_ms: now_ms,
            last_run: None,
            rested: None,
            pending: VecDeque::new(),
        };
    };
    let due = schedule.catch_up.due(&schedule.cron, last.ms, now_ms);
    metrics::missed(workflow, &schedule.name, due.missed);
    if due.missed > 0 || !due.fire.is_empty() {
        tracing::info!(
            workflow, schedule = %schedule.name, catch_up = schedule.catch_up.as_str(),
            starting = due.fire.len(), missed = due.missed, "fire times missed while down"
        );
    }
    Track {
        last_ms: now_ms,
        last_run: Some(run),
        rested: None,
        pending: due.fire.into_iter().map(|f| (f, true)).collect(),
    }
}

/// The newest run a fire of `schedule` started among `runs` (its workflow's), by its id,
/// and that fire time.
fn newest_run(
    runs: &BTreeSet<String>,
    workflow: &str,
    schedule: &Schedule,
) -> Option<(RunId, FireTime)> {
    let sample = schedule.cron.next_after(0)?;
    let sample_id = run_id(workflow, &schedule.name, &sample);
    let prefix = sample_id.strip_suffix(&sample.stamp())?;
    (runs.iter())
        .filter_map(|id| {
            let fire = schedule.cron.at_stamp(id.strip_prefix(prefix)?)?;
            Some((RunId(id.clone()), fire))
        })
        .max_by_key(|(_, fire)| fire.ms)
}

/// The ids of the runs of `workflow`; none when they cannot be read (logged: no schedule
/// of it catches up then).
async fn runs_of(state: &AppState, workflow: &str) -> BTreeSet<String> {
    existing_runs(state, workflow).await.unwrap_or_else(|e| {
        tracing::warn!(workflow, error = %e.message(), "runs not read: no schedule catches up");
        BTreeSet::new()
    })
}

/// The ids of the runs of `workflow`.
async fn existing_runs(state: &AppState, workflow: &str) -> Result<BTreeSet<String>, ApiError> {
    let list = state
        .inspector
        .runs(&RunFilter::all().workflow(workflow))
        .await?;
    Ok(list.runs.into_iter().map(|row| row.run_id.0).collect())
}

/// One round of a schedule: the fire times now due taken in hand, those taken started as
/// its `overlap` lets them. Returns when it is next due.
async fn round(
    state: &Arc<AppState>,
    registered: &Registered,
    schedule: &Schedule,
    track: &mut Track,
    clock: &Clock,
) -> u64 {
    let workflow = &registered.spec.name;
    let now = clock.now_ms();
    for fire in schedule
        .cron
        .fires_between(track.last_ms, now, CATCH_UP_MAX)
    {
        if due_ms(workflow, schedule, &fire) > now {
            break;
        }
        track.last_ms = fire.ms;
        track.pending.push_back((fire, false));
    }
    while let Some(&(fire, caught_up)) = track.pending.front() {
        let busy = match schedule.overlap {
            Overlap::Allow => false,
            Overlap::Skip | Overlap::Queue => still_going(state, track).await,
        };
        // A fire caught up after downtime is never skipped: it waits, as under `queue`.
        match (busy, schedule.overlap == Overlap::Queue || caught_up) {
            (true, true) => return now + RETRY_MS,
            (true, false) => {
                track.pending.pop_front();
                metrics::skipped(workflow, &schedule.name);
                tracing::info!(workflow, schedule = %schedule.name, fire = %fire.utc_text(),
                    "fire skipped: the schedule's last run is still going");
            }
            (false, _) => match start(state, registered, schedule, &fire).await {
                Fired::Started(run, rested) => {
                    let lag_ms = clock
                        .now_ms()
                        .saturating_sub(due_ms(workflow, schedule, &fire));
                    metrics::fired(workflow, &schedule.name, &fire, lag_ms);
                    track.pending.pop_front();
                    (track.last_run, track.rested) = (Some(run), Some(rested));
                }
                Fired::Existed(run) => {
                    track.pending.pop_front();
                    (track.last_run, track.rested) = (Some(run), None);
                }
                Fired::Dropped => {
                    track.pending.pop_front();
                }
                Fired::Later => return now + RETRY_MS,
            },
        }
    }
    next_due(registered, schedule, track)
}

/// When the fire after the newest taken in hand is due.
fn next_due(registered: &Registered, schedule: &Schedule, track: &Track) -> u64 {
    let workflow = &registered.spec.name;
    (schedule.cron.next_after(track.last_ms))
        .map_or(u64::MAX, |next| due_ms(workflow, schedule, &next))
}

/// When a fire is due: its time and its jitter, the same on every instance.
fn due_ms(workflow: &str, schedule: &Schedule, fire: &FireTime) -> u64 {
    let key = format!("{workflow}/{}/{}", schedule.name, fire.stamp());
    fire.ms + jitter_ms(&key, schedule.jitter_ms)
}

/// Whether the schedule's last run is still running (a paused run waits for a person, not
/// for the next fire). A run this process drives, or started and saw rest, is known here;
/// another instance's run, or one whose driver stopped on an error, is read from the store.
async fn still_going(state: &AppState, track: &Track) -> bool {
    let Some(run) = &track.last_run else {
        return false;
    };
    if state.engine.drives(run) {
        return true;
    }
    if track.rested.as_ref().and_then(|r| r.get()) == Some(&true) {
        return false;
    }
    match state.inspector.status(run, None).await {
        Ok(view) => view.state == RunStatus::Running,
        Err(e) => {
            tracing::warn!(run = %run, error = %e, "schedule's last run not read");
            false
        }
    }
}

/// What a fire's start came to.
enum Fired {
    /// This process created its run, and says when it rests.
    Started(RunId, Rested),
    /// Its run exists (created before a restart, or by another instance).
    Existed(RunId),
    /// It cannot start (its parameters are refused): logged, never tried again.
    Dropped,
    /// Not now (the store is out of reach): tried again.
    Later,
}

/// Starts the run of `fire`, pinning the schedule and the fire time, on a task of its own:
/// the fires due at once start side by side on every worker of the runtime.
async fn start(
    state: &Arc<AppState>,
    registered: &Registered,
    schedule: &Schedule,
    fire: &FireTime,
) -> Fired {
    let workflow = registered.spec.name.clone();
    let id = run_id(&workflow, &schedule.name, fire);
    let params = match schedule.params_at(&registered.spec.params, *fire) {
        Ok(params) => params,
        Err(e) => {
            tracing::warn!(workflow, schedule = %schedule.name, error = %e, "fire not started");
            return Fired::Dropped;
        }
    };
    let attributes = BTreeMap::from([
        (schedule_attribute(), schedule.name.clone()),
        (fire_time_attribute(), fire.utc_text()),
    ]);
    let (state, task_id) = (state.clone(), id.clone());
    let started = drive::detached(async move {
        let asked = Start {
            name: &workflow,
            run_id: Some(task_id),
            digest: None,
            params: &params,
            request: None,
            attributes,
        };
        drive::start(&state, asked).await
    })
    .await;
    let (workflow, name) = (&registered.spec.name, &schedule.name);
    match started {
        Ok((run, Some(rested))) => {
            tracing::info!(workflow, schedule = %name, run = %run, "schedule fired");
            Fired::Started(run, rested)
        }
        Ok((run, None)) => Fired::Existed(run),
        Err(ApiError::Conflict(_)) => Fired::Existed(RunId(id)),
        Err(e @ (ApiError::Unavailable(_) | ApiError::Internal(_))) => {
            tracing::warn!(run = %id, error = %e.message(), "fire not started yet; retrying");
            Fired::Later
        }
        Err(e) => {
            tracing::warn!(run = %id, error = %e.message(), "fire not started");
            Fired::Dropped
        }
    }
}
