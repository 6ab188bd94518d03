//! `override`, `pause`, `rollback`, `validate`.

use crate::data::{engine_exit, open_writer, DataDir};
use crate::{out, Exit};
use apollo11_core::{limits, OverrideTarget};
use apollo11_runtime::{Engine, EngineConfig, RunAction, RunId};
use apollo11_shell::definition;
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
