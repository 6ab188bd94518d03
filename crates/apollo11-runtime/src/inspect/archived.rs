//! Runs only the store's archive holds (`gc` moved them out of a file log's live data): the
//! inspector lists them beside the live runs, marked, and views them as taking no more
//! events. A store without an archive has none.

use super::{archived_refusal, Inspector, RunFilter, RunList, RunRow, RunView};
use crate::{EngineError, Store};
use apollo11_core::{EventId, RunId, Seq};
use apollo11_machine::RunStatus;
use apollo11_store::Archive;
use std::collections::HashSet;
use std::sync::Arc;

/// A run of a listing that holds archived runs too.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListedRun {
    /// The run.
    pub row: RunRow,
    /// True when only the archive holds it.
    pub archived: bool,
}

impl<S: Store> Inspector<S> {
    /// This inspector, answering about the runs of `archive` too (the store's own archive:
    /// the store reads their events).
    pub fn with_archive(mut self, archive: Arc<dyn Archive>) -> Inspector<S> {
        self.archive = Some(archive);
        self
    }

    /// The runs only the archive holds that `filter` admits, newest first, as
    /// [`Inspector::runs`] lists the live ones (a run also live is not one of them); none
    /// without an archive.
    ///
    /// # Errors
    ///
    /// Store errors from listing the archive's runs or the live ones.
    pub async fn archived_runs(&self, filter: &RunFilter) -> Result<RunList, EngineError> {
        let Some(archive) = &self.archive else {
            return Ok(RunList {
                runs: Vec::new(),
                unreadable: Vec::new(),
            });
        };
        let mut summaries = archive.archived_runs().await?;
        let live = self.store.list_runs().await?;
        let live: HashSet<&RunId> = live.iter().map(|s| &s.run_id).collect();
        summaries.retain(|s| !live.contains(&s.run_id));
        Ok(self.runs_of(summaries, filter).await)
    }

    /// One page of the runs `filter` admits, as [`Inspector::runs_page`], with the runs only
    /// the archive holds among them when `archived` (each marked), in the same order: newest
    /// first by creation then run id, after `after`. Archived runs that cannot be read are
    /// left out.
    ///
    /// # Errors
    ///
    /// Store errors from listing the runs.
    pub async fn runs_page_with(
        &self,
        filter: &RunFilter,
        after: Option<(u64, &str)>,
        limit: usize,
        archived: bool,
    ) -> Result<Vec<ListedRun>, EngineError> {
        let live = self.runs_page(filter, after, limit).await?;
        let mut page: Vec<ListedRun> = (live.into_iter())
            .map(|row| ListedRun {
                row,
                archived: false,
            })
            .collect();
        if archived {
            let rows = self.archived_runs(filter).await?.runs.into_iter();
            page.extend(
                rows.filter(|row| after.is_none_or(|after| key(row) < after))
                    .map(|row| ListedRun {
                        row,
                        archived: true,
                    }),
            );
            page.sort_by(|a, b| key(&b.row).cmp(&key(&a.row)));
            page.truncate(limit);
        }
        Ok(page)
    }

    /// As [`Inspector::status`], marked archived ([`RunView::archived`]: no action allowed)
    /// when only the archive holds the run.
    ///
    /// # Errors
    ///
    /// As [`Inspector::status`].
    pub async fn status_or_archived(
        &self,
        run_id: &RunId,
        at: Option<EventId>,
    ) -> Result<RunView, EngineError> {
        let view = self.status(run_id, at).await?;
        // Only a finished run is archived: a running one needs no look at the archive.
        if view.state != RunStatus::Running && self.is_archived(run_id).await? {
            return Ok(view.archived());
        }
        Ok(view)
    }

    /// Why an action on `run_id` is refused when only the archive holds it (it takes no
    /// more events); `None` for any other run.
    ///
    /// # Errors
    ///
    /// Store errors from reading the run.
    pub async fn refusal_if_archived(&self, run_id: &RunId) -> Result<Option<String>, EngineError> {
        let archived = self.is_archived(run_id).await?;
        Ok(archived.then(|| archived_refusal(run_id)))
    }

    /// Whether only the archive holds `run_id` (never without an archive).
    async fn is_archived(&self, run_id: &RunId) -> Result<bool, EngineError> {
        let Some(archive) = &self.archive else {
            return Ok(false);
        };
        if archive.holds_live(run_id) {
            return Ok(false);
        }
        Ok(self.store.read_event(run_id, Seq(1)).await?.is_some())
    }
}

/// Where a row sorts: by creation, then run id.
fn key(row: &RunRow) -> (u64, &str) {
    (row.created_at, row.run_id.as_str())
}
