//! The engine's view of the log: a fold of every event, kept up to date by tailing the log
//! from a watermark (never re-reading it) and saved as a snapshot every N events.
//!
//! It keeps only what no single run's events can answer: each run's workflow (as an index
//! into the workflows' names: a few bytes a run, kept for every run ever created), the start
//! of each step at work (only while it works), and the recent successful durations of each
//! workflow's steps, for `timeout = "auto"`. A run's own state is folded from its events
//! when it is needed (the store reads one run's events straight from its index), so the
//! view, its snapshots and the engine's memory stay small however many events the log holds.

use crate::names::Names;
use apollo11_core::{limits, EventId, EventKind, EventRef, RunId, StepName};
use apollo11_store::{Snapshot, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};

/// The durations `timeout = "auto"` learns from are the latest this many per step.
pub const DURATION_SAMPLES_MAX: usize = 1_000;

/// What the engine knows of every run, and the last event folded into it.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct View {
    /// Last event id folded.
    pub watermark: EventId,
    /// The workflows' names, which `runs` refers to.
    workflows: Names,
    /// Each run's workflow, from its `RunCreated`.
    runs: HashMap<Box<str>, u32>,
    /// The steps at work, by run: when each started (ms). A run leaves it when none is.
    at_work: HashMap<Box<str>, Vec<(StepName, u64)>>,
    /// Recent successful durations (ms), by workflow, then step.
    durations: Durations,
}

type Durations = HashMap<String, HashMap<StepName, VecDeque<u64>>>;

impl View {
    /// Rebuilds a view from a snapshot (an unreadable one, or one of an older layout,
    /// counts as none: the log is folded again from its start).
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

    /// How many runs the view knows.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Forgets `runs` (moved out of the log by a `gc`: their events are no longer folded,
    /// and what the view kept of them would stay until a restart). What their steps taught
    /// `timeout = "auto"` stays.
    pub fn forget(&mut self, runs: &[RunId]) {
        for run in runs {
            self.runs.remove(run.as_str());
            self.at_work.remove(run.as_str());
        }
        self.runs.shrink_to_fit();
        self.at_work.shrink_to_fit();
    }

    /// Folds one event, borrowed (events must come in id order).
    pub fn apply(&mut self, event: &EventRef<'_>) {
        assert!(
            event.event_id > self.watermark,
            "the view folds each event once, in order"
        );
        self.watermark = event.event_id;
        let Some(step) = event.step else {
            if let EventKind::RunCreated { workflow } = &event.kind {
                // A second `RunCreated` is the run's anomaly; the first one names the workflow.
                if !self.runs.contains_key(event.run_id) {
                    let index = self.workflows.index(workflow);
                    self.runs.insert(event.run_id.into(), index);
                }
            }
            return;
        };
        // A step event of a run never created is an anomaly the run's own fold reports; it
        // teaches the view nothing.
        let Some(&workflow) = self.runs.get(event.run_id) else {
            return;
        };
        if let EventKind::Started = &event.kind {
            self.start(event.run_id, step, event.at_ms);
            return;
        }
        let started = self.stop(event.run_id, step);
        if let (EventKind::Succeeded, Some(started)) = (&event.kind, started) {
            let workflow = self.workflows.get(workflow).unwrap_or_default();
            let ms = event.at_ms.saturating_sub(started);
            learn(&mut self.durations, workflow, step, ms);
        }
    }

    /// Records that `step` of `run` started at `at_ms`.
    fn start(&mut self, run: &str, step: &str, at_ms: u64) {
        let steps = match self.at_work.get_mut(run) {
            Some(steps) => steps,
            None => self.at_work.entry(run.into()).or_default(),
        };
        steps.retain(|(name, _)| name.as_str() != step);
        steps.push((StepName::from(step), at_ms));
    }

    /// Forgets that `step` of `run` is at work; returns when it started, if it was.
    fn stop(&mut self, run: &str, step: &str) -> Option<u64> {
        let steps = self.at_work.get_mut(run)?;
        let i = steps.iter().position(|(name, _)| name.as_str() == step)?;
        let (_, started) = steps.swap_remove(i);
        if steps.is_empty() {
            self.at_work.remove(run);
        }
        Some(started)
    }

    /// `timeout = "auto"`: 2× the p99 of the step's recent successful durations in runs of
    /// the same workflow, once there are enough of them; else `fallback_ms`.
    pub fn auto_timeout_ms(&self, workflow: &str, step: &str, fallback_ms: u64) -> u64 {
        let samples = self
            .durations
            .get(workflow)
            .and_then(|steps| steps.get(step));
        let Some(samples) =
            samples.filter(|s| s.len() >= limits::AUTO_TIMEOUT_SAMPLES_MIN as usize)
        else {
            return fallback_ms;
        };
        let mut samples: Vec<u64> = samples.iter().copied().collect();
        samples.sort_unstable();
        let p99 = samples[(samples.len() * 99).div_ceil(100) - 1];
        p99.saturating_mul(2).max(1)
    }
}

/// Adds a successful duration of `step` in a run of `workflow`.
fn learn(durations: &mut Durations, workflow: &str, step: &str, ms: u64) {
    let steps = match durations.get_mut(workflow) {
        Some(steps) => steps,
        None => durations.entry(workflow.to_owned()).or_default(),
    };
    let samples = match steps.get_mut(step) {
        Some(samples) => samples,
        None => steps.entry(StepName::from(step)).or_default(),
    };
    if samples.len() == DURATION_SAMPLES_MAX {
        samples.pop_front();
    }
    samples.push_back(ms);
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo11_core::{PayloadRef, Seq};

    /// Folds `(run, step, kind, at_ms)` events in order.
    fn fold(view: &mut View, events: &[(&str, Option<&str>, EventKind, u64)]) {
        for (run, step, kind, at_ms) in events {
            let id = view.watermark.0 + 1;
            view.apply(&EventRef {
                event_id: EventId(id),
                run_id: run,
                seq: Seq(id as u32),
                step: *step,
                kind: kind.clone(),
                attempt: 1,
                at_ms: *at_ms,
                instance: "test",
                payload: PayloadRef::Empty,
            });
        }
    }

    /// One run of workflow `wf` whose step `s` took `ms`, or failed after `ms`.
    fn run(view: &mut View, name: &str, ms: u64, ok: bool) {
        let end = if ok {
            EventKind::Succeeded
        } else {
            EventKind::AttemptFailed(apollo11_core::AttemptFailure::new(
                apollo11_core::FailureClass::Exit(1),
                "boom",
                false,
            ))
        };
        let created = EventKind::RunCreated {
            workflow: "wf".into(),
        };
        fold(
            view,
            &[
                (name, None, created, 0),
                (name, Some("s"), EventKind::Started, 1_000),
                (name, Some("s"), end, 1_000 + ms),
            ],
        );
    }

    #[test]
    fn auto_timeout_learns_recent_successes_only_and_survives_a_snapshot() {
        let mut view = View::default();
        for i in 0..limits::AUTO_TIMEOUT_SAMPLES_MIN - 1 {
            run(&mut view, &format!("ok-{i}"), 100, true);
        }
        run(&mut view, "failed", 90_000, false);
        assert_eq!(view.auto_timeout_ms("wf", "s", 7), 7, "one sample short");
        run(&mut view, "last", 100, true);
        assert_eq!(
            view.auto_timeout_ms("wf", "s", 7),
            200,
            "failures never count"
        );
        assert_eq!(view.auto_timeout_ms("other", "s", 7), 7);
        // Old slow samples leave the window as new ones arrive.
        for i in 0..DURATION_SAMPLES_MAX {
            run(&mut view, &format!("slow-{i}"), 5_000, true);
        }
        for i in 0..DURATION_SAMPLES_MAX {
            run(&mut view, &format!("fast-{i}"), 10, true);
        }
        assert_eq!(view.auto_timeout_ms("wf", "s", 7), 20);
        let reloaded = View::from_snapshot(Some(view.to_snapshot().unwrap()));
        assert_eq!(reloaded.watermark, view.watermark);
        assert_eq!(reloaded.auto_timeout_ms("wf", "s", 7), 20);
        assert!(reloaded.at_work.is_empty(), "no step is at work");
        assert_eq!(reloaded.runs(), view.runs());
    }

    #[test]
    fn forgotten_runs_leave_the_view_and_its_snapshot_but_not_what_they_taught() {
        let mut view = View::default();
        for i in 0..limits::AUTO_TIMEOUT_SAMPLES_MIN {
            run(&mut view, &format!("ok-{i}"), 100, true);
        }
        let started = EventKind::Started;
        fold(&mut view, &[("ok-0", Some("t"), started, 5)]);
        let runs = view.runs();
        view.forget(&[
            RunId::from("ok-0"),
            RunId::from("ok-1"),
            RunId::from("never"),
        ]);
        assert_eq!(view.runs(), runs - 2);
        assert!(view.at_work.is_empty(), "ok-0's step at work went with it");
        let reloaded = View::from_snapshot(Some(view.to_snapshot().unwrap()));
        assert_eq!(reloaded.runs(), runs - 2);
        assert_eq!(reloaded.auto_timeout_ms("wf", "s", 7), 200);
    }
}
