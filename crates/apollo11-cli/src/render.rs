//! What the commands print: readable tables and timelines, and the JSON of `status --json`
//! and `events --json` (shapes in the README). Text from outside goes through `out::shown`.

use crate::out;
use apollo11_core::{Event, EventKind, Payload, RunId, WorkflowSpec};
use apollo11_machine::{pause_cause, PauseCause, Policy, RunState, RunStatus};
use serde_json::{json, Map, Value};
use std::path::Path;

/// How much of the end of a failed step's log `status` reads for its last lines.
const LOG_TAIL_BYTES: u64 = 64 * 1024;
/// How many of those lines it shows.
const LOG_TAIL_LINES: usize = 10;

/// `1.234s`, `850ms`, `2m05s`.
pub fn millis(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1e3),
        _ => format!("{}m{:02}s", ms / 60_000, ms / 1_000 % 60),
    }
}

fn time(at_ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms);
    humantime::format_rfc3339_millis(at).to_string()
}

/// `{"run_id":…, "state":…, "steps":{NAME:{"state":…, "attempt":N}}}`.
pub fn status_json(
    run_id: &RunId,
    status: RunStatus,
    state: &RunState,
    spec: &WorkflowSpec,
) -> String {
    let steps: Map<String, Value> = spec
        .steps
        .iter()
        .map(|s| {
            let step = state.step(&s.name);
            (
                s.name.clone(),
                json!({"state": step.status.name(), "attempt": step.attempt}),
            )
        })
        .collect();
    json!({"run_id": run_id.as_str(), "state": status.name(), "steps": steps}).to_string()
}

/// A table of the steps, with the tail of the log of any step whose last attempt failed.
/// Everything from outside (names, errors, log lines, paths) is capped and escaped.
pub fn status_table(
    run_id: &RunId,
    status: RunStatus,
    state: &RunState,
    spec: &WorkflowSpec,
    data_dir: &Path,
) -> String {
    let mut text = format!(
        "run {} ({}): {status}\n",
        out::name(run_id.as_str()),
        out::name(&spec.name)
    );
    if let Some(why) = paused_because(state, spec) {
        text.push_str(&format!("  paused: {why}\n"));
    }
    if let Some(asked) = &state.rollback {
        text.push_str(&format!(
            "  rollback requested by {}: {}\n",
            out::name(&asked.by),
            out::shown(&asked.reason, out::DETAIL_CHARS_MAX)
        ));
    }
    text.push_str(&format!(
        "  {:<24} {:<13} {:>8} {:>9}  {}\n",
        "STEP", "STATE", "ATTEMPTS", "DURATION", "LAST ERROR"
    ));
    let mut failures = Vec::new();
    for s in &spec.steps {
        let step = state.step(&s.name);
        // A compensation's failure says more about where the step is than the failure
        // that led to the compensation.
        let error = step
            .compensation_error
            .as_ref()
            .or(step.last_error.as_ref())
            .map_or(String::new(), |e| out::shown(&e.error, out::TEXT_CHARS_MAX));
        let duration = step.duration_ms.map_or("-".to_owned(), millis);
        text.push_str(&format!(
            "  {:<24} {:<13} {:>8} {:>9}  {}\n",
            out::name(&s.name),
            step.status.name(),
            step.attempt,
            duration,
            error
        ));
        if step.last_error.is_some() && !step.status.satisfies_dependents() {
            failures.push((s.name.clone(), step.attempt));
        }
    }
    for (step, attempt) in failures {
        text.push_str(&log_tail(data_dir, run_id, &step, attempt));
    }
    text.trim_end().to_owned()
}

/// The last lines of a failed attempt's log, read from the end of the file.
fn log_tail(data_dir: &Path, run_id: &RunId, step: &str, attempt: u32) -> String {
    let log = crate::files::step_files(data_dir, run_id.as_str(), step, attempt, false).log;
    let Ok(tail) = crate::files::tail(&log, LOG_TAIL_LINES, LOG_TAIL_BYTES) else {
        return String::new();
    };
    let mut text = format!(
        "\n  last lines of {} (attempt {attempt}, {}):\n",
        out::name(step),
        out::shown(&log.display().to_string(), out::DETAIL_CHARS_MAX)
    );
    for line in tail {
        text.push_str(&format!("    {}\n", out::shown(&line, out::TEXT_CHARS_MAX)));
    }
    text
}

/// Why the run waits for a person, in a sentence; `None` unless it is paused.
pub fn paused_because(state: &RunState, spec: &WorkflowSpec) -> Option<String> {
    let (dag, policy) = Policy::compile(spec, |_, fallback| fallback).ok()?;
    let cause = pause_cause(state, &dag, &policy)?;
    Some(paused_because_cause(state, &cause))
}

/// A pause's cause, in a sentence.
pub fn paused_because_cause(state: &RunState, cause: &PauseCause) -> String {
    let error = |e: Option<&apollo11_machine::Failure>| {
        e.map_or(String::from("no error recorded"), |e| {
            out::shown(&e.error, out::TEXT_CHARS_MAX)
        })
    };
    match cause {
        PauseCause::Operator { by, reason } => format!(
            "by {}: {}",
            out::name(by),
            out::shown(reason, out::DETAIL_CHARS_MAX)
        ),
        PauseCause::StepFailed { step } => {
            let s = state.step(step.as_str());
            format!(
                "step `{}` failed for good after {} attempt(s): {}",
                out::name(step.as_str()),
                s.attempt,
                error(s.last_error.as_deref())
            )
        }
        PauseCause::CompensationFailed { step, .. } => {
            let s = state.step(step.as_str());
            format!(
                "the compensation of `{}` failed for good after {} tr{}: {}",
                out::name(step.as_str()),
                s.compensation_tries,
                if s.compensation_tries == 1 {
                    "y"
                } else {
                    "ies"
                },
                error(s.compensation_error.as_deref())
            )
        }
    }
}

/// One readable line for an event, with its names and texts capped and escaped.
pub fn event_line(e: &Event) -> String {
    let step = e
        .step
        .as_ref()
        .map_or("-".to_owned(), |s| out::name(s.as_str()));
    let detail = |text: &str| out::shown(text, out::DETAIL_CHARS_MAX);
    let detail = match &e.kind {
        EventKind::RunCreated { workflow } => format!(" workflow {}", out::name(workflow)),
        EventKind::Failed { error, retryable }
        | EventKind::CompensationFailed { error, retryable } => format!(
            ": {}{}",
            detail(error),
            if *retryable { "" } else { " (not retryable)" }
        ),
        EventKind::ManualOverride { to, by, reason } => {
            format!(" -> {} by {}: {}", to.name(), out::name(by), detail(reason))
        }
        EventKind::RunPaused { by, reason }
        | EventKind::RunResumed { by, reason }
        | EventKind::RollbackRequested { by, reason } => {
            format!(" by {}: {}", out::name(by), detail(reason))
        }
        EventKind::Placed { host, handle } => {
            format!(" on {} at {}", out::name(host), detail(handle))
        }
        EventKind::Started
        | EventKind::Succeeded
        | EventKind::Compensating
        | EventKind::Compensated => String::new(),
    };
    format!(
        "{}  #{:<6} {:<24} {}({}){detail}",
        time(e.at_ms),
        e.event_id,
        step,
        e.kind.name(),
        e.attempt
    )
}

/// An event with all its fields; the payload as JSON when it is JSON.
pub fn event_json(e: &Event) -> Value {
    let mut v = json!({
        "event_id": e.event_id.0,
        "run_id": e.run_id.as_str(),
        "seq": e.seq.0,
        "step": e.step.as_ref().map(|s| s.as_str()),
        "kind": e.kind.name(),
        "attempt": e.attempt,
        "at_ms": e.at_ms,
        "instance": e.instance,
        "payload": payload_json(&e.payload),
    });
    let extra = match &e.kind {
        EventKind::RunCreated { workflow } => json!({"workflow": workflow}),
        EventKind::Failed { error, retryable }
        | EventKind::CompensationFailed { error, retryable } => {
            json!({"error": error, "retryable": retryable})
        }
        EventKind::ManualOverride { to, by, reason } => {
            json!({"to": to.name(), "by": by, "reason": reason})
        }
        EventKind::RunPaused { by, reason }
        | EventKind::RunResumed { by, reason }
        | EventKind::RollbackRequested { by, reason } => json!({"by": by, "reason": reason}),
        EventKind::Placed { host, handle } => json!({"host": host, "handle": handle}),
        EventKind::Started
        | EventKind::Succeeded
        | EventKind::Compensating
        | EventKind::Compensated => json!({}),
    };
    if let (Value::Object(map), Value::Object(more)) = (&mut v, extra) {
        map.extend(more);
    }
    v
}

fn payload_json(p: &Payload) -> Value {
    match p {
        Payload::Empty => Value::Null,
        Payload::Inline(bytes) => serde_json::from_slice(bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned())),
        Payload::Blob(b) => json!({"blob": b.sha256, "bytes": b.bytes}),
    }
}
