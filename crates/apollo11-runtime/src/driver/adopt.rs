//! Tries a dead engine left running that their step can still watch end (a try on a worker
//! that reports in): adopted when the driver starts instead of settled as interrupted, so
//! that a step whose work outlived the engine is not started a second time and its result
//! is recorded once, by this driver.

use super::Driver;
use crate::engine::Store;
use crate::{EngineError, Try, TryKind};
use apollo11_machine::StepStatus;

impl<S: Store> Driver<S> {
    /// Launches a watcher for each try of the run the log shows at work, placed, not
    /// executed here, and adoptable by its step.
    pub(super) async fn adopt_leftovers(&mut self) -> Result<(), EngineError> {
        let mut adopted = Vec::new();
        for (name, s) in &self.state().steps {
            let kind = match s.status {
                StepStatus::Running => TryKind::Run,
                StepStatus::Compensating => TryKind::Compensation,
                _ => continue,
            };
            if s.place.is_none() || self.running.has(name) {
                continue;
            }
            let leftover = self.leftover(name, s.attempt, kind);
            if self.code(name).can_adopt(&leftover) {
                adopted.push((Try::of(name, s.attempt, kind), leftover));
            }
        }
        if adopted.is_empty() {
            return Ok(());
        }
        let tries: Vec<Try> = adopted.iter().map(|(t, _)| t.clone()).collect();
        let prepared = self.prepare(&tries).await?;
        for ((tried, leftover), prepared) in adopted.into_iter().zip(prepared) {
            tracing::info!(step = %tried.step, attempt = tried.attempt, "adopting a try a previous engine left at work");
            self.launch(tried, prepared, Some(leftover));
        }
        Ok(())
    }
}
