//! The retry decision after a failed attempt: by the failure's class, the policy that class
//! takes (its attempts and backoff, or never), and whether the same failure repeats itself.
//! Pure: the same step state and policy give the same answer at write time (the note a
//! `Failed` event records) and at every fold after.

use crate::{retry_delay_ms, Failure, StepState};
use apollo11_core::{AttemptFailure, ClassPolicy, RetryPolicy};

/// The delay from `failure`, the last of a step at its attempt `attempt`, to its next
/// attempt: the delay the step asked for, up to its class's `max_ms`; else by the policy
/// of the failure's class (the step's own for a class never retried), jittered by the hash
/// of `run_id`, `step` and the attempt.
pub fn delay_ms(
    failure: &Failure,
    policy: &RetryPolicy,
    run_id: &str,
    step: &str,
    attempt: u32,
) -> u64 {
    let retry = match policy.class(&failure.class) {
        ClassPolicy::Retry(retry) => retry,
        ClassPolicy::Never(_) => policy.clone(),
    };
    match failure.retry_after_ms {
        Some(asked) => asked.min(retry.max_ms.max(retry.initial_ms)),
        None => retry_delay_ms(&retry, run_id, step, attempt),
    }
}

/// Why no attempt follows `failure`, the last of `step`, under `policy`; `None` while one
/// may: the step said no retry helps; its class is never retried; the same failure came
/// `same_failure_max` times in a row (its class's, else the step's); the attempts its class
/// allows are spent.
pub fn stop_reason(step: &StepState, failure: &Failure, policy: &RetryPolicy) -> Option<String> {
    if !failure.retryable {
        return Some(if failure.note.is_empty() {
            "the step said no retry can help".to_owned()
        } else {
            failure.note.clone()
        });
    }
    let retry = match policy.class(&failure.class) {
        ClassPolicy::Never(reason) => return Some(reason),
        ClassPolicy::Retry(retry) => retry,
    };
    let max_same = retry.same_failure_max;
    if max_same > 0 && failure.fingerprint != 0 && failure.same_in_a_row >= max_same {
        return Some(format!(
            "the same failure repeated ({} in a row, class {})",
            failure.same_in_a_row, failure.class
        ));
    }
    let spent = step.attempts_spent();
    (spent >= retry.max_attempts).then(|| {
        format!(
            "no attempt left ({spent} of {} for class {})",
            retry.max_attempts, failure.class
        )
    })
}

/// The note a `Failed` event recording `failed` at `at_ms` carries for `step` (its state
/// before the event) under `policy`: why no attempt will follow; else, when the step asked
/// for its next attempt's delay, the delay it gets; else empty.
pub fn note_for(
    step: &StepState,
    failed: &AttemptFailure,
    at_ms: u64,
    policy: &RetryPolicy,
) -> String {
    // A failure spends no attempt: the step's count is the same after the event.
    let failure = Failure::after(step.last_error.as_deref(), failed, at_ms);
    if let Some(reason) = stop_reason(step, &failure, policy) {
        return reason;
    }
    failure.retry_after_ms.map_or_else(String::new, |asked| {
        asked_words(asked, delay_ms(&failure, policy, "", "", step.attempt))
    })
}

/// The note for a delay of `delay` ms given when `asked` ms were asked for.
fn asked_words(asked: u64, delay: u64) -> String {
    let capped = if delay < asked {
        ", the most its policy allows"
    } else {
        ""
    };
    format!("retry after {delay} ms, as the step asked{capped}")
}

/// The delay from `failure`, the last try of a step's compensation (its `tries`-th), to
/// the next: the delay the try asked for, up to `policy`'s `max_ms` (the step's own
/// policy, as for every compensation); else the policy's backoff, jittered by the hash of
/// `run_id`, `step` and `tries`.
pub fn compensation_delay_ms(
    failure: &Failure,
    policy: &RetryPolicy,
    run_id: &str,
    step: &str,
    tries: u32,
) -> u64 {
    match failure.retry_after_ms {
        Some(asked) => asked.min(policy.max_ms.max(policy.initial_ms)),
        None => retry_delay_ms(policy, run_id, step, tries),
    }
}

/// The note a `CompensationTryFailed` event recording `failed` carries for `step` (its
/// state before the event) under `policy`: when the try asked for the next one's delay
/// and a next try follows, the delay it gets; else empty (a compensation that cannot be
/// tried again pauses the run, which says why).
pub fn compensation_note_for(
    step: &StepState,
    failed: &AttemptFailure,
    policy: &RetryPolicy,
) -> String {
    let last = failed.retryable && step.compensation_tries >= policy.max_attempts;
    match failed.retry_after_ms {
        Some(asked) if failed.retryable && !last => {
            let failure = Failure::after(None, failed, 0);
            asked_words(asked, compensation_delay_ms(&failure, policy, "", "", 0))
        }
        _ => String::new(),
    }
}

/// The memory limit the next attempt of `step` runs with, in bytes, in place of its own:
/// the one its last measured attempt ran with, grown by the policy of its last failure's
/// class (`memory_factor_pct`, up to `memory_max`: for an `oom`); `None` before any
/// attempt recorded a limit (the step's own holds). Derived from the log alone.
pub fn memory_limit(step: &StepState, policy: &RetryPolicy) -> Option<u64> {
    let limit = step.memory_limit?;
    Some(match &step.last_error {
        Some(failure) => policy.memory_after(&failure.class, limit),
        None => limit,
    })
}
