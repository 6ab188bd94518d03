//! Replays a run's history (JSON lines of events) and prints the state table after every
//! event: what an operator sees when asking "what did the engine know, and when?".
//!
//! `cargo run --example replay -p apollo11-machine -- crates/apollo11-machine/tests/data/diamond_rollback.events.jsonl`

use anyhow::{bail, Context, Result};
use apollo11_core::{Event, EventKind, WorkflowSpec};
use apollo11_machine::{run_status, Policy, RunState};

fn main() -> Result<()> {
    let Some(path) = std::env::args().nth(1) else {
        bail!("usage: replay HISTORY.jsonl   (one JSON event per line, one run)");
    };
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let events = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str::<Event>(l).with_context(|| format!("{path}:{}", i + 1)))
        .collect::<Result<Vec<Event>>>()?;
    let Some(first) = events.first() else {
        bail!("{path}: no events")
    };
    let mut state = RunState::new(first.run_id.clone());
    println!(
        "run {}  ({} events from {path})",
        first.run_id,
        events.len()
    );
    for event in &events {
        state.apply(event);
        println!(
            "{:>5}  {:<34} {}",
            event.event_id,
            describe(event),
            table(&state)
        );
    }
    Ok(())
}

/// `step kind(attempt)`, with the error or override details that explain the transition.
fn describe(event: &Event) -> String {
    let step = event.step.as_ref().map_or("-", |s| s.as_str());
    let detail = match &event.kind {
        EventKind::AttemptFailed(_) | EventKind::Failed { .. } => {
            event.kind.failure().map_or_else(String::new, |failed| {
                let last = if failed.retryable { "" } else { " (final)" };
                format!(" [{}]: {}{last}", failed.class, failed.error)
            })
        }
        EventKind::CompensationFailed { .. } | EventKind::CompensationTryFailed(_) => {
            (event.kind.compensation_failure()).map_or_else(String::new, |failed| {
                let last = if failed.retryable { "" } else { " (final)" };
                format!(": {}{last}", failed.error)
            })
        }
        EventKind::ManualOverride { to, by, .. } => format!(" -> {} by {by}", to.name()),
        EventKind::RunPaused { by, .. }
        | EventKind::RunResumed { by, .. }
        | EventKind::RollbackRequested { by, .. } => format!(" by {by}"),
        _ => String::new(),
    };
    format!("{step} {}({}){detail}", event.kind.name(), event.attempt)
}

/// Every step as `name=state#attempt`, then the run status when the definition is pinned.
fn table(state: &RunState) -> String {
    let steps: Vec<String> = state
        .steps
        .iter()
        .map(|(name, s)| format!("{name}={}#{}", s.status, s.attempt))
        .collect();
    let spec = state
        .definition
        .inline_bytes()
        .and_then(|b| serde_json::from_slice::<WorkflowSpec>(b).ok());
    let run = spec
        .and_then(|spec| Policy::compile(&spec, |_, fallback| fallback).ok())
        .map(|(dag, policy)| format!("| run {}", run_status(state, &dag, &policy)));
    format!("{} {}", steps.join(" "), run.unwrap_or_default())
}
