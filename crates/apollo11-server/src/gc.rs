//! `serve --gc-every`: on the file log, every period, the retention policy's plan
//! (`Inspector::retention`) archived by the server's own writer (`FileLog::collect`), so a
//! server holding the data dir needs no `apollo11 gc` (which its lock refuses). A round that
//! archived runs is traced at `info`; a failed one at `warn`, and the next tried at the next
//! period. After a round, the engine and the inspector forget the moved runs (read from the
//! archive on demand), so a server archiving for months keeps in memory only the runs of its
//! live log.

use crate::server::AppState;
use apollo11_log::{FileLog, RunId};
use apollo11_runtime::inspect::Retention;
use std::sync::Arc;
use std::time::Duration;

/// When and by which policy a server archives finished runs.
#[derive(Clone, Debug)]
pub struct GcSchedule {
    /// The time between rounds (the first one after it too).
    pub every: Duration,
    /// The runs it lets go are archived.
    pub policy: Retention,
}

/// Runs rounds until the server closes.
pub(crate) async fn rounds(state: Arc<AppState>, log: Arc<FileLog>, schedule: GcSchedule) {
    let mut closing = state.closing.clone();
    loop {
        tokio::select! {
            () = tokio::time::sleep(schedule.every) => {}
            _ = closing.changed() => return,
        }
        if let Err(error) = round(&state, &log, &schedule.policy).await {
            tracing::warn!(%error, "gc round failed; the next one is tried in its turn");
        }
    }
}

/// One round: plans by the policy, then collects.
async fn round(state: &AppState, log: &Arc<FileLog>, policy: &Retention) -> Result<(), String> {
    let plan = (state.inspector.retention(policy).await).map_err(|e| e.to_string())?;
    if plan.archive.is_empty() {
        return Ok(());
    }
    let runs: Vec<RunId> = plan.archive.iter().map(|row| row.run_id.clone()).collect();
    let worker = log.clone();
    let collected = tokio::task::spawn_blocking(move || worker.collect(&runs))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    // The moved runs are read from the archive on demand: what the engine and the
    // inspector keep of them would otherwise stay until a restart.
    state.engine.forget(&collected.moved).await;
    state.inspector.forget(&collected.moved);
    tracing::info!(
        moved = collected.moved.len(),
        events = collected.events,
        left = collected.left.len(),
        live_bytes_before = collected.live_bytes_before,
        live_bytes_after = collected.live_bytes_after,
        pause_ms = collected.pause.as_millis() as u64,
        "gc round"
    );
    Ok(())
}
