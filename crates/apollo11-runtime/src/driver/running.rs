//! The tries a driver executes: at most one per step, each with what stops it.

use crate::step::Meter;
use crate::tries::Try;
use apollo11_core::StepName;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::{AbortHandle, Id};

/// A try being executed.
struct Execution {
    tried: Try,
    cancel: watch::Sender<bool>,
    abort: Option<AbortHandle>,
    meter: Arc<Meter>,
}

/// The run's tries at work in this driver, by step.
#[derive(Default)]
pub(super) struct Running {
    by_step: BTreeMap<StepName, Execution>,
}

impl Running {
    /// Records `tried` as executed by the task `abort` stops, cancelled through `cancel`,
    /// recording what it used in `meter`.
    pub fn insert(
        &mut self,
        tried: Try,
        cancel: watch::Sender<bool>,
        abort: Option<AbortHandle>,
        meter: Arc<Meter>,
    ) {
        let step = tried.step.clone();
        let execution = Execution {
            tried,
            cancel,
            abort,
            meter,
        };
        self.by_step.insert(step, execution);
    }

    /// Whether `tried` is the try this driver executes for its step.
    pub fn is_mine(&self, tried: &Try) -> bool {
        self.by_step
            .get(&tried.step)
            .is_some_and(|e| e.tried == *tried)
    }

    /// The try the task `id` executes, while it is the current one of its step.
    pub fn of_task(&self, id: Id) -> Option<Try> {
        let mut executions = self.by_step.values();
        executions
            .find(|e| e.abort.as_ref().is_some_and(|a| a.id() == id))
            .map(|e| e.tried.clone())
    }

    /// Whether the step has a try at work.
    pub fn has(&self, step: &StepName) -> bool {
        self.by_step.contains_key(step)
    }

    /// The tries at work.
    pub fn tries(&self) -> impl Iterator<Item = &Try> {
        self.by_step.values().map(|e| &e.tried)
    }

    /// The steps with a try at work.
    pub fn steps(&self) -> BTreeSet<StepName> {
        self.by_step.keys().cloned().collect()
    }

    /// Whether no try is at work.
    pub fn is_empty(&self) -> bool {
        self.by_step.is_empty()
    }

    /// Forgets the step's try, which ended.
    pub fn remove(&mut self, step: &StepName) {
        self.by_step.remove(step);
    }

    /// Cancels `tried`, when it is the try at work for its step and its step promised to
    /// measure it once stopped, and answers where it records that; it is not forgotten (the
    /// driver stops it once its end is durable).
    pub fn cancel_measured(&self, tried: &Try) -> Option<Arc<Meter>> {
        let execution = (self.by_step.get(&tried.step)).filter(|e| e.tried == *tried)?;
        if !execution.meter.promised() {
            return None;
        }
        let _ = execution.cancel.send(true);
        Some(execution.meter.clone())
    }

    /// Cancels and aborts the step's try, if one is at work.
    pub fn stop(&mut self, step: &StepName) {
        if let Some(execution) = self.by_step.remove(step) {
            let _ = execution.cancel.send(true);
            if let Some(abort) = execution.abort {
                abort.abort();
            }
        }
    }
}
