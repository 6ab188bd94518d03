//! Conditions: a step with one is started only when it holds. When `decide` starts a step
//! for its first attempt, the driver evaluates its condition over the step's scope (the
//! run's arguments, the outputs and statuses of the steps it may read, its item) before
//! appending anything: false appends `Skipped` naming the condition, and the step's
//! dependents go on as after a success; an expression that cannot be evaluated (values of
//! two types compared, a field that is not there) appends `Started` and a `Failed` no retry
//! can cure, naming the condition and why. Retries and reruns do not evaluate it again: it
//! decided once whether the step runs.

use super::{clip, Driver};
use crate::engine::Store;
use apollo11_author::Condition;
use apollo11_core::{EventKind, Payload, StepName};
use apollo11_machine::StepStatus;
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
        let spec = self.step_spec(step);
        let Some(text) = spec.condition.as_deref() else {
            return Ok(None);
        };
        if self.state().step(step.as_str()).status != StepStatus::Pending {
            return Ok(None);
        }
        let scope = self.scope_of(step, &mut super::inputs::Read::new()).await?;
        let failed = |why: String| {
            let kind = EventKind::Failed {
                error: clip(&format!("the condition `{text}` of step `{step}` {why}")),
                retryable: false,
            };
            vec![
                self.event(step, EventKind::Started, attempt, Payload::Empty),
                self.event(step, kind, attempt, Payload::Empty),
            ]
        };
        let held = Condition::parse(text).and_then(|c| c.eval(&scope));
        Ok(match held {
            Ok(true) => None,
            Ok(false) => {
                tracing::info!(step = %step, condition = text, "skipping the step: its condition is false");
                let reason = clip(&format!("condition `{text}` is false"));
                let skipped = EventKind::Skipped { reason };
                Some(vec![self.event(step, skipped, attempt - 1, Payload::Empty)])
            }
            Err(e) => Some(failed(e.to_string())),
        })
    }
}
