//! The list of runs, each with its status: read from the store's index of runs, and folded
//! only for runs whose last event changed since the inspector last listed them.

use super::{Inspector, RunView};
use crate::names::Names;
use crate::{EngineError, Store};
use apollo11_core::{EventId, RunId};
use apollo11_machine::RunStatus;
use apollo11_store::RunSummary;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// Which runs [`Inspector::runs`] lists: all by default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunFilter {
    /// Only runs in one of these states (any state when empty).
    pub states: Vec<RunStatus>,
    /// Only runs of this workflow.
    pub workflow: Option<String>,
}

impl RunFilter {
    /// Every run.
    pub fn all() -> RunFilter {
        RunFilter::default()
    }

    /// Also lists runs in `state` (a filter with no state lists every state).
    pub fn state(mut self, state: RunStatus) -> RunFilter {
        self.states.push(state);
        self
    }

    /// Only runs of `workflow`.
    pub fn workflow(mut self, workflow: impl Into<String>) -> RunFilter {
        self.workflow = Some(workflow.into());
        self
    }

    fn admits(&self, state: RunStatus, workflow: &str) -> bool {
        (self.states.is_empty() || self.states.contains(&state))
            && self.workflow.as_ref().is_none_or(|w| w == workflow)
    }
}

/// One run of the list (an element of the server's `GET /api/v1/runs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RunRow {
    /// The run.
    pub run_id: RunId,
    /// Its workflow.
    pub workflow: String,
    /// Its status.
    pub state: RunStatus,
    /// When it was created (ms since the epoch).
    pub created_at: u64,
    /// When its last event was written (ms since the epoch).
    pub updated_at: u64,
    /// How many events it has.
    pub events: u32,
    /// How many steps its workflow has.
    pub steps: usize,
    /// How many are succeeded or skipped.
    pub steps_done: usize,
    /// Its last event.
    pub last_event_id: EventId,
}

/// A run the list could not read, and why.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Unreadable {
    /// The run.
    pub run_id: RunId,
    /// Why it cannot be read.
    pub error: EngineError,
}

/// The runs a filter admits, newest first (by creation, then run id), and those that
/// could not be read (which no filter can admit or reject).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RunList {
    /// The runs.
    pub runs: Vec<RunRow>,
    /// The runs that could not be read, by run id.
    pub unreadable: Vec<Unreadable>,
}

impl From<&RunView> for RunRow {
    fn from(view: &RunView) -> RunRow {
        RunRow {
            run_id: view.run_id.clone(),
            workflow: view.workflow.clone(),
            state: view.state,
            created_at: view.created_at,
            updated_at: view.updated_at,
            events: view.events,
            steps: view.steps.len(),
            steps_done: view.steps_done(),
            last_event_id: view.event_id,
        }
    }
}

/// The rows the inspector keeps between calls, compact: a long-lived server keeps one for
/// every run in its store (about 90 bytes each, where a [`RunRow`] with its two strings
/// takes about 200).
#[derive(Default)]
pub(super) struct Rows {
    /// The workflows' names, which the rows refer to.
    workflows: Names,
    kept: HashMap<Box<str>, Kept>,
}

/// A [`RunRow`] without its run id (the key it is kept under) and with its workflow as an
/// index into [`Rows::workflows`].
struct Kept {
    workflow: u32,
    state: RunStatus,
    events: u32,
    steps: u32,
    steps_done: u32,
    created_at: u64,
    updated_at: u64,
    last_event_id: EventId,
}

impl Rows {
    /// Whether the kept row of `run_id` is as recent as `last`.
    fn current(&self, run_id: &str, last: EventId) -> bool {
        self.kept
            .get(run_id)
            .is_some_and(|k| k.last_event_id == last)
    }

    fn row(&self, run_id: &str, kept: &Kept) -> RunRow {
        RunRow {
            run_id: RunId::from(run_id),
            workflow: self.workflow(kept).to_owned(),
            state: kept.state,
            created_at: kept.created_at,
            updated_at: kept.updated_at,
            events: kept.events,
            steps: kept.steps as usize,
            steps_done: kept.steps_done as usize,
            last_event_id: kept.last_event_id,
        }
    }

    fn workflow(&self, kept: &Kept) -> &str {
        self.workflows.get(kept.workflow).unwrap_or_default()
    }

    /// The kept rows `filter` admits.
    fn admitted<'r>(&'r self, filter: &'r RunFilter) -> impl Iterator<Item = (&'r str, &'r Kept)> {
        (self.kept.iter())
            .filter(|(_, kept)| filter.admits(kept.state, self.workflow(kept)))
            .map(|(run_id, kept)| (&**run_id, kept))
    }

    fn keep(&mut self, row: &RunRow) {
        let kept = Kept {
            workflow: self.workflows.index(&row.workflow),
            state: row.state,
            events: row.events,
            steps: u32::try_from(row.steps).unwrap_or(u32::MAX),
            steps_done: u32::try_from(row.steps_done).unwrap_or(u32::MAX),
            created_at: row.created_at,
            updated_at: row.updated_at,
            last_event_id: row.last_event_id,
        };
        match self.kept.get_mut(row.run_id.as_str()) {
            Some(old) => *old = kept,
            None => {
                self.kept.insert(row.run_id.as_str().into(), kept);
            }
        }
    }

    /// Forgets the rows of `runs`, and gives the table's room back.
    fn forget(&mut self, runs: &[RunId]) {
        for run in runs {
            self.kept.remove(run.as_str());
        }
        self.kept.shrink_to_fit();
    }

    /// Forgets the rows of runs the store no longer lists (removed from it), and gives the
    /// table's room back when that was many. `readable` of the `listed` runs have a row.
    fn forget_all_but(&mut self, listed: &[RunSummary], readable: usize) {
        if self.kept.len() <= readable {
            return;
        }
        let listed: HashSet<&str> = listed.iter().map(|s| s.run_id.as_str()).collect();
        self.kept.retain(|run_id, _| listed.contains(&**run_id));
        self.kept.shrink_to_fit();
    }
}

impl<S: Store> Inspector<S> {
    /// Every run `filter` admits, newest first (by creation, then run id). A run that cannot
    /// be read (its definition, a blob it needs) is set apart in [`RunList::unreadable`] and
    /// the others are listed.
    ///
    /// # Errors
    ///
    /// Store errors from listing the runs.
    pub async fn runs(&self, filter: &RunFilter) -> Result<RunList, EngineError> {
        let unreadable = self.refresh().await?;
        let rows = self.kept_rows();
        let mut runs: Vec<RunRow> = (rows.admitted(filter))
            .map(|(run_id, kept)| rows.row(run_id, kept))
            .collect();
        drop(rows);
        runs.sort_by(|a, b| (b.created_at, &a.run_id).cmp(&(a.created_at, &b.run_id)));
        Ok(RunList { runs, unreadable })
    }

    /// The runs of `summaries` that `filter` admits, newest first, as [`Inspector::runs`]
    /// lists the store's: for lists the store's own does not hold (a file log's archived
    /// runs). Their rows are folded for this call and not kept.
    pub async fn runs_of(&self, summaries: Vec<RunSummary>, filter: &RunFilter) -> RunList {
        let mut list = RunList {
            runs: Vec::new(),
            unreadable: Vec::new(),
        };
        for summary in summaries {
            match self.status(&summary.run_id, None).await {
                Ok(view) if filter.admits(view.state, &view.workflow) => {
                    list.runs.push(RunRow::from(&view));
                }
                Ok(_) => {}
                Err(error) => list.unreadable.push(Unreadable {
                    run_id: summary.run_id,
                    error,
                }),
            }
        }
        (list.runs).sort_by(|a, b| (b.created_at, &a.run_id).cmp(&(a.created_at, &b.run_id)));
        list
    }

    /// One page of the runs `filter` admits, newest first by creation then run id, both
    /// descending: at most `limit` of those that sort after `after` (`(created_at, run_id)`
    /// of the last run of the previous page). Runs that cannot be read are left out. Only
    /// the page's rows are copied out, however many runs the store holds.
    ///
    /// # Errors
    ///
    /// Store errors from listing the runs.
    pub async fn runs_page(
        &self,
        filter: &RunFilter,
        after: Option<(u64, &str)>,
        limit: usize,
    ) -> Result<Vec<RunRow>, EngineError> {
        self.refresh().await?;
        let rows = self.kept_rows();
        let mut page: Vec<(u64, &str, &Kept)> = (rows.admitted(filter))
            .map(|(run_id, kept)| (kept.created_at, run_id, kept))
            .filter(|(at, run_id, _)| after.is_none_or(|after| (*at, *run_id) < after))
            .collect();
        if page.len() > limit {
            page.select_nth_unstable_by(limit, newest_first);
            page.truncate(limit);
        }
        page.sort_unstable_by(newest_first);
        Ok((page.into_iter())
            .map(|(_, run_id, kept)| rows.row(run_id, kept))
            .collect())
    }

    /// Brings the kept rows up to the store: folds again the runs whose last event changed
    /// since they were kept, forgets the runs the store no longer lists and those that
    /// cannot be read, which it returns.
    async fn refresh(&self) -> Result<Vec<Unreadable>, EngineError> {
        let summaries = self.store.list_runs().await?;
        let mut unreadable = Vec::new();
        for summary in &summaries {
            if self
                .kept_rows()
                .current(summary.run_id.as_str(), summary.last_event_id)
            {
                continue;
            }
            match self.status(&summary.run_id, None).await {
                Ok(view) => self.kept_rows().keep(&RunRow::from(&view)),
                Err(error) => {
                    self.kept_rows().kept.remove(summary.run_id.as_str());
                    unreadable.push(Unreadable {
                        run_id: summary.run_id.clone(),
                        error,
                    });
                }
            }
        }
        let readable = summaries.len() - unreadable.len();
        let mut rows = self.kept_rows();
        rows.forget_all_but(&summaries, readable);
        crate::metrics::runs_held(crate::metrics::HELD_BY_INSPECTOR, rows.kept.len());
        Ok(unreadable)
    }

    /// Forgets the rows of `runs`, which a `gc` moved out of the store's live log, at once
    /// (the next listing would, as it forgets every run the store no longer lists).
    pub fn forget(&self, runs: &[RunId]) {
        let mut rows = self.kept_rows();
        rows.forget(runs);
        crate::metrics::runs_held(crate::metrics::HELD_BY_INSPECTOR, rows.kept.len());
    }

    /// How many runs' rows the inspector keeps (each run listed when it last refreshed).
    pub fn runs_held(&self) -> usize {
        self.kept_rows().kept.len()
    }

    fn kept_rows(&self) -> std::sync::MutexGuard<'_, Rows> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Newest first: by creation, then run id, both descending (the API's pages).
fn newest_first(a: &(u64, &str, &Kept), b: &(u64, &str, &Kept)) -> std::cmp::Ordering {
    (b.0, b.1).cmp(&(a.0, a.1))
}
