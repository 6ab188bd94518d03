//! What tries asked to hear once their outcome is durable ([`StepContext::when_recorded`]):
//! a worker keeps a try's result until then, so that an engine that dies before recording
//! it gets it again from the worker rather than losing it.
//!
//! [`StepContext::when_recorded`]: crate::StepContext::when_recorded

use crate::step::RecordedHook;
use crate::{Try, TryKind};
use apollo11_core::KindTag;
use apollo11_store::NewEvent;
use std::collections::HashMap;

/// The hooks of outcomes folded but not yet appended, by try.
#[derive(Default)]
pub(super) struct Hooks(HashMap<Try, RecordedHook>);

impl Hooks {
    /// Calls `hook` once the outcome of `tried` is appended.
    pub fn insert(&mut self, tried: Try, hook: RecordedHook) {
        self.0.insert(tried, hook);
    }

    /// Calls the hooks of the tries whose outcomes `batch` appended.
    pub fn appended(&mut self, batch: &[NewEvent]) {
        for tried in batch.iter().filter_map(outcome_of) {
            if let Some(hook) = self.0.remove(&tried) {
                hook();
            }
        }
    }

    /// Drops, uncalled, the hooks of tries whose outcomes will not be appended.
    pub fn retain(&mut self, keep: impl Fn(&Try) -> bool) {
        self.0.retain(|tried, _| keep(tried));
    }
}

/// The try whose end `event` records, when it records one.
pub(super) fn outcome_of(event: &NewEvent) -> Option<Try> {
    let kind = match event.kind.tag() {
        KindTag::Succeeded | KindTag::Failed => TryKind::Run,
        KindTag::Compensated | KindTag::CompensationFailed => TryKind::Compensation,
        _ => return None,
    };
    let step = event.step.as_ref()?;
    Some(Try::of(step, event.attempt, kind))
}
