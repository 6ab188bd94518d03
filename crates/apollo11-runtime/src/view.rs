//! The engine's view of every run: a fold of the whole log kept up to date by tailing it
//! from a watermark (never re-reading it), and saved as a snapshot every N events. It
//! serves recovery (a resumed run starts from it) and `timeout = "auto"` (past durations).

use apollo11_core::{limits, EventId, RunId};
use apollo11_machine::{RunState, StepStatus};
use apollo11_store::{Snapshot, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// All run states and the last event folded into them.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct View {
    /// Last event id folded.
    pub watermark: EventId,
    /// Every run's state.
    pub runs: BTreeMap<RunId, RunState>,
}

impl View {
    /// Rebuilds a view from a snapshot (an unreadable one counts as none).
    pub fn from_snapshot(snapshot: Option<Snapshot>) -> View {
        snapshot
            .and_then(|s| serde_json::from_slice(&s.state).ok())
            .unwrap_or_default()
    }

    /// The view as a snapshot.
    pub fn to_snapshot(&self) -> Result<Snapshot, StoreError> {
        let state = serde_json::to_vec(self).map_err(|e| StoreError::Invalid {
            what: "view".into(),
            reason: e.to_string(),
        })?;
        Ok(Snapshot {
            watermark: self.watermark,
            state,
        })
    }

    /// Folds one event (events must come in id order).
    pub fn apply(&mut self, event: &apollo11_core::Event) {
        assert!(
            event.event_id > self.watermark,
            "the view folds each event once, in order"
        );
        self.runs
            .entry(event.run_id.clone())
            .or_insert_with(|| RunState::new(event.run_id.clone()))
            .apply(event);
        self.watermark = event.event_id;
    }

    /// `timeout = "auto"`: 2× the p99 of the step's successful durations in runs of the same
    /// workflow, once there are enough of them; else `fallback_ms`.
    pub fn auto_timeout_ms(&self, workflow: &str, step: &str, fallback_ms: u64) -> u64 {
        let mut samples: Vec<u64> = self
            .runs
            .values()
            .filter(|r| r.workflow.as_deref() == Some(workflow))
            .filter_map(|r| r.steps.get(step))
            .filter(|s| s.status == StepStatus::Succeeded)
            .filter_map(|s| s.duration_ms)
            .collect();
        if samples.len() < limits::AUTO_TIMEOUT_SAMPLES_MIN as usize {
            return fallback_ms;
        }
        samples.sort_unstable();
        let p99 = samples[(samples.len() * 99).div_ceil(100) - 1];
        p99.saturating_mul(2).max(1)
    }
}
