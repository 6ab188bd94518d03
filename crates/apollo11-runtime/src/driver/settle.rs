//! Where tries run, and what becomes of one the driver fails without having seen it end.
//!
//! A step records its place (`StepContext::placed`) once its work has started and before
//! the work acts, with, if it likes, what runs there (the event's payload); the driver
//! appends `Placed` and answers only when it is durable. When the driver is about to append
//! the failure of a try it does not watch end (one a dead engine left running, one past its
//! timeout, an interrupted compensation try), it first asks the step to settle it: stop what
//! may still run there and salvage its last marker, which the failure carries to the next
//! attempt; a try past its timeout whose step measures it even then
//! (`StepContext::measures_when_stopped`) is stopped first, and what it used goes just
//! before its failure, as does what a settled try used when its step still knows (the
//! cgroup a dead engine left). A place the step cannot reach fails the try with no marker and pauses the run,
//! with the place in the reason, for a person to make sure the old try stopped before
//! anything runs the step again or compensates it.

use super::Driver;
use crate::engine::Store;
use crate::step::{Leftover, PlaceRequest, Settled};
use crate::{EngineError, Try, TryKind};
use apollo11_core::{EventKind, Payload, StepName};
use apollo11_store::NewEvent;
use std::time::Duration;

/// How long the driver waits for what a try it stops used, once its step promised to
/// measure it then: stopping and measuring a process takes milliseconds.
const MEASURE_WITHIN: Duration = Duration::from_secs(5);

impl<S: Store> Driver<S> {
    /// Appends `Placed` for a try that is still the step's current one and tells the step
    /// once it is durable; a try that is not current is told so and nothing is appended.
    pub(super) async fn place(&mut self, request: PlaceRequest) -> Result<(), EngineError> {
        let PlaceRequest {
            tried,
            place,
            detail,
            ack,
        } = request;
        let Try { step, attempt, .. } = &tried;
        let payload = match self.offload_patiently(Payload::inline(detail)).await {
            Ok(payload) => payload,
            Err(e) => {
                let _ = ack.send(Err(format!("recording what the step runs: {e}")));
                return Err(e.into());
            }
        };
        loop {
            if !self.running.is_mine(&tried) || !self.still_current(&tried) {
                let _ = ack.send(Err(format!(
                    "attempt {attempt} of step `{step}` is no longer current"
                )));
                return Ok(());
            }
            let kind = EventKind::Placed {
                host: place.host.clone(),
                handle: place.handle.clone(),
            };
            let event = self.event(step, kind, *attempt, payload.clone());
            match self.commit(vec![event]).await {
                Ok(true) => {
                    let _ = ack.send(Ok(()));
                    return Ok(());
                }
                // Someone else appended: the state was read again; check the try again.
                Ok(false) => {}
                Err(e) => {
                    let _ = ack.send(Err(format!("recording where the step runs: {e}")));
                    return Err(e.into());
                }
            }
        }
    }

    /// The events that end a try the driver did not see end (`failed`, an event `decide`
    /// made: `Interrupted`, or `Failed` past its timeout, for `tried`): that event with the
    /// marker the step salvaged, or, when the step cannot reach the try, a `RunPaused`
    /// naming the place followed by the event with no marker. A try this driver executes
    /// whose step measures it once stopped has its `AttemptUsage` just before that event.
    pub(super) async fn settled_failure(
        &mut self,
        tried: &Try,
        failed: EventKind,
    ) -> Result<Vec<NewEvent>, EngineError> {
        let Try {
            step,
            attempt,
            kind,
        } = tried.clone();
        let compensation = kind.is_compensation();
        let measured = self.stopped_usage(tried).await;
        let code = self.code(&step);
        let leftover = self.leftover(&step, attempt, kind);
        let place = leftover.place.clone();
        match code.settle(&leftover).await {
            Settled::Stopped { marker, used } => {
                let marker = marker.filter(|m| !compensation && !m.is_empty());
                let payload = match marker {
                    Some(bytes) => self.offload_patiently(Payload::inline(bytes)).await?,
                    None => Payload::Empty,
                };
                let used = measured.or_else(|| Some(self.usage_event(&step, attempt, used?)));
                let end = self.event(&step, failed, attempt, payload);
                Ok(used.into_iter().chain([end]).collect())
            }
            Settled::Unreachable { reason } => {
                let what = if compensation { "compensation of " } else { "" };
                let at =
                    place.map_or_else(String::new, |p| format!(" on {} ({})", p.host, p.handle));
                tracing::warn!(step = %step, attempt, reason = %reason, "a try may still run; pausing the run");
                let pause = self.pause_event(&format!(
                    "the {what}attempt {attempt} of step `{step}` may still run{at}: {reason}; make sure it stopped, then resume the run"
                ));
                let end = self.event(&step, failed, attempt, Payload::Empty);
                Ok([pause].into_iter().chain(measured).chain([end]).collect())
            }
        }
    }

    /// The try `attempt` of `step` of kind `kind` as the log shows it: where it runs (if it
    /// said) and when it started.
    pub(super) fn leftover(&self, step: &StepName, attempt: u32, kind: TryKind) -> Leftover {
        let s = self.state().step(step.as_str());
        let started_ms = match kind {
            TryKind::Run => s.started_ms.unwrap_or(s.since_ms),
            TryKind::Compensation => s.since_ms,
        };
        Leftover {
            run_id: self.run_id().clone(),
            step: step.clone(),
            attempt,
            kind,
            place: s.place.as_deref().cloned(),
            started_ms,
        }
    }

    /// The `AttemptUsage` of `tried` when this driver executes it and its step promised to
    /// measure it once stopped: the try is cancelled (it stops its work) and its record
    /// waited for, at most [`MEASURE_WITHIN`]; `None` otherwise.
    async fn stopped_usage(&self, tried: &Try) -> Option<NewEvent> {
        let meter = self.running.cancel_measured(tried)?;
        let usage = tokio::time::timeout(MEASURE_WITHIN, meter.recorded())
            .await
            .ok()?;
        Some(self.usage_event(&tried.step, tried.attempt, usage))
    }
}
