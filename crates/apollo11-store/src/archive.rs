//! Runs a backend moved out of its live data into an archive it still reads them from (the
//! file log's `gc`): listed apart from the live runs, and taking no more events.

use crate::{RunSummary, StoreError};
use apollo11_core::RunId;
use async_trait::async_trait;

/// A store's archive of runs. Its store reads an archived run's events as a live one's, but
/// lists only the live runs; a backend without an archive (PostgreSQL) has no `Archive`.
#[async_trait]
pub trait Archive: Send + Sync {
    /// The runs the archive holds (some may be live as well).
    ///
    /// # Errors
    ///
    /// The store's errors reading its archive (damage names its file and offset).
    async fn archived_runs(&self) -> Result<Vec<RunSummary>, StoreError>;

    /// Whether the live data holds `run_id`, which then is no archived run.
    fn holds_live(&self, run_id: &RunId) -> bool;
}
