//! What a step's condition says of its first start: the one answer the driver acts on and
//! the inspector's plan predicts. A condition is judged once, when its step, pending, is
//! about to start for the first time; retries and reruns do not judge it again. False skips
//! the step, naming the condition; an expression that cannot be evaluated (values of two
//! types compared, a field that is not there) fails it for good, naming the condition and
//! why.

use crate::driver::clip;
use apollo11_author::{Condition, Scope};
use apollo11_core::{AttemptFailure, EventKind, FailureClass, ItemSource, StepName, StepSpec};
use apollo11_machine::{RunState, StepStatus};

/// What takes the place of a step's start when its condition says it does not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Skip it: the condition is false (the reason says so).
    Skip(String),
    /// Fail it for good: the condition cannot be evaluated (the error says why).
    Fail(String),
}

/// The condition to judge before starting `step` now: its own, while it is pending and
/// was never judged; `None` otherwise, and for a template (its condition is its items').
pub(crate) fn to_judge<'s>(spec: &'s StepSpec, state: &RunState) -> Option<&'s str> {
    if is_template(spec) {
        return None;
    }
    let text = spec.condition.as_deref()?;
    (state.step(&spec.name).status == StepStatus::Pending).then_some(text)
}

/// What the condition `text` of `step` says over `scope`: `None` when the step runs.
pub(crate) fn verdict(step: &StepName, text: &str, scope: &Scope) -> Option<Verdict> {
    match Condition::parse(text).and_then(|c| c.eval(scope)) {
        Ok(true) => None,
        Ok(false) => Some(Verdict::Skip(clip(&format!("condition `{text}` is false")))),
        Err(e) => Some(Verdict::Fail(clip(&format!(
            "the condition `{text}` of step `{step}` {e}"
        )))),
    }
}

/// Whether `spec` is a template: a `for_each` over a step's output, expanded when it starts.
pub(crate) fn is_template(spec: &StepSpec) -> bool {
    let for_each = spec.for_each.as_ref();
    for_each.is_some_and(|f| matches!(f.items, ItemSource::Output { .. }))
}

impl Verdict {
    /// The events it appends in place of starting attempt `attempt`, each with its attempt:
    /// a `Skipped` (before the attempt), or a `Started` and a `Failed` no retry can cure.
    pub(crate) fn events(&self, attempt: u32) -> Vec<(EventKind, u32)> {
        match self {
            Verdict::Skip(reason) => {
                let reason = reason.clone();
                vec![(EventKind::Skipped { reason }, attempt - 1)]
            }
            Verdict::Fail(error) => {
                let failed = EventKind::AttemptFailed(AttemptFailure::new(
                    FailureClass::Error,
                    error.clone(),
                    false,
                ));
                vec![(EventKind::Started, attempt), (failed, attempt)]
            }
        }
    }
}
