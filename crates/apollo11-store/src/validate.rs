//! Checks every backend applies to an append before writing anything, so that all stores
//! accept and refuse exactly the same inputs and no record can exceed the record limit.

use crate::{NewEvent, StoreError};
use apollo11_core::{check_name, limits, EventKind, NameKind, NameProblem, Payload, RunId};

/// Largest inline payload any store accepts. The runtime's configurable inline limit
/// (default `limits::PAYLOAD_INLINE_BYTES_MAX`) must not exceed it; bigger payloads go to
/// the blob store.
pub const INLINE_PAYLOAD_BYTES_HARD_MAX: u32 = 32 * 1024;

/// Validates one append: batch size, names, error texts and inline payload sizes.
///
/// # Errors
///
/// [`StoreError::Invalid`] or [`StoreError::TooLarge`] naming the first event, name, text or
/// payload that breaks its limit; nothing of the append is written.
pub fn validate(run_id: &RunId, events: &[NewEvent]) -> Result<(), StoreError> {
    if events.is_empty() {
        return Err(invalid("append", "no events"));
    }
    let max = limits::APPEND_BATCH_EVENTS_MAX;
    if events.len() > max as usize {
        let reason = format!(
            "{} events in one append; at most {max} are allowed",
            events.len()
        );
        return Err(invalid("append", &reason));
    }
    name(NameKind::Run, run_id.as_str())?;
    for event in events {
        if let Some(step) = &event.step {
            name(NameKind::Step, step.as_str())?;
        }
        check_len(
            "instance name",
            event.instance.len() as u64,
            limits::LABEL_BYTES_MAX,
        )?;
        match &event.kind {
            EventKind::AttemptFailed(failure) | EventKind::CompensationTryFailed(failure) => {
                let class = failure.class.name();
                check_len("failure class", class.len() as u64, limits::LABEL_BYTES_MAX)?;
                for (what, text) in [
                    ("error message", &failure.error),
                    ("failure note", &failure.note),
                ] {
                    check_len(what, text.len() as u64, limits::ERROR_MESSAGE_BYTES_MAX)?;
                }
            }
            EventKind::Failed { error, .. } | EventKind::CompensationFailed { error, .. } => {
                check_len(
                    "error message",
                    error.len() as u64,
                    limits::ERROR_MESSAGE_BYTES_MAX,
                )?
            }
            EventKind::ManualOverride { by, reason, .. }
            | EventKind::RunPaused { by, reason }
            | EventKind::RunResumed { by, reason }
            | EventKind::RollbackRequested { by, reason }
            | EventKind::Signalled { by, reason } => operator_note(by, reason)?,
            EventKind::RerunRequested {
                steps,
                compensate,
                by,
                reason,
            } => {
                operator_note(by, reason)?;
                rerun_set(steps, compensate)?;
            }
            EventKind::Skipped { reason } => check_len(
                "skip reason",
                reason.len() as u64,
                limits::ERROR_MESSAGE_BYTES_MAX,
            )?,
            EventKind::RunCreated { workflow } => name(NameKind::Workflow, workflow)?,
            EventKind::Placed { host, handle } => {
                check_len("host", host.len() as u64, limits::LABEL_BYTES_MAX)?;
                check_len("place handle", handle.len() as u64, limits::LABEL_BYTES_MAX)?;
            }
            EventKind::AttemptUsage(usage) => check_len(
                "isolation",
                usage.isolation.len() as u64,
                limits::LABEL_BYTES_MAX,
            )?,
            EventKind::Started
            | EventKind::Succeeded
            | EventKind::Compensating
            | EventKind::Compensated
            | EventKind::Interrupted
            | EventKind::Expanded { .. } => {}
        }
        if let Payload::Inline(bytes) = &event.payload {
            check_len(
                "inline payload",
                bytes.len() as u64,
                INLINE_PAYLOAD_BYTES_HARD_MAX,
            )?;
        }
    }
    Ok(())
}

/// An operator's `by` and `reason`, within their limits.
fn operator_note(by: &str, reason: &str) -> Result<(), StoreError> {
    check_len("operator name", by.len() as u64, limits::LABEL_BYTES_MAX)?;
    check_len(
        "operator's reason",
        reason.len() as u64,
        limits::ERROR_MESSAGE_BYTES_MAX,
    )
}

/// A rerun's steps: each a step name, all of them within half a record.
fn rerun_set(steps: &[String], compensate: &[String]) -> Result<(), StoreError> {
    let names = steps.iter().chain(compensate);
    let mut bytes = 0u64;
    for step in names {
        name(NameKind::Step, step)?;
        bytes += step.len() as u64;
    }
    check_len("rerun set", bytes, limits::RECORD_BYTES_MAX / 2)
}

/// The names rule of `apollo11_core::check_name`: the same everywhere a name enters.
fn name(kind: NameKind, name: &str) -> Result<(), StoreError> {
    check_name(kind, name).map_err(|e| match e.problem {
        NameProblem::TooLong { bytes } => StoreError::TooLarge {
            what: kind.label().to_owned(),
            bytes: bytes as u64,
            max: u64::from(limits::NAME_BYTES_MAX),
        },
        _ => StoreError::Invalid {
            what: kind.label().to_owned(),
            reason: e.to_string(),
        },
    })
}

fn check_len(what: &str, bytes: u64, max: u32) -> Result<(), StoreError> {
    if bytes > u64::from(max) {
        return Err(StoreError::TooLarge {
            what: what.to_owned(),
            bytes,
            max: u64::from(max),
        });
    }
    Ok(())
}

fn invalid(what: &str, reason: &str) -> StoreError {
    StoreError::Invalid {
        what: what.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_many_events_in_one_append_are_counted_in_events_not_bytes() {
        let started = NewEvent {
            step: Some("s".into()),
            kind: EventKind::Started,
            attempt: 1,
            at_ms: 0,
            instance: "i".into(),
            payload: Payload::Empty,
        };
        let max = limits::APPEND_BATCH_EVENTS_MAX as usize;
        validate(&RunId::from("r"), &vec![started.clone(); max]).unwrap();
        let e = validate(&RunId::from("r"), &vec![started; max + 1]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "invalid append: {} events in one append; at most {max} are allowed",
                max + 1
            )
        );
    }
}
