//! `override`, `pause`, `rollback`, `validate`, `verify`.

use crate::data::{engine_exit, open_writer, DataDir};
use crate::{definition, out, Exit};
use apollo11_core::{limits, OverrideTarget};
use apollo11_runtime::{Engine, EngineConfig, RunAction, RunId};
use std::path::Path;
use std::sync::Arc;

pub async fn override_step(
    dir: &DataDir,
    run_id: &str,
    step: &str,
    to: &str,
    reason: &str,
    by: &str,
) -> Result<Exit, Exit> {
    let to = OverrideTarget::parse(to).ok_or_else(|| {
        Exit::fail(
            2,
            format!("--to {to}: expected succeeded, skipped, pending or failed"),
        )
    })?;
    label("--reason", reason, limits::ERROR_MESSAGE_BYTES_MAX)?;
    label("--by", by, limits::LABEL_BYTES_MAX)?;
    let store = Arc::new(open_writer(dir)?);
    let engine = Engine::open(store, EngineConfig::default())
        .await
        .map_err(engine_exit)?;
    engine
        .override_step(&RunId::from(run_id), step, to, by, reason)
        .await
        .map_err(engine_exit)?;
    engine.close().await;
    out::line(format!(
        "{run_id}: {step} set to {} by {by} ({reason}); continue with `apollo11 resume {run_id}`",
        to.name()
    ))?;
    Ok(Exit::code(0))
}

/// An operator's note (`--by`, `--reason`): kept in the log and shown to whoever reads the
/// run's timeline, so it must say something, fit the store's limit, and be one line of
/// plain text (a newline could forge a line of `events`, an escape sequence drive a
/// terminal).
fn label(flag: &str, text: &str, max_bytes: u32) -> Result<(), Exit> {
    let problem = if text.trim().is_empty() {
        "is empty: it is kept in the log for whoever replays this run".to_owned()
    } else if text.len() > max_bytes as usize {
        format!("is {} bytes; at most {max_bytes} are allowed", text.len())
    } else if text.chars().any(char::is_control) {
        format!(
            "`{}` contains a control character (newline, escape, ...)",
            out::shown(text, out::TEXT_CHARS_MAX)
        )
    } else {
        return Ok(());
    };
    Err(Exit::fail(2, format!("{flag} {problem}")))
}

/// `pause` and `rollback`: an operator action on a whole run, recorded with who and why;
/// `resume` then drives the run (and lifts a pause).
pub async fn act(
    dir: &DataDir,
    run_id: &str,
    action: RunAction,
    reason: &str,
    by: &str,
) -> Result<Exit, Exit> {
    label("--reason", reason, limits::ERROR_MESSAGE_BYTES_MAX)?;
    label("--by", by, limits::LABEL_BYTES_MAX)?;
    let store = Arc::new(open_writer(dir)?);
    let engine = Engine::open(store, EngineConfig::default())
        .await
        .map_err(engine_exit)?;
    let id = RunId::from(run_id);
    let done = match action {
        RunAction::Pause => engine.pause(&id, by, reason).await,
        RunAction::Resume => engine.unpause(&id, by, reason).await,
        RunAction::Rollback => engine.request_rollback(&id, by, reason).await,
    };
    engine.close().await;
    done.map_err(engine_exit)?;
    let next = match action {
        RunAction::Pause => "`apollo11 resume` lifts it",
        RunAction::Resume | RunAction::Rollback => "it happens at the next `apollo11 resume`",
    };
    out::line(format!(
        "{run_id}: {action} recorded, by {by} ({reason}); {next} {run_id}"
    ))?;
    Ok(Exit::code(0))
}

pub fn validate(file: &Path) -> Result<Exit, Exit> {
    let spec = definition::load(file).map_err(|e| Exit::fail(2, e.to_string()))?;
    out::line(format!(
        "{}: workflow `{}` with {} steps is valid",
        file.display(),
        spec.name,
        spec.steps.len()
    ))?;
    Ok(Exit::code(0))
}

pub fn verify(dir: &Path, json: bool) -> Result<Exit, Exit> {
    crate::data::check_layout(dir)?;
    let report = apollo11_log::verify(dir).map_err(crate::data::store_exit)?;
    if json {
        let segments: Vec<_> = report.segments.iter().map(|s| serde_json::json!({"file": s.file, "base_event_id": s.base_event_id, "events": s.events, "bytes": s.bytes})).collect();
        let snapshots: Vec<_> = report.snapshots.iter().map(|s| serde_json::json!({"file": s.file, "watermark": s.watermark, "problem": s.problem})).collect();
        let damage = |d: &Option<apollo11_log::Damage>| {
            d.as_ref().map(
                |d| serde_json::json!({"file": d.file, "offset": d.offset, "reason": d.reason}),
            )
        };
        let report_json = serde_json::json!({"clean": report.is_clean(), "events": report.events, "segments": segments, "snapshots": snapshots, "torn_tail": damage(&report.torn_tail), "torn_files": report.torn_files, "damage": damage(&report.damage)});
        out::line(report_json)?;
    } else {
        for s in &report.segments {
            out::line(format!(
                "segment  {:<40} events {:>8} from #{:<8} {} bytes",
                s.file, s.events, s.base_event_id, s.bytes
            ))?;
        }
        for s in &report.snapshots {
            out::line(format!(
                "snapshot {:<40} {}",
                s.file,
                s.problem.clone().unwrap_or_else(|| format!(
                    "ok, covers events up to {}",
                    s.watermark.unwrap_or(0)
                ))
            ))?;
        }
        if let Some(t) = &report.torn_tail {
            out::line(format!("torn tail in {} at offset {}: {} (cut at the next writing open, kept in a .torn file)", t.file, t.offset, t.reason))?;
        }
        for f in &report.torn_files {
            out::line(format!(
                "kept     segments/{f} (bytes cut by an earlier recovery)"
            ))?;
        }
        out::line(match &report.damage {
            Some(d) => format!("DAMAGE   {} at offset {}: {}", d.file, d.offset, d.reason),
            None if report.is_clean() => format!("clean: {} events verified", report.events),
            None => format!(
                "damaged snapshots (the log itself is intact: {} events)",
                report.events
            ),
        })?;
    }
    Ok(Exit::code(if report.is_clean() { 0 } else { 3 }))
}
