//! A waiting step's `wait` and `deadline`: `wait = "signal"` (or `"approval"`, the same
//! wait), `wait = { timer = "3s" }` or `wait = { until = "2026-12-07T03:00:00Z" }`, with an
//! optional `deadline` (a duration from the start of the wait). A waiting step runs no
//! command, so what only a command uses is refused on it.

use super::raw::RawStep;
use super::step::duration_ms;
use super::{DefinitionError, Locator};
use apollo11_core::{Timeout, Wait};
use std::time::UNIX_EPOCH;
use toml::Spanned;

/// The step's wait and deadline, `None` for a step that runs a command: exactly one of
/// `run` and `wait` is given, and a waiting step sets nothing a command would use.
pub(super) fn wait(
    at: &Locator<'_>,
    step: &Spanned<RawStep>,
) -> Result<Option<(Wait, Timeout)>, DefinitionError> {
    let raw = step.get_ref();
    let name = raw.name.get_ref();
    let wait = match (&raw.run, &raw.wait) {
        (None, Some(wait)) => wait,
        (None, None) => {
            return Err(at.error(
                step.span().start,
                &format!("step `{name}` has neither `run` (a command) nor `wait` (a signal or a timer)"),
            ))
        }
        (Some(_), Some(wait)) => {
            return Err(at.error(
                wait.span().start,
                &format!("step `{name}` has both `run` and `wait`: a waiting step runs no command"),
            ))
        }
        (Some(_), None) => {
            return match &raw.deadline {
                None => Ok(None),
                Some(deadline) => Err(at.error(
                    deadline.span().start,
                    &format!("step `{name}`: `deadline` is for a waiting step (`wait`); a command has `timeout`"),
                )),
            }
        }
    };
    refuse_command_fields(at, raw)?;
    let deadline = match &raw.deadline {
        None => Timeout::None,
        Some(d) => match duration_ms(at, d)? {
            0 => {
                return Err(at.error(
                    d.span().start,
                    "a deadline of 0 would fail the wait at once",
                ))
            }
            ms => Timeout::Fixed(ms),
        },
    };
    Ok(Some((what(at, name, wait)?, deadline)))
}

/// What `wait = …` says.
fn what(
    at: &Locator<'_>,
    name: &str,
    wait: &Spanned<toml::Value>,
) -> Result<Wait, DefinitionError> {
    let bad = || {
        at.error(
            wait.span().start,
            &format!("step `{name}`: `wait` is \"signal\", \"approval\", {{ timer = \"3s\" }} or {{ until = \"2026-12-07T03:00:00Z\" }}"),
        )
    };
    match wait.get_ref() {
        toml::Value::String(s) if s == "signal" || s == "approval" => Ok(Wait::Signal),
        toml::Value::Table(t) if t.len() == 1 => match t.iter().next() {
            Some((key, toml::Value::String(text))) if key == "timer" => {
                let spanned = Spanned::new(wait.span(), text.clone());
                Ok(Wait::After { ms: duration_ms(at, &spanned)? })
            }
            Some((key, toml::Value::String(text))) if key == "until" => {
                Ok(Wait::Until { ms: instant_ms(text).ok_or_else(|| {
                    at.error(wait.span().start, &format!("step `{name}`: `{text}` is not an instant in UTC; write e.g. \"2026-12-07T03:00:00Z\""))
                })? })
            }
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// Milliseconds since the Unix epoch of an RFC 3339 instant in UTC.
fn instant_ms(text: &str) -> Option<u64> {
    let at = humantime::parse_rfc3339(text).ok()?;
    u64::try_from(at.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()
}

/// What only a command uses, refused on a waiting step with where it is written.
fn refuse_command_fields(at: &Locator<'_>, raw: &RawStep) -> Result<(), DefinitionError> {
    let spans = [
        ("compensate", raw.compensate.as_ref().map(|c| c.span())),
        ("timeout", raw.timeout.as_ref().map(|t| t.span())),
        ("for_each", raw.for_each.as_ref().map(|f| f.span())),
        ("env", raw.env.as_ref().map(|e| e.span())),
        ("cwd", raw.cwd.as_ref().map(|c| c.span())),
        ("on", raw.on.as_ref().map(|o| o.span())),
        ("limits", raw.limits.as_ref().map(|l| l.span())),
    ];
    match spans
        .into_iter()
        .find_map(|(field, span)| Some((field, span?)))
    {
        None => Ok(()),
        Some((field, span)) => Err(at.error(
            span.start,
            &format!(
                "step `{}` waits and runs no command: `{field}` does not apply{}",
                raw.name.get_ref(),
                if field == "timeout" {
                    " (its `deadline` fails the wait)"
                } else {
                    ""
                }
            ),
        )),
    }
}
