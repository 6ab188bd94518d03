//! What one driver tells the engine's gauges of its run: running while it drives, the
//! status it ended in, and the run's pending compensations as they change.

use crate::metrics::{self, RunGauges};
use apollo11_core::{Event, RunId};

use apollo11_machine::{RunState, RunStatus};
use std::sync::Arc;

/// The gauges' count of one driven run.
pub(super) struct Counted {
    gauges: Arc<RunGauges>,
    run_id: RunId,
    /// Steps of the run whose compensation is pending, as the gauges count them.
    pending: u32,
    /// Whether the gauges count the run (not when it was finished before the driver began).
    counted: bool,
    /// Set when the run reached a terminal status; a driver dropped before that (an error,
    /// an abort) stops counting its run.
    finished: bool,
}

impl Counted {
    /// Counts a run about to be driven from `state`, unless it is `finished` already (it
    /// was counted when it finished, or before the engine opened).
    pub fn new(gauges: Arc<RunGauges>, state: &RunState, finished: bool) -> Counted {
        let counted = Counted {
            gauges,
            run_id: state.run_id.clone(),
            pending: metrics::pending_in(state),
            counted: !finished,
            finished: false,
        };
        counted.show(RunStatus::Running);
        counted
    }

    /// Counts a step's compensation that folding an event made pending (`before` false,
    /// `after` true) or ended (the reverse); see [`step_pending`].
    pub fn folded(&mut self, before: bool, after: bool) {
        match (before, after) {
            (false, true) => self.set_pending(self.pending + 1),
            (true, false) => self.set_pending(self.pending - 1),
            _ => {}
        }
    }

    /// Counts the pending compensations of a state read afresh.
    pub fn recount(&mut self, state: &RunState) {
        self.set_pending(metrics::pending_in(state));
    }

    /// The run reached `status`.
    pub fn finished(&mut self, status: RunStatus) {
        self.finished = true;
        self.show(status);
    }

    fn set_pending(&mut self, pending: u32) {
        if pending != self.pending {
            self.pending = pending;
            self.show(RunStatus::Running);
        }
    }

    fn show(&self, status: RunStatus) {
        if self.counted {
            self.gauges.seen(&self.run_id, status, self.pending);
        }
    }
}

impl Drop for Counted {
    /// A run whose driver stopped without a status (an error, an abort) is no longer
    /// counted: nothing knows its status until something drives it again.
    fn drop(&mut self) {
        if !self.finished && self.counted {
            self.gauges.forget(&self.run_id);
        }
    }
}

/// Whether the compensation of the step `event` names is pending in `state`.
pub(super) fn step_pending(state: &RunState, event: &Event) -> bool {
    let step = event.step.as_ref().map(|s| state.status(s.as_str()));
    step.is_some_and(metrics::compensation_pending)
}
