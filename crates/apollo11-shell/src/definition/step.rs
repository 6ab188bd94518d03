//! One `[[steps]]` entry to a `StepSpec`: its commands, idempotency, retry and timeout
//! (over `[defaults]`), and its `for_each`, `when`, `trigger`, `env` and `cwd`; or its
//! `wait` (`wait.rs`).

use super::raw::{RawDefaults, RawRetry, RawStep};
use super::{
    env, items, limits, placement, DefinitionError, Locator, COMPENSATE, NON_RETRYABLE, RUN,
};
use crate::classify::ClassRule;
use apollo11_core::{Backoff, Idempotency, RetryPolicy, StepSpec, Timeout, TriggerRule};
use std::collections::BTreeMap;
use std::path::Path;
use toml::Spanned;

/// What every step starts from: `[defaults]` read once.
pub(super) struct Base<'a> {
    pub defaults: &'a RawDefaults,
    pub retry: RetryPolicy,
    pub timeout: Timeout,
    pub fallback_ms: u64,
    pub dir: &'a Path,
    pub classes: &'a [ClassRule],
}

pub(super) fn step_spec(
    at: &Locator<'_>,
    step: &Spanned<RawStep>,
    base: &Base<'_>,
) -> Result<StepSpec, DefinitionError> {
    let raw = step.get_ref();
    let name = raw.name.get_ref();
    let waits = super::wait::wait(at, step)?;
    for command in raw.run.iter().chain(&raw.compensate) {
        if command.get_ref().contains('\0') {
            return Err(at.error(
                command.span().start,
                &format!("step `{name}`: a command cannot contain a NUL character"),
            ));
        }
    }
    // A waiting step runs nothing: rerunning it is always safe.
    let idempotency = match (&waits, &raw.idempotency) {
        (Some(_), None) => Idempotency::Natural,
        _ => idempotency(at, step)?,
    };
    let mut attributes: BTreeMap<String, String> = (raw.run.iter())
        .map(|run| (RUN.to_owned(), run.get_ref().clone()))
        .collect();
    if let Some(c) = &raw.compensate {
        attributes.insert(COMPENSATE.to_owned(), c.get_ref().clone());
    }
    if let Some(codes) = raw
        .non_retryable_exit_codes
        .as_ref()
        .or(base.defaults.non_retryable_exit_codes.as_ref())
    {
        let codes: Vec<String> = codes.iter().map(i32::to_string).collect();
        attributes.insert(NON_RETRYABLE.to_owned(), codes.join(","));
    }
    // `[defaults]` for commands (environment, placement, limits) do not reach a wait.
    if waits.is_none() {
        env::step_attributes(at, raw, base.defaults, &mut attributes)?;
        placement::step_attributes(at, raw, base.defaults, &mut attributes)?;
        limits::step_attributes(at, raw, base.defaults, &mut attributes)?;
    }
    Ok(StepSpec {
        name: name.clone(),
        depends_on: raw.depends_on.iter().map(|d| d.get_ref().clone()).collect(),
        idempotency,
        has_compensation: raw.compensate.is_some(),
        retry: retry(at, raw.retry.as_ref(), &base.retry, base.classes)?,
        timeout: match (&waits, &raw.timeout) {
            (Some((_, deadline)), _) => *deadline,
            (None, Some(t)) => timeout(at, t, base.fallback_ms)?,
            (None, None) => base.timeout,
        },
        attributes,
        trigger: trigger(at, raw)?,
        condition: raw.when.as_ref().map(|w| w.get_ref().clone()),
        for_each: items::for_each(at, raw, base.dir)?,
        origin: None,
        wait: waits.map(|(wait, _)| wait),
    })
}

fn idempotency(at: &Locator<'_>, step: &Spanned<RawStep>) -> Result<Idempotency, DefinitionError> {
    let raw = step.get_ref();
    let name = raw.name.get_ref();
    match raw.idempotency.as_ref().map(|i| (i.get_ref().as_str(), i.span().start)) {
        Some(("natural", _)) => Ok(Idempotency::Natural),
        Some(("keyed", _)) => Ok(Idempotency::Keyed),
        Some(("checkpoint", _)) => Ok(Idempotency::Checkpoint),
        Some(("compensate", _)) => Ok(Idempotency::Compensate),
        Some((other, offset)) => Err(at.error(offset, &format!("step `{name}`: idempotency `{other}` is not one of natural, keyed, checkpoint, compensate"))),
        None => {
            let message = format!("step `{name}` has no `idempotency` (natural, keyed, checkpoint or compensate): say how it is made safe to rerun");
            Err(at.error(step.span().start, &message))
        }
    }
}

fn trigger(at: &Locator<'_>, raw: &RawStep) -> Result<TriggerRule, DefinitionError> {
    match raw
        .trigger
        .as_ref()
        .map(|t| (t.get_ref().as_str(), t.span().start))
    {
        None | Some(("all_succeeded", _)) => Ok(TriggerRule::AllSucceeded),
        Some(("all_done", _)) => Ok(TriggerRule::AllDone),
        Some(("one_failed", _)) => Ok(TriggerRule::OneFailed),
        Some((other, offset)) => Err(at.error(
            offset,
            &format!(
                "step `{}`: trigger `{other}` is not one of all_succeeded, all_done, one_failed",
                raw.name.get_ref()
            ),
        )),
    }
}

/// A `retry` table over `base` (the defaults' policy): each key it sets replaces the
/// base's, and each class of its `class` table replaces that class's entry.
pub(super) fn retry(
    at: &Locator<'_>,
    raw: Option<&RawRetry>,
    base: &RetryPolicy,
    classes: &[ClassRule],
) -> Result<RetryPolicy, DefinitionError> {
    let Some(raw) = raw else {
        return Ok(base.clone());
    };
    let backoff = match raw
        .backoff
        .as_ref()
        .map(|b| (b.get_ref().as_str(), b.span().start))
    {
        None => base.backoff,
        Some(("fixed", _)) => Backoff::Fixed,
        Some(("exponential", _)) => Backoff::Exponential,
        Some((other, offset)) => {
            return Err(at.error(
                offset,
                &format!("backoff `{other}` is not `fixed` or `exponential`"),
            ))
        }
    };
    let ms = |d: &Option<Spanned<String>>, fallback: u64| {
        d.as_ref().map_or(Ok(fallback), |d| duration_ms(at, d))
    };
    let mut by_class = base.by_class.clone();
    if let Some(table) = &raw.class {
        by_class.extend(super::classes::by_class(at, table, classes)?);
    }
    Ok(RetryPolicy {
        by_class,
        same_failure_max: raw
            .same_failure_max
            .as_ref()
            .map_or(base.same_failure_max, |m| *m.get_ref()),
        max_attempts: raw
            .max_attempts
            .as_ref()
            .map_or(base.max_attempts, |m| *m.get_ref()),
        backoff,
        initial_ms: ms(&raw.initial, base.initial_ms)?,
        max_ms: ms(&raw.max, base.max_ms)?,
        jitter_pct: match &raw.jitter_pct {
            None => base.jitter_pct,
            Some(j) if *j.get_ref() <= 100 => *j.get_ref(),
            Some(j) => {
                return Err(at.error(
                    j.span().start,
                    &format!(
                        "jitter_pct is {}; at most 100 (percent of the delay)",
                        j.get_ref()
                    ),
                ))
            }
        },
    })
}

pub(super) fn timeout(
    at: &Locator<'_>,
    raw: &Spanned<String>,
    fallback_ms: u64,
) -> Result<Timeout, DefinitionError> {
    match raw.get_ref().as_str() {
        "auto" => Ok(Timeout::Auto { fallback_ms }),
        "none" => Ok(Timeout::None),
        _ => match duration_ms(at, raw)? {
            0 => Err(at.error(
                raw.span().start,
                &format!(
                    "a timeout of `{}` would fail every attempt at once; write e.g. \"10m\", or \"none\"",
                    raw.get_ref()
                ),
            )),
            ms => Ok(Timeout::Fixed(ms)),
        },
    }
}

/// A duration in milliseconds, at most `DURATION_MS_MAX` (checked before any conversion
/// that could wrap).
pub(super) fn duration_ms(at: &Locator<'_>, raw: &Spanned<String>) -> Result<u64, DefinitionError> {
    let text = raw.get_ref();
    let duration = humantime::parse_duration(text).map_err(|e| {
        at.error(
            raw.span().start,
            &format!("`{text}` is not a duration ({e}); write e.g. \"30s\", \"10m\", \"1h 30m\""),
        )
    })?;
    let max = apollo11_core::limits::DURATION_MS_MAX;
    match u64::try_from(duration.as_millis()) {
        Ok(ms) if ms <= max => Ok(ms),
        _ => Err(at.error(
            raw.span().start,
            &format!(
                "`{text}` is longer than {} days, the longest duration allowed",
                max / 86_400_000
            ),
        )),
    }
}
