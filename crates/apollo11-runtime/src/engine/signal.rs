//! An operator's signal to a waiting step: one `Signalled` event with who and why, its
//! payload the signal's JSON, which ends the step's attempt as a success and becomes its
//! output. Checked with the machine (`check_signal`) against the state its append's seq is
//! stated for, like every operator action: a step that is not waiting refuses it, and
//! nothing is appended then.

use super::operate::Action;
use super::{Engine, Store};
use crate::EngineError;
use apollo11_core::{limits, EventId, EventKind, Payload, RunId, StepName, Value};
use apollo11_machine::{check_signal, Refusal};

impl<S: Store> Engine<S> {
    /// Ends the wait of `step`, a step waiting for a signal, with `data` as its output
    /// (none for `None`), recorded as `Signalled` with who and why (its id is returned). A
    /// driver working on the run picks it up at once; a run no driver works on goes on at
    /// its next [`Engine::resume`].
    ///
    /// # Errors
    ///
    /// [`EngineError::SignalNotAllowed`] when the step does not wait for a signal now (it
    /// runs code, waits for a timer, has not started or is done), also when `data` is
    /// larger than [`limits::SIGNAL_DATA_BYTES_MAX`] as JSON; [`EngineError::UnknownRun`],
    /// [`EngineError::UnknownStep`], [`EngineError::Contended`] and store errors.
    ///
    /// # Panics
    ///
    /// Never: a JSON value always serializes.
    pub async fn signal(
        &self,
        run_id: &RunId,
        step: &str,
        data: Option<&Value>,
        by: &str,
        reason: &str,
    ) -> Result<EventId, EngineError> {
        let refused = |refusal| EngineError::signal_refused(run_id, step, refusal);
        let payload = match data {
            None => Payload::Empty,
            Some(value) => {
                let bytes = serde_json::to_vec(value).expect("a JSON value serializes");
                if bytes.len() > limits::SIGNAL_DATA_BYTES_MAX as usize {
                    return Err(refused(Refusal::DataTooLarge {
                        bytes: bytes.len(),
                        max: limits::SIGNAL_DATA_BYTES_MAX,
                    }));
                }
                self.shared.offload(Payload::inline(bytes)).await?
            }
        };
        self.operate(run_id, |run| {
            let attempt = check_signal(run.state, run.dag, run.policy, step).map_err(refused)?;
            Ok(Action {
                step: Some(StepName::from(step)),
                kind: EventKind::Signalled {
                    by: by.to_owned(),
                    reason: reason.to_owned(),
                },
                attempt,
                payload: payload.clone(),
            })
        })
        .await
    }
}
