//! A step's `limits` (in `[defaults]` too, each key of a step's table over the defaults'):
//! `memory` ("256MiB", "2G" or bytes), `cpu` (a share of cores), `processes`, `open_files`
//! and `cpu_time` ("30s"), checked and kept in the step's attributes as JSON.

use super::raw::{RawDefaults, RawStep};
use super::step::duration_ms;
use super::{DefinitionError, Locator};
use crate::shell::{Limits, LIMITS};
use std::collections::BTreeMap;
use toml::{Spanned, Value};

/// The keys a `limits` table may have.
const KEYS: &str = "memory, cpu, processes, open_files, cpu_time";
/// The most cores a `cpu` share may name.
const CPU_MAX: f64 = 4096.0;

/// Adds the step's limits, when it or `[defaults]` sets any.
pub(super) fn step_attributes(
    at: &Locator<'_>,
    raw: &RawStep,
    defaults: &RawDefaults,
    attributes: &mut BTreeMap<String, String>,
) -> Result<(), DefinitionError> {
    let mut limits = Limits::default();
    for table in [defaults.limits.as_ref(), raw.limits.as_ref()]
        .into_iter()
        .flatten()
    {
        for (key, value) in table.get_ref() {
            set(at, &mut limits, key.get_ref(), value).map_err(|mut e| {
                if !is_limit(key.get_ref()) {
                    let key_at = at.error(key.span().start, "");
                    (e.line, e.column) = (key_at.line, key_at.column);
                }
                e
            })?;
        }
    }
    if !limits.is_empty() {
        let json = serde_json::to_string(&limits).expect("limits serialize");
        attributes.insert(LIMITS.to_owned(), json);
    }
    Ok(())
}

fn set(
    at: &Locator<'_>,
    limits: &mut Limits,
    key: &str,
    value: &Spanned<Value>,
) -> Result<(), DefinitionError> {
    let fail = |what: String| Err(at.error(value.span().start, &format!("limits.{key}: {what}")));
    match (key, value.get_ref()) {
        ("memory", Value::String(text)) => match bytes(text) {
            Some(n) if n >= 1 << 20 => limits.memory = Some(n),
            Some(_) => return fail(format!("`{text}` is under 1MiB: no step starts in that")),
            None => {
                return fail(format!(
                    "`{text}` is not a size; write e.g. \"256MiB\", \"2GiB\""
                ))
            }
        },
        ("memory", Value::Integer(n)) if *n >= 1 << 20 => limits.memory = Some(*n as u64),
        ("cpu", Value::Float(share)) if *share > 0.0 && *share <= CPU_MAX => {
            limits.cpu = Some(*share);
        }
        ("cpu", Value::Integer(n)) if (1..=CPU_MAX as i64).contains(n) => {
            limits.cpu = Some(*n as f64);
        }
        ("processes", Value::Integer(n)) if *n >= 1 => limits.processes = Some(*n as u64),
        ("open_files", Value::Integer(n)) if *n >= 1 => limits.open_files = Some(*n as u64),
        ("cpu_time", Value::String(_)) => {
            let text = value.get_ref().as_str().unwrap_or_default();
            let spanned = Spanned::new(value.span(), text.to_owned());
            let seconds = duration_ms(at, &spanned)?.div_ceil(1_000);
            if seconds == 0 {
                return fail("a cpu time of zero would fail every attempt at once".into());
            }
            limits.cpu_time_s = Some(seconds);
        }
        (key, other) if is_limit(key) => {
            return fail(format!("{other} is not {}", expected(key)));
        }
        _ => return fail(format!("not a limit; a limit is one of {KEYS}")),
    }
    Ok(())
}

/// Warnings on the file's limits that are allowed but likely wrong: a `memory` over what this
/// machine has (the kernel will never kill for it), located at the value.
pub(super) fn warnings(at: &Locator<'_>, raw: &super::raw::RawFile) -> Vec<DefinitionError> {
    let Some(machine) = machine_memory() else {
        return Vec::new();
    };
    let tables = std::iter::once(raw.defaults.limits.as_ref())
        .chain(raw.steps.iter().map(|s| s.get_ref().limits.as_ref()))
        .flatten();
    let memory = tables.filter_map(|t| {
        let (_, value) = t.get_ref().iter().find(|(k, _)| k.get_ref() == "memory")?;
        let mut limits = Limits::default();
        set(at, &mut limits, "memory", value).ok()?;
        Some((value.span().start, limits.memory?))
    });
    memory
        .filter(|(_, bytes)| *bytes > machine)
        .map(|(offset, bytes)| {
            let message = format!("limits.memory: {bytes} bytes is more than this machine's {machine}: the step will never be killed for memory");
            at.error(offset, &message)
        })
        .collect()
}

/// This machine's memory in bytes (`MemTotal` of /proc/meminfo).
fn machine_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
    kib.checked_mul(1024)
}

fn is_limit(key: &str) -> bool {
    matches!(
        key,
        "memory" | "cpu" | "processes" | "open_files" | "cpu_time"
    )
}

/// What `key` takes, in words.
fn expected(key: &str) -> &'static str {
    match key {
        "memory" => "a size of at least 1MiB (\"256MiB\", \"2GiB\", or bytes)",
        "cpu" => "a share of cores above 0 (0.5: half a core)",
        "cpu_time" => "a duration (\"30s\", \"10m\")",
        _ => "a whole number of at least 1",
    }
}

/// A size in bytes: digits and a unit (B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB, all
/// powers of 1024); `None` when it is none, or over `u64`.
pub(super) fn bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

/// The `limits` table as serde reads it.
pub(super) type Table = Spanned<BTreeMap<Spanned<String>, Spanned<Value>>>;

#[cfg(test)]
mod tests {
    use super::bytes;

    #[test]
    fn sizes_read_in_powers_of_1024() {
        assert_eq!(bytes("256MiB"), Some(256 << 20));
        assert_eq!(bytes("2G"), Some(2 << 30));
        assert_eq!(bytes("512"), Some(512));
        assert_eq!(bytes("-5"), None);
        assert_eq!(bytes("1.5GiB"), None);
        assert_eq!(bytes("99999999999TiB"), None);
    }
}
