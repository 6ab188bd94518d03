//! The soak's end check, over every run it started, once none is running: the server lists
//! exactly those runs (I1); each one's events have dense seqs and increasing ids (I2, I6);
//! its steps' executions in the ledger ran no attempt twice nor after the one that counts
//! (I3); it ended where its workflow and the operators' actions on it say it must (I4), and a
//! paused run is explained by a step that failed for good or whose compensation did.

use crate::http::request;
use crate::invariants;
use crate::ledger::Executions;
use crate::soak_load::Started;
use crate::soak_workflows::{COMP_FAILS, FATAL, LONG, RETRY, SMALL, STUCK};
use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Runs by workflow and end state, and the reruns the ledger shows.
pub struct Outcome {
    pub ends: BTreeMap<(String, String), usize>,
    pub reruns: u64,
}

fn get(addr: &str, path: &str) -> Result<Value> {
    let (status, body) = request(addr, "GET", path, None)?;
    ensure!(status == 200, "GET {path}: {status} {body}");
    serde_json::from_str(&body).with_context(|| format!("GET {path}: {body}"))
}

/// Every run id the server lists, page by page.
pub fn listed(addr: &str) -> Result<BTreeSet<String>> {
    let (mut ids, mut cursor) = (BTreeSet::new(), None::<String>);
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/runs?limit=1000&cursor={c}"),
            None => "/api/v1/runs?limit=1000".to_owned(),
        };
        let page = get(addr, &path)?;
        for run in page["runs"]
            .as_array()
            .context("a runs page without runs")?
        {
            ids.insert(run["run_id"].as_str().unwrap_or_default().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Ok(ids),
        }
    }
}

/// Waits until the server lists no running run.
pub fn drain(addr: &str, within: std::time::Duration) -> Result<()> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let page = get(addr, "/api/v1/runs?state=running&limit=5")?;
        let running = page["runs"].as_array().map_or(0, Vec::len);
        if running == 0 {
            return Ok(());
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "I4: runs still running {within:?} after the load stopped: {}",
            page["runs"]
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// The states a run of `workflow` may end in after the operators' `actions`.
pub fn expected(workflow: &str, actions: &[&str]) -> Result<&'static str> {
    Ok(match workflow {
        SMALL | RETRY => "succeeded",
        FATAL => "rolled_back",
        COMP_FAILS => "paused",
        STUCK if actions.contains(&"override") => "succeeded",
        STUCK => "paused",
        LONG if actions.contains(&"rollback") => "rolled_back",
        LONG => "succeeded",
        _ => bail!("the soak started no workflow `{workflow}`"),
    })
}

/// A paused run must show why: a step failed for good, or a compensation that did.
fn explained(run: &str, view: &Value) -> Result<()> {
    let steps = view["steps"].as_object().context("a view without steps")?;
    let why = steps
        .values()
        .any(|s| s["state"] == "failed" || s["state"] == "compensation_failed");
    ensure!(why, "{run} is paused with no step failed for good: {view}");
    Ok(())
}

pub fn check(
    addr: &str,
    runs: &HashMap<String, Started>,
    executions: &Executions,
) -> Result<Outcome> {
    let listed = listed(addr)?;
    let started: BTreeSet<String> = runs.keys().cloned().collect();
    let missing: Vec<_> = started.difference(&listed).collect();
    let unknown: Vec<_> = listed.difference(&started).collect();
    ensure!(
        missing.is_empty(),
        "I1: runs started but not listed: {missing:?}"
    );
    ensure!(
        unknown.is_empty(),
        "runs listed that the soak never started: {unknown:?}"
    );
    let mut outcome = Outcome {
        ends: BTreeMap::new(),
        reruns: 0,
    };
    for (run, started) in runs {
        let events = get(addr, &format!("/api/v1/runs/{run}/events?limit=10000"))?;
        ensure!(
            events["next_after"].is_null(),
            "{run} has more than 10,000 events"
        );
        invariants::check_order(run, events["events"].as_array().context("no events")?)?;
        let view = get(addr, &format!("/api/v1/runs/{run}"))?;
        let state = view["state"].as_str().unwrap_or_default();
        let want = expected(started.workflow, &started.actions)?;
        ensure!(
            state == want,
            "I4: {run} ({}, operators: {:?}) is {state}, not {want}: {view}",
            started.workflow,
            started.actions
        );
        if state == "paused" {
            explained(run, &view)?;
        }
        outcome.reruns += u64::from(invariants::check_ledger(run, &view, executions)?);
        *outcome
            .ends
            .entry((started.workflow.to_owned(), state.to_owned()))
            .or_default() += 1;
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_workflow_ends_where_its_operators_leave_it() {
        assert_eq!(expected(SMALL, &[]).unwrap(), "succeeded");
        assert_eq!(expected(COMP_FAILS, &[]).unwrap(), "paused");
        assert_eq!(expected(STUCK, &[]).unwrap(), "paused");
        assert_eq!(expected(STUCK, &["override"]).unwrap(), "succeeded");
        assert_eq!(expected(LONG, &["pause", "resume"]).unwrap(), "succeeded");
        assert_eq!(expected(LONG, &["rollback"]).unwrap(), "rolled_back");
        assert!(expected("other", &[]).is_err());
    }

    #[test]
    fn a_paused_run_needs_a_step_failed_for_good() {
        let why = serde_json::json!({"steps": {"a": {"state": "succeeded"}, "b": {"state": "compensation_failed"}}});
        assert!(explained("r", &why).is_ok());
        let none = serde_json::json!({"steps": {"a": {"state": "succeeded"}}});
        assert!(explained("r", &none)
            .unwrap_err()
            .to_string()
            .contains("no step failed"));
    }
}
