//! Failure classes in the file: the `[[classify]]` rules that give a failed attempt an
//! author's class, and the `retry.class` table (in `[defaults]` or a step) that gives a
//! class its own retry policy, each checked and located.

use super::raw::RawClassRule;
use super::step::duration_ms;
use super::{DefinitionError, Locator};
use crate::classify::ClassRule;
use apollo11_core::{limits, Backoff, ClassRetry, FailureClass, BUILTIN_CLASSES};
use std::collections::BTreeMap;
use toml::Spanned;

/// The `[[classify]]` rules, checked: a class name of lower-case letters, digits and `_`
/// that no built-in class has, exit codes from 1 to 255, a `stderr` pattern that compiles,
/// and at least one of the two.
pub(super) fn rules(
    at: &Locator<'_>,
    raw: &[Spanned<RawClassRule>],
) -> Result<Vec<ClassRule>, DefinitionError> {
    raw.iter().map(|rule| rule_of(at, rule)).collect()
}

fn rule_of(at: &Locator<'_>, rule: &Spanned<RawClassRule>) -> Result<ClassRule, DefinitionError> {
    let raw = rule.get_ref();
    let class = raw.class.get_ref();
    class_name(class).map_err(|why| at.error(raw.class.span().start, &why))?;
    let mut exit_codes = Vec::new();
    for code in raw.exit_codes.iter().flatten() {
        if !(1..=255).contains(code.get_ref()) {
            let message = format!(
                "class `{class}`: exit code {} is not one a failure exits with (1 to 255)",
                code.get_ref()
            );
            return Err(at.error(code.span().start, &message));
        }
        exit_codes.push(*code.get_ref());
    }
    if let Some(pattern) = &raw.stderr {
        if let Err(e) = regex_lite::Regex::new(pattern.get_ref()) {
            let message =
                format!("class `{class}`: `stderr` is not a regular expression that compiles: {e}");
            return Err(at.error(pattern.span().start, &message));
        }
    }
    if exit_codes.is_empty() && raw.stderr.is_none() {
        let message = format!(
            "class `{class}` has neither `exit_codes` nor `stderr`: say which failures are of it"
        );
        return Err(at.error(rule.span().start, &message));
    }
    Ok(ClassRule {
        class: class.clone(),
        exit_codes,
        stderr: raw.stderr.as_ref().map(|s| s.get_ref().clone()),
    })
}

/// Why `name` cannot name an author's class, if it cannot.
fn class_name(name: &str) -> Result<(), String> {
    let max = limits::LABEL_BYTES_MAX as usize;
    let well_formed = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !well_formed || name.len() > max {
        return Err(format!(
            "class `{name}`: a class name is a lower-case letter then lower-case letters, digits and `_`, at most {max} bytes"
        ));
    }
    if BUILTIN_CLASSES.contains(&name) {
        return Err(format!(
            "class `{name}` is a built-in class ({}); give yours another name",
            BUILTIN_CLASSES.join(", ")
        ));
    }
    Ok(())
}

/// The most a retry may multiply an attempt's memory limit by (`memory_factor`).
const MEMORY_FACTOR_MAX: f64 = 16.0;

/// The `retry.class` table: each key a class (built-in, `exit:N`, `signal:NAME`, or one
/// `rules` declares), each value `"never"` or a table of `max_attempts`, `backoff`,
/// `initial`, `max`, `jitter_pct`, `same_failure_max`, `memory_factor`, `memory_max`.
pub(super) fn by_class(
    at: &Locator<'_>,
    raw: &BTreeMap<String, Spanned<toml::Value>>,
    rules: &[ClassRule],
) -> Result<BTreeMap<String, ClassRetry>, DefinitionError> {
    let mut out = BTreeMap::new();
    for (class, value) in raw {
        let offset = value.span().start;
        if !known(class, rules) {
            let message = format!(
                "retry class `{class}` is neither a built-in class ({}, or exit:N, signal:NAME) nor one a [[classify]] rule declares",
                BUILTIN_CLASSES.join(", ")
            );
            return Err(at.error(offset, &message));
        }
        let retry = match value.get_ref() {
            toml::Value::String(s) if s == "never" => ClassRetry::never(),
            toml::Value::Table(table) => class_retry(at, offset, class, table)?,
            _ => {
                let message = format!(
                    "retry class `{class}`: write \"never\" or a table of max_attempts, backoff, initial, max, jitter_pct, same_failure_max, memory_factor, memory_max"
                );
                return Err(at.error(offset, &message));
            }
        };
        out.insert(class.clone(), retry);
    }
    Ok(out)
}

fn known(class: &str, rules: &[ClassRule]) -> bool {
    if BUILTIN_CLASSES.contains(&class) || rules.iter().any(|r| r.class == class) {
        return true;
    }
    match FailureClass::parse(class) {
        FailureClass::Exit(_) => true,
        FailureClass::Signal(name) => !name.is_empty(),
        _ => false,
    }
}

fn class_retry(
    at: &Locator<'_>,
    offset: usize,
    class: &str,
    table: &toml::Table,
) -> Result<ClassRetry, DefinitionError> {
    let wrong =
        |key: &str, what: &str| at.error(offset, &format!("retry class `{class}`: `{key}` {what}"));
    let mut retry = ClassRetry::default();
    for (key, value) in table {
        match (key.as_str(), value) {
            ("max_attempts", toml::Value::Integer(n)) if *n >= 1 => {
                retry.max_attempts = Some(u32::try_from(*n).unwrap_or(u32::MAX));
            }
            ("max_attempts", _) => return Err(wrong(key, "must be a whole number, at least 1")),
            ("backoff", toml::Value::String(b)) if b == "fixed" => {
                retry.backoff = Some(Backoff::Fixed)
            }
            ("backoff", toml::Value::String(b)) if b == "exponential" => {
                retry.backoff = Some(Backoff::Exponential);
            }
            ("backoff", _) => return Err(wrong(key, "is not `fixed` or `exponential`")),
            ("initial" | "max", toml::Value::String(d)) => {
                let ms = duration_ms(at, &Spanned::new(offset..offset, d.clone()))?;
                if key == "initial" {
                    retry.initial_ms = Some(ms);
                } else {
                    retry.max_ms = Some(ms);
                }
            }
            ("initial" | "max", _) => return Err(wrong(key, "must be a duration such as \"30s\"")),
            ("jitter_pct", toml::Value::Integer(n)) if (0..=100).contains(n) => {
                retry.jitter_pct = u8::try_from(*n).ok();
            }
            ("jitter_pct", _) => return Err(wrong(key, "must be a percentage from 0 to 100")),
            ("same_failure_max", toml::Value::Integer(n)) if *n >= 0 => {
                retry.same_failure_max = Some(u32::try_from(*n).unwrap_or(u32::MAX));
            }
            ("same_failure_max", _) => {
                return Err(wrong(key, "must be a whole number (0 turns the rule off)"))
            }
            ("memory_factor", toml::Value::Float(f)) if (1.0..=MEMORY_FACTOR_MAX).contains(f) => {
                retry.memory_factor_pct = Some((f * 100.0).round() as u32);
            }
            ("memory_factor", toml::Value::Integer(n))
                if (1..=MEMORY_FACTOR_MAX as i64).contains(n) =>
            {
                retry.memory_factor_pct = Some(*n as u32 * 100);
            }
            ("memory_factor", _) => {
                return Err(wrong(key, &format!("must be a number from 1 to {MEMORY_FACTOR_MAX} (2.0: double the memory)")))
            }
            ("memory_max", toml::Value::String(size)) if super::limits::bytes(size).is_some() => {
                retry.memory_max = super::limits::bytes(size);
            }
            ("memory_max", _) => {
                return Err(wrong(key, "must be a size such as \"2GiB\""))
            }
            _ => return Err(wrong(
                key,
                "is not a key of a class's retry (max_attempts, backoff, initial, max, jitter_pct, same_failure_max, memory_factor, memory_max)",
            )),
        }
    }
    Ok(retry)
}
