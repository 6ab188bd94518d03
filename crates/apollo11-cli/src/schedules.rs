//! `apollo11 schedules`: the schedules a server fires (`GET /api/v1/schedules`): each with
//! its next fire time, its last fire and that run's state.

use crate::{out, Exit};
use serde_json::Value;
use std::path::Path;

/// Lists the schedules of the server at `server`; `--json` prints the API's answer.
pub async fn list(server: &str, token_file: Option<&Path>, json: bool) -> Result<Exit, Exit> {
    let body = crate::worker::fetch(server, token_file, "/api/v1/schedules").await?;
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
    }
    Ok(Exit::code(0))
}

/// One schedule: `WORKFLOW/NAME`, its expression and zone, next and last fire (UTC), and
/// the last fire's run with its state.
fn line(s: &Value) -> String {
    let text = |v: &Value| out::shown(v.as_str().unwrap_or_default(), out::TEXT_CHARS_MAX);
    let name = format!("{}/{}", text(&s["workflow"]), text(&s["name"]));
    let next = match (&s["enabled"], s["next_fires"][0].as_u64()) {
        (Value::Bool(false), _) => "disabled".to_owned(),
        (_, Some(ms)) => utc(ms),
        (_, None) => "never".to_owned(),
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
