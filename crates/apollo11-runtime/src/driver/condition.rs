//! Conditions, as the driver acts on them: when `decide` starts a step for its first
//! attempt, the driver judges its condition over the step's scope (see `crate::condition`)
//! before appending anything, and appends what the verdict says in place of the start.

use super::Driver;
use crate::condition::{to_judge, verdict};
use crate::engine::Store;
use apollo11_core::{Payload, StepName};
use apollo11_store::{NewEvent, StoreError};

impl<S: Store> Driver<S> {
    /// The events that take the place of starting attempt `attempt` of `step` when its
    /// condition says it does not run; `None` when it runs (it has no condition, holds, or
    /// was decided before).
    pub(super) async fn unless_condition(
        &self,
        step: &StepName,
        attempt: u32,
    ) -> Result<Option<Vec<NewEvent>>, StoreError> {
        let Some(text) = to_judge(self.step_spec(step), self.state()) else {
            return Ok(None);
        };
        let scope = self.scope_of(step, &mut super::inputs::Read::new()).await?;
        let Some(verdict) = verdict(step, text, &scope) else {
            return Ok(None);
        };
        if let crate::condition::Verdict::Skip(_) = verdict {
            tracing::info!(step = %step, condition = text, "skipping the step: its condition is false");
        }
        let events = verdict.events(attempt).into_iter();
        Ok(Some(
            events
                .map(|(kind, attempt)| self.event(step, kind, attempt, Payload::Empty))
                .collect(),
        ))
    }
}
