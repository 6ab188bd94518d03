//! What operators see of the dispatcher: its workers and its queue.

use crate::state::State;
use crate::Labels;
use serde::Serialize;
use std::collections::BTreeMap;
use tokio::time::Instant;

/// A worker heard from within the heartbeat timeout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkerView {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: Labels,
    /// Its slots.
    pub slots: u32,
    /// The tries it runs for this engine.
    pub running: u32,
    /// Its version.
    pub version: String,
    /// Milliseconds since its last call.
    pub last_heartbeat_ms_ago: u64,
    /// When it first called (ms since the Unix epoch); 0 for a worker an adoption named
    /// that has not called yet.
    pub connected_since_ms: u64,
}

/// The tries waiting for a worker with one set of labels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QueuedView {
    /// The labels they need.
    pub needs: Labels,
    /// How many wait.
    pub tries: u32,
    /// How long the oldest has waited, in milliseconds.
    pub oldest_ms: u64,
    /// Whether a connected worker carries these labels.
    pub matched: bool,
}

impl State {
    pub(crate) fn workers_view(&self, now: Instant) -> Vec<WorkerView> {
        let mut running: BTreeMap<&str, u32> = BTreeMap::new();
        for task in self.tasks.values() {
            if let Some(worker) = &task.worker {
                *running.entry(worker).or_default() += 1;
            }
        }
        (self.workers.iter())
            .map(|(name, w)| WorkerView {
                name: name.clone(),
                labels: w.hello.labels.clone(),
                slots: w.hello.slots,
                running: running.get(name.as_str()).copied().unwrap_or(0),
                version: w.hello.version.clone(),
                last_heartbeat_ms_ago: now.duration_since(w.last_seen).as_millis() as u64,
                connected_since_ms: w.connected_ms,
            })
            .collect()
    }

    pub(crate) fn queued_view(&self, now: Instant) -> Vec<QueuedView> {
        let mut by_needs: BTreeMap<&[(String, String)], QueuedView> = BTreeMap::new();
        for task in self.queue.iter().filter_map(|t| self.tasks.get(t)) {
            let view = by_needs.entry(&task.needs).or_insert_with(|| QueuedView {
                needs: task.needs.iter().cloned().collect(),
                tries: 0,
                oldest_ms: 0,
                matched: (self.workers.values()).any(|w| {
                    w.heard
                        && task
                            .needs
                            .iter()
                            .all(|(k, v)| w.hello.labels.get(k) == Some(v))
                }),
            });
            view.tries += 1;
            let waited = now.duration_since(task.queued_at).as_millis() as u64;
            view.oldest_ms = view.oldest_ms.max(waited);
        }
        by_needs.into_values().collect()
    }
}
