//! The steps ledger of the kill tests (`cargo xtask crash`, `cargo xtask failover`) and its
//! I3 check, shared: the crash child's module, which xtask includes by `#[path]`, so it uses
//! std only.
//! Each step execution appends one line `run step attempt pid` before it does anything else.

use std::collections::{BTreeMap, BTreeSet};

/// The attempts each `(run, step)` ran, in ledger order.
pub type Executions = BTreeMap<(String, String), Vec<u32>>;

/// Parses a steps ledger; a malformed line is an error naming its number.
pub fn executions(text: &str) -> Result<Executions, String> {
    let mut out = Executions::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split(' ').collect();
        let attempt = match f.as_slice() {
            [_, _, attempt, _] => attempt.parse::<u32>().ok(),
            _ => None,
        }
        .ok_or_else(|| {
            format!(
                "steps ledger line {}: `{line}` is not `run step attempt pid`",
                i + 1
            )
        })?;
        out.entry((f[0].to_owned(), f[1].to_owned()))
            .or_default()
            .push(attempt);
    }
    Ok(out)
}

/// I3 for a step that succeeded at attempt `succeeded`: no attempt ran twice, none ran after
/// the success, and the succeeded one left its line. Returns the reruns (`succeeded - 1`).
pub fn check_step(run: &str, step: &str, succeeded: u32, attempts: &[u32]) -> Result<u32, String> {
    let unique: BTreeSet<u32> = attempts.iter().copied().collect();
    if unique.len() != attempts.len() {
        return Err(format!(
            "I3: {run}/{step} ran one attempt twice: {attempts:?}"
        ));
    }
    if attempts.iter().any(|&a| a > succeeded) {
        return Err(format!(
            "I3: {run}/{step} ran after its success at attempt {succeeded}: {attempts:?}"
        ));
    }
    if !unique.contains(&succeeded) {
        return Err(format!(
            "{run}/{step}: the succeeded attempt {succeeded} left no ledger line: {attempts:?}"
        ));
    }
    Ok(succeeded - 1)
}
