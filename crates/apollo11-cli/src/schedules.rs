//! `apollo11 schedules`: the schedules a server fires (`GET /api/v1/schedules`): each with
//! its next fire time, its last fire and that run's state. `apollo11 backfill`: the runs of
//! a schedule's fire times in a range (`POST /api/v1/schedules/backfill`). `apollo11
//! schedule pause|resume`: a schedule stopped or fired again, with who and why
//! (`POST /api/v1/schedules/{workflow}/{name}/pause`, `/resume`).

use crate::{out, Exit};
use serde_json::{json, Value};
use std::path::Path;

/// Lists the schedules of the server at `server`; `--json` prints the API's answer.
pub async fn list(server: &str, token_file: Option<&Path>, json: bool) -> Result<Exit, Exit> {
    let body = crate::worker::fetch(server, token_file, "/api/v1/schedules", None).await?;
    if json {
        out::line(body.to_string())?;
        return Ok(Exit::code(0));
    }
    out::line(format!(
        "{:<32} {:<20} {:<16} {:<24} {:<24}  LAST RUN",
        "SCHEDULE", "CRON", "ZONE", "NEXT FIRE", "LAST FIRE"
    ))?;
    for s in body["schedules"].as_array().into_iter().flatten() {
        out::line(line(s))?;
        if s["paused"] == true {
            out::line(format!("  {}", pause_text(&s["pause"])))?;
        }
    }
    Ok(Exit::code(0))
}

/// One schedule: `WORKFLOW/NAME`, its expression and zone, next and last fire (UTC) (or
/// `disabled`, `paused`), and the last fire's run with its state.
fn line(s: &Value) -> String {
    let text = |v: &Value| out::shown(v.as_str().unwrap_or_default(), out::TEXT_CHARS_MAX);
    let name = format!("{}/{}", text(&s["workflow"]), text(&s["name"]));
    let next = match (&s["enabled"], &s["paused"], s["next_fires"][0].as_u64()) {
        (Value::Bool(false), _, _) => "disabled".to_owned(),
        (_, Value::Bool(true), _) => "paused".to_owned(),
        (_, _, Some(ms)) => utc(ms),
        (_, _, None) => "never".to_owned(),
    };
    let last = &s["last_fire"];
    let (last_fire, run) = match last["fire_time"].as_u64() {
        Some(ms) => (
            utc(ms),
            format!("{} ({})", text(&last["run_id"]), text(&last["state"])),
        ),
        None => ("-".to_owned(), "-".to_owned()),
    };
    format!(
        "{name:<32} {:<20} {:<16} {next:<24} {last_fire:<24}  {run}",
        text(&s["cron"]),
        text(&s["zone"])
    )
}

/// `ms` as RFC 3339 in UTC, to the second.
fn utc(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// What `apollo11 schedule pause|resume` asks.
pub struct Toggle<'a> {
    /// `WORKFLOW/NAME`.
    pub schedule: &'a str,
    /// Pause (or resume).
    pub pause: bool,
    /// Who.
    pub by: &'a str,
    /// Why.
    pub reason: &'a str,
}

/// Pauses or resumes a schedule at the server at `server`; prints its state.
pub async fn toggle(
    server: &str,
    token_file: Option<&Path>,
    asked: &Toggle<'_>,
    json: bool,
) -> Result<Exit, Exit> {
    let (workflow, name) = (asked.schedule.split_once('/'))
        .filter(|(w, n)| !w.is_empty() && !n.is_empty() && !n.contains('/'))
        .ok_or_else(|| {
            Exit::fail(
                2,
                format!("SCHEDULE `{}`: give WORKFLOW/NAME", asked.schedule),
            )
        })?;
    let verb = if asked.pause { "pause" } else { "resume" };
    let path = format!("/api/v1/schedules/{workflow}/{name}/{verb}");
    let body = json!({ "by": asked.by, "reason": asked.reason });
    let answer = crate::worker::fetch(server, token_file, &path, Some(&body)).await?;
    if json {
        out::line(answer.to_string())?;
    } else {
        out::line(format!("{}: {}", asked.schedule, pause_text(&answer)))?;
    }
    Ok(Exit::code(0))
}

/// A pause state: `paused by NAME since TIME: REASON` (or `resumed ...`).
fn pause_text(pause: &Value) -> String {
    let text = |v: &Value| out::shown(v.as_str().unwrap_or_default(), out::TEXT_CHARS_MAX);
    let verb = if pause["paused"] == true {
        "paused"
    } else {
        "resumed"
    };
    let since = pause["since"].as_u64().map(utc).unwrap_or_default();
    format!(
        "{verb} by {} since {since}: {}",
        text(&pause["by"]),
        text(&pause["reason"])
    )
}

/// What `apollo11 backfill` asks.
pub struct Backfill<'a> {
    /// The workflow.
    pub workflow: &'a str,
    /// Its schedule (its only one when `None`).
    pub schedule: Option<&'a str>,
    /// The range, RFC 3339, both ends included.
    pub from: &'a str,
    /// Its end.
    pub to: &'a str,
    /// Runs running at once at most.
    pub max_parallel: u32,
    /// Says what would start, starting nothing.
    pub dry_run: bool,
    /// Confirms more than 10,000 fire times.
    pub yes: bool,
}

/// Asks the server at `server` for a backfill; prints what starts (or would).
pub async fn backfill(
    server: &str,
    token_file: Option<&Path>,
    asked: &Backfill<'_>,
    json: bool,
) -> Result<Exit, Exit> {
    let (from, to) = (ms(asked.from, "--from")?, ms(asked.to, "--to")?);
    if to < from {
        return Err(Exit::fail(
            2,
            format!("--to `{}` is before --from `{}`", asked.to, asked.from),
        ));
    }
    let body = json!({
        "workflow": asked.workflow,
        "schedule": asked.schedule,
        "from": from,
        "to": to,
        "max_parallel": asked.max_parallel,
        "dry_run": asked.dry_run,
        "yes": asked.yes,
    });
    let path = "/api/v1/schedules/backfill";
    let answer = crate::worker::fetch(server, token_file, path, Some(&body)).await?;
    if json {
        out::line(answer.to_string())?;
        return Ok(Exit::code(0));
    }
    let verb = if asked.dry_run {
        "would start"
    } else {
        "starting"
    };
    out::line(format!(
        "{} fire times of {}/{}: {} have a run; {verb} {}",
        answer["fires"],
        out::shown(
            answer["workflow"].as_str().unwrap_or_default(),
            out::TEXT_CHARS_MAX
        ),
        out::shown(
            answer["schedule"].as_str().unwrap_or_default(),
            out::TEXT_CHARS_MAX
        ),
        answer["existing"],
        answer["starting_count"],
    ))?;
    for run in answer["starting"].as_array().into_iter().flatten() {
        out::line(format!(
            "  {}",
            out::shown(run.as_str().unwrap_or_default(), out::TEXT_CHARS_MAX)
        ))?;
    }
    Ok(Exit::code(0))
}

/// An RFC 3339 time (`2026-12-01T00:00:00Z`) in ms since the epoch; exit 2 naming `flag`.
fn ms(text: &str, flag: &str) -> Result<u64, Exit> {
    let at = humantime::parse_rfc3339_weak(text).map_err(|e| {
        Exit::fail(
            2,
            format!("{flag} `{text}`: {e}; give e.g. 2026-12-01T00:00:00Z"),
        )
    })?;
    let since = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Ok(since.as_millis() as u64)
}
