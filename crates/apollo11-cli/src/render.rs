//! What the commands print: readable tables and timelines, and the JSON of `status --json`
//! and `events --json` (the inspector's types, as the HTTP server serves them). Text from
//! outside goes through `out::shown`.

use crate::out;
use apollo11_runtime::inspect::{EventDetail, EventView, Pause, PayloadView, RunView, Waiting};
use serde_json::Value;
use std::path::Path;

/// How much of the end of a failed step's log `status` reads for its last lines.
const LOG_TAIL_BYTES: u64 = 64 * 1024;
/// How many of those lines it shows.
const LOG_TAIL_LINES: usize = 10;

pub use apollo11_runtime::inspect::millis;

/// A waiting step's wait, in words: "waiting for a signal" or "timer until T", and its
/// deadline.
fn waits(wait: &Waiting) -> String {
    let what = match wait.until {
        Some(until) => format!("timer until {}", time(until)),
        None => "waiting for a signal".to_owned(),
    };
    match wait.deadline {
        Some(deadline) => format!("{what} (deadline {})", time(deadline)),
        None => what,
    }
}

fn time(at_ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms);
    humantime::format_rfc3339_millis(at).to_string()
}

/// The run as JSON: the inspector's view, as the server's `GET /api/v1/runs/{id}`.
pub fn status_json(view: &RunView) -> String {
    serde_json::json!(view).to_string()
}

/// A table of the steps, each with why it is where it is (what its try under way waits for,
/// its last error, or why it was skipped), and the tail of the log of any step whose last
/// attempt failed. Everything from outside (names, errors, reasons, log lines, paths) is
/// capped and escaped.
pub fn status_table(view: &RunView, data_dir: &Path) -> String {
    let mut text = format!(
        "run {} ({}): {}\n",
        out::name(view.run_id.as_str()),
        out::name(&view.workflow),
        view.state
    );
    if !view.started_by.is_empty() {
        let what: Vec<String> = (view.started_by.iter())
            .map(|(k, v)| format!("{} {}", out::name(k), out::shown(v, out::TEXT_CHARS_MAX)))
            .collect();
        text.push_str(&format!("  started by {}\n", what.join(", ")));
    }
    if let Some(pause) = &view.paused {
        text.push_str(&format!("  paused: {}\n", paused_because(pause)));
    }
    if let Some(asked) = &view.rollback {
        text.push_str(&format!(
            "  rollback requested by {}: {}\n",
            out::name(&asked.by),
            out::shown(&asked.reason, out::DETAIL_CHARS_MAX)
        ));
    }
    text.push_str(&format!(
        "  {:<24} {:<13} {:>8} {:>9}  {}\n",
        "STEP", "STATE", "ATTEMPTS", "DURATION", "WHY"
    ));
    let mut failures = Vec::new();
    for step in &view.steps {
        let waiting = (step.unplaced.as_ref()).and_then(|u| u.waiting_for.as_ref());
        let why = match (waiting, &step.waiting) {
            (_, Some(wait)) => waits(wait),
            (Some(what), None) => {
                format!("waiting for {}", out::shown(what, out::TEXT_CHARS_MAX))
            }
            (None, None) => (step.error.as_ref().or(step.skip_reason.as_ref()))
                .map_or(String::new(), |e| out::shown(e, out::TEXT_CHARS_MAX)),
        };
        let why = match (&step.error_class, step.error.is_some()) {
            (Some(class), true) => format!("[{}] {why}", out::name(class)),
            _ => why,
        };
        let duration = step.duration_ms.map_or("-".to_owned(), millis);
        text.push_str(&format!(
            "  {:<24} {:<13} {:>8} {:>9}  {}\n",
            out::name(&step.name),
            step.state.name(),
            step.attempt,
            duration,
            why
        ));
        if step.error.is_some() && !step.state.satisfies_dependents() {
            failures.push((step.name.as_str(), step.attempt));
        }
    }
    text.push_str(&usage_lines(view));
    for (step, attempt) in failures {
        text.push_str(&log_tail(data_dir, view.run_id.as_str(), step, attempt));
    }
    text.trim_end().to_owned()
}

/// What each try of each step used, a line a try, under a heading; empty when no try
/// recorded any.
fn usage_lines(view: &RunView) -> String {
    let mut text = String::new();
    for step in &view.steps {
        for used in &step.usage {
            let what = if used.compensation {
                "compensation"
            } else {
                "attempt"
            };
            text.push_str(&format!(
                "    {:<24} {what} {}: {}\n",
                out::name(&step.name),
                used.attempt,
                out::shown(&used.usage.words(), out::DETAIL_CHARS_MAX)
            ));
        }
    }
    if text.is_empty() {
        return text;
    }
    format!("\n  used:\n{text}")
}

/// The last lines of a failed attempt's log, read from the end of the file.
fn log_tail(data_dir: &Path, run_id: &str, step: &str, attempt: u32) -> String {
    let log = apollo11_shell::files::step_files(data_dir, run_id, step, attempt, false).log;
    let Ok(tail) = apollo11_shell::files::tail(&log, LOG_TAIL_LINES, LOG_TAIL_BYTES) else {
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

/// Why the run waits for a person, in a sentence.
pub fn paused_because(pause: &Pause) -> String {
    let error = |e: &Option<String>| {
        e.as_ref().map_or(String::from("no error recorded"), |e| {
            out::shown(e, out::TEXT_CHARS_MAX)
        })
    };
    match pause {
        Pause::Operator { by, reason } => format!(
            "by {}: {}",
            out::name(by),
            out::shown(reason, out::DETAIL_CHARS_MAX)
        ),
        Pause::StepFailed {
            step,
            attempts,
            error: e,
            class,
            stopped,
        } => format!(
            "step `{}` failed for good after {attempts} attempt(s){}: {}{}",
            out::name(step.as_str()),
            class
                .as_ref()
                .map_or(String::new(), |c| format!(", class {}", out::name(c))),
            error(e),
            stopped.as_ref().map_or(String::new(), |s| format!(
                " ({})",
                out::shown(s, out::DETAIL_CHARS_MAX)
            )),
        ),
        Pause::CompensationFailed {
            step,
            tries,
            error: e,
            ..
        } => format!(
            "the compensation of `{}` failed for good after {tries} tr{}: {}",
            out::name(step.as_str()),
            if *tries == 1 { "y" } else { "ies" },
            error(e)
        ),
    }
}

/// One readable line for an event, with its names and texts capped and escaped.
pub fn event_line(e: &EventView) -> String {
    let step = e
        .step
        .as_ref()
        .map_or("-".to_owned(), |s| out::name(s.as_str()));
    let detail = |text: &str| out::shown(text, out::DETAIL_CHARS_MAX);
    let detail = match &e.detail {
        EventDetail::Created { workflow } => format!(" workflow {}", out::name(workflow)),
        EventDetail::Failure {
            error,
            retryable,
            class,
            note,
        } => format!(
            ":{} {}{}{}",
            class
                .as_ref()
                .map_or(String::new(), |c| format!(" [{}]", out::name(c))),
            detail(error),
            if *retryable { "" } else { " (not retryable)" },
            if note.is_empty() {
                String::new()
            } else {
                format!("; stopped: {}", detail(note))
            }
        ),
        EventDetail::Override { to, by, reason } => {
            format!(" -> {} by {}: {}", to.name(), out::name(by), detail(reason))
        }
        EventDetail::Operator { by, reason } => {
            format!(" by {}: {}", out::name(by), detail(reason))
        }
        EventDetail::Placed { host, handle } => {
            let at = apollo11_shell::shell::place_words(&out::name(host), handle).map_or_else(
                || format!(" on {} at {}", out::name(host), detail(handle)),
                |words| format!(" {}", detail(&words)),
            );
            let ran = match &e.payload {
                PayloadView::Json(ran) => Some(ran),
                _ => None,
            };
            // How the try's limits were held, when it had any.
            let held = (ran.and_then(|r| r["isolation"].as_str()))
                .filter(|i| *i != "none")
                .map_or(String::new(), |i| format!(" (limits: {})", detail(i)));
            match ran.and_then(|r| r["command"].as_str()) {
                Some(command) => format!("{at}{held}: {}", detail(command)),
                None => format!("{at}{held}"),
            }
        }
        EventDetail::Skipped { reason } => format!(": {}", detail(reason)),
        EventDetail::Rerun {
            steps,
            compensate,
            by,
            reason,
        } => format!(
            " by {}: {}; runs again: {}{}",
            out::name(by),
            detail(reason),
            names(steps.iter().map(String::as_str)),
            if compensate.is_empty() {
                String::new()
            } else {
                format!(
                    ", compensated first: {}",
                    names(compensate.iter().map(String::as_str))
                )
            }
        ),
        EventDetail::Expanded { items } => {
            format!(" into {items} item{}", if *items == 1 { "" } else { "s" })
        }
        EventDetail::Usage(usage) => format!(": {}", detail(&usage.words())),
        EventDetail::None {} => String::new(),
    };
    format!(
        "{}  #{:<6} {:<24} {}({}){detail}",
        time(e.at_ms),
        e.event_id,
        step,
        e.kind,
        e.attempt
    )
}

/// Step names, each shown as a name, comma-separated and cut to a line's length.
pub fn names<'a>(steps: impl IntoIterator<Item = &'a str>) -> String {
    let all: Vec<String> = steps.into_iter().map(out::name).collect();
    out::shown(&all.join(", "), out::DETAIL_CHARS_MAX)
}

/// An event with all its fields; the payload as JSON when it is JSON.
pub fn event_json(e: &EventView) -> Value {
    serde_json::json!(e)
}
