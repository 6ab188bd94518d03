//! The per-run checks of docs/reliability.md's I2, I3 and I6 that the xtasks driving a server
//! (`failover`, `soak`) make from the HTTP API's objects: a run's events and its view.

use crate::ledger::{self, Executions};
use anyhow::{ensure, Context, Result};
use serde_json::Value;

/// I2 and I6 for one run's events (in log order): dense seqs, increasing event ids.
pub fn check_order(run: &str, events: &[Value]) -> Result<()> {
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e["seq"].as_u64().unwrap_or(u64::MAX))
        .collect();
    let ids: Vec<u64> = events
        .iter()
        .map(|e| e["event_id"].as_u64().unwrap_or(0))
        .collect();
    ensure!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "I2: {run} has a hole in its seqs: {seqs:?}"
    );
    ensure!(
        ids.windows(2).all(|w| w[1] > w[0]),
        "I6: the event ids of {run} do not increase: {ids:?}"
    );
    Ok(())
}

/// I3 for every step of a run view (`GET /api/v1/runs/{id}`) against the steps ledger: a
/// step that never started left no line; one that did passes `ledger::check_step` at its
/// current attempt. Returns the reruns of interrupted or failed attempts.
pub fn check_ledger(run: &str, view: &Value, executions: &Executions) -> Result<u32> {
    let steps = view["steps"]
        .as_object()
        .with_context(|| format!("the view of {run} has no steps"))?;
    let mut reruns = 0;
    for (name, step) in steps {
        let attempt = step["attempt"].as_u64().unwrap_or_default() as u32;
        let attempts = executions
            .get(&(run.to_owned(), name.to_owned()))
            .map_or(&[][..], Vec::as_slice);
        if attempt == 0 {
            ensure!(
                attempts.is_empty(),
                "I3: {run}/{name} never started, yet ran attempts {attempts:?}"
            );
            continue;
        }
        reruns += ledger::check_step(run, name, attempt, attempts).map_err(anyhow::Error::msg)?;
    }
    Ok(reruns)
}
