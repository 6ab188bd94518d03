//! The crash child's `gc` on the file log: while it drives its generation, the runs of
//! earlier generations (all finished: a generation starts once the one before finished) are
//! moved out of the live segments every few milliseconds, so the parent's kills land during
//! collects too; and the check reads every run, live or archived, each exactly once.

use apollo11_core::{Event, RunId, Seq};
use apollo11_log::FileLog;
use apollo11_store::{EventStore, StoreError};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// The generation a run id (`gNNN-rR`) belongs to.
fn generation_of(run: &RunId) -> usize {
    run.0[1..4]
        .parse()
        .expect("crash child run ids are gNNN-rR")
}

/// Collects the runs of generations before `generation` still in the live log, again and
/// again; returns only on an error.
pub async fn collect_finished(log: Arc<FileLog>, generation: usize) -> StoreError {
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let runs = match log.list_runs().await {
            Ok(runs) => runs,
            Err(e) => return e,
        };
        let runs: Vec<RunId> = (runs.into_iter().map(|r| r.run_id))
            .filter(|r| generation_of(r) < generation)
            .collect();
        if runs.is_empty() {
            continue;
        }
        let worker = log.clone();
        let collected = tokio::task::spawn_blocking(move || worker.collect(&runs));
        if let Err(e) = collected.await.expect("a collect panicked") {
            return e;
        }
    }
}

/// Every event of the log, live or archived, in id order; panics when a run is both.
pub async fn all_events(log: &FileLog, live: Vec<Event>) -> Vec<Event> {
    let live_runs: BTreeSet<&RunId> = live.iter().map(|e| &e.run_id).collect();
    let mut archived = Vec::new();
    for run in log.archived_runs().await.expect("I5: the archive reads") {
        assert!(
            !live_runs.contains(&run.run_id),
            "run {} is both live and archived",
            run.run_id
        );
        archived.extend(log.read_run(&run.run_id, Seq(1)).await.expect("I5"));
    }
    let mut events = live;
    events.extend(archived);
    events.sort_by_key(|e| e.event_id);
    events
}
