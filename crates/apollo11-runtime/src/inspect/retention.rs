//! Retention: which runs `gc` may move out of the live log. A pure choice over the rows of
//! [`Inspector::runs`]: only finished runs (succeeded or rolled back) are ever chosen; a
//! running or paused run, and a failed one (its log is anomalous: it waits for an
//! operator's override), always stays.

use super::{Inspector, RunFilter, RunRow};
use crate::{EngineError, Store};
use apollo11_machine::RunStatus;
use std::collections::HashMap;

/// Milliseconds in a day.
const DAY_MS: u64 = 86_400_000;

/// What a retention policy keeps. A run is kept when any rule given keeps it; a finished run
/// that no rule keeps is let go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retention {
    /// Keep runs that ended less than this many days ago (by their last event's time).
    pub keep_days: Option<u32>,
    /// Keep the newest this many runs of each workflow (by creation), whatever their state.
    pub keep_last: Option<u32>,
}

/// Why a run a policy looked at stays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kept {
    /// It is running, paused or failed: never let go.
    NotFinished,
    /// It is among the newest `keep_last` of its workflow.
    Newest,
    /// It ended within `keep_days`.
    Recent,
}

/// What a policy decides over a list of runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetentionPlan {
    /// The runs let go, newest first.
    pub archive: Vec<RunRow>,
    /// How many runs stay, by the first reason that keeps each.
    pub kept: Vec<(Kept, usize)>,
}

impl Retention {
    /// A policy with the rules given.
    ///
    /// # Errors
    ///
    /// A message when no rule is given: a policy without one would let every finished run go,
    /// which nobody should get by leaving a flag out.
    pub fn new(keep_days: Option<u32>, keep_last: Option<u32>) -> Result<Retention, String> {
        if keep_days.is_none() && keep_last.is_none() {
            return Err(
                "no retention policy: give --keep-days or --keep-last, or `keep_days` or \
                 `keep_last` under [retention] in the data dir's apollo11.toml"
                    .into(),
            );
        }
        Ok(Retention {
            keep_days,
            keep_last,
        })
    }

    /// Decides for each of `rows` (newest first, as [`Inspector::runs`] lists them) at
    /// `now_ms`.
    pub fn plan(&self, rows: &[RunRow], now_ms: u64) -> RetentionPlan {
        let mut seen: HashMap<&str, u32> = HashMap::new();
        let mut kept: HashMap<Kept, usize> = HashMap::new();
        let mut archive = Vec::new();
        for row in rows {
            let rank = seen.entry(row.workflow.as_str()).or_default();
            *rank += 1;
            match self.keeps(row, *rank, now_ms) {
                Some(why) => *kept.entry(why).or_default() += 1,
                None => archive.push(row.clone()),
            }
        }
        let mut kept: Vec<(Kept, usize)> = kept.into_iter().collect();
        kept.sort();
        RetentionPlan { archive, kept }
    }

    /// Why the run stays (`rank`: 1 for the newest of its workflow), or `None`.
    fn keeps(&self, row: &RunRow, rank: u32, now_ms: u64) -> Option<Kept> {
        if !matches!(row.state, RunStatus::Succeeded | RunStatus::RolledBack) {
            return Some(Kept::NotFinished);
        }
        if self.keep_last.is_some_and(|n| rank <= n) {
            return Some(Kept::Newest);
        }
        let since_end = now_ms.saturating_sub(row.updated_at);
        if (self.keep_days).is_some_and(|days| since_end < u64::from(days) * DAY_MS) {
            return Some(Kept::Recent);
        }
        None
    }
}

impl<S: Store> Inspector<S> {
    /// What `policy` decides now over every run the store holds (runs that cannot be read
    /// are not listed, so never let go).
    ///
    /// # Errors
    ///
    /// Store errors from listing the runs.
    pub async fn retention(&self, policy: &Retention) -> Result<RetentionPlan, EngineError> {
        let list = self.runs(&RunFilter::all()).await?;
        Ok(policy.plan(&list.runs, self.clock.now_ms()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo11_core::{EventId, RunId};

    const NOW: u64 = 1_000 * DAY_MS;

    /// A run of `workflow` in `state` that ended `days_ago`; rows are built newest first.
    fn row(id: &str, workflow: &str, state: RunStatus, days_ago: u64) -> RunRow {
        RunRow {
            run_id: RunId::from(id),
            workflow: workflow.into(),
            state,
            created_at: NOW - days_ago * DAY_MS - 1,
            updated_at: NOW - days_ago * DAY_MS,
            events: 3,
            steps: 1,
            steps_done: 1,
            last_event_id: EventId(1),
        }
    }

    fn archived(policy: Retention, rows: &[RunRow]) -> Vec<String> {
        let plan = policy.plan(rows, NOW);
        plan.archive.iter().map(|r| r.run_id.to_string()).collect()
    }

    #[test]
    fn no_rule_is_refused() {
        let error = Retention::new(None, None).unwrap_err();
        assert!(error.contains("--keep-days"), "{error}");
        assert!(Retention::new(Some(0), None).is_ok());
    }

    #[test]
    fn a_running_paused_or_failed_run_is_never_let_go() {
        let rows = [
            row("running", "w", RunStatus::Running, 400),
            row("paused", "w", RunStatus::Paused, 400),
            row("failed", "w", RunStatus::Failed, 400),
            row("done", "w", RunStatus::Succeeded, 400),
            row("undone", "w", RunStatus::RolledBack, 400),
        ];
        let policy = Retention::new(Some(0), Some(0)).unwrap();
        assert_eq!(archived(policy, &rows), ["done", "undone"]);
        let plan = policy.plan(&rows, NOW);
        assert_eq!(plan.kept, [(Kept::NotFinished, 3)]);
    }

    #[test]
    fn the_newest_n_of_each_workflow_stay_whatever_their_state() {
        let rows = [
            row("a3", "a", RunStatus::Running, 1),
            row("b2", "b", RunStatus::Succeeded, 2),
            row("a2", "a", RunStatus::Succeeded, 3),
            row("a1", "a", RunStatus::Succeeded, 4),
            row("b1", "b", RunStatus::Succeeded, 5),
        ];
        let policy = Retention::new(None, Some(2)).unwrap();
        // a3 (running) and a2 are a's newest two; b2 and b1 are b's.
        assert_eq!(archived(policy, &rows), ["a1"]);
        let plan = policy.plan(&rows, NOW);
        assert_eq!(plan.kept, [(Kept::NotFinished, 1), (Kept::Newest, 3)]);
    }

    #[test]
    fn runs_that_ended_within_n_days_stay_by_their_end_time() {
        let mut rows = vec![
            row("new", "w", RunStatus::Succeeded, 6),
            row("edge", "w", RunStatus::Succeeded, 7),
        ];
        // Created long ago but ended yesterday: its end time decides.
        let mut long = row("long", "w", RunStatus::Succeeded, 1);
        long.created_at = 0;
        rows.push(long);
        let policy = Retention::new(Some(7), None).unwrap();
        assert_eq!(archived(policy, &rows), ["edge"]);
    }

    #[test]
    fn either_rule_keeps_a_run() {
        let rows = [
            row("r1", "w", RunStatus::Succeeded, 1),
            row("r2", "w", RunStatus::Succeeded, 2),
            row("r3", "w", RunStatus::Succeeded, 30),
            row("r4", "w", RunStatus::Succeeded, 40),
        ];
        let policy = Retention::new(Some(10), Some(1)).unwrap();
        assert_eq!(archived(policy, &rows), ["r3", "r4"]);
        let plan = policy.plan(&rows, NOW);
        assert_eq!(plan.kept, [(Kept::Newest, 1), (Kept::Recent, 1)]);
    }
}
