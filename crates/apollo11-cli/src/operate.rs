//! `override`, `pause`, `rollback`, `rerun`.

use crate::data::{engine_exit, DataDir};
use crate::remote::{open_or_reach, Remote, Writer};
use crate::{out, Exit};
use apollo11_core::{limits, OverrideTarget};
use apollo11_runtime::{Engine, EngineConfig, RunAction, RunId};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

pub async fn override_step(
    dir: &DataDir,
    run_id: &str,
    step: &str,
    to: &str,
    reason: &str,
    by: &str,
    token_file: Option<&Path>,
) -> Result<Exit, Exit> {
    let to = OverrideTarget::parse(to).ok_or_else(|| {
        Exit::fail(
            2,
            format!("--to {to}: expected succeeded, skipped, pending or failed"),
        )
    })?;
    label("--reason", reason, limits::ERROR_MESSAGE_BYTES_MAX)?;
    apollo11_core::check_operator("--by", by).map_err(|e| Exit::fail(2, e))?;
    let store = match open_or_reach(dir, token_file).await? {
        Writer::Local(log) => Arc::new(log),
        Writer::Server(server) => {
            let path = format!("{}/override", Remote::step_path(run_id, step));
            let body = json!({"to": to.name(), "by": by, "reason": reason});
            let answer = server.post(&path, body).await?;
            out::line(format!(
                "{run_id}: {step} set to {} by {by} ({reason}), event {}; the server drives the run on",
                to.name(),
                answer["event_id"]
            ))?;
            return Ok(Exit::code(0));
        }
    };
    // An operator's action is appended unfenced, whoever drives the run.
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

/// An operator's note (`--by`, `--reason`), checked as the server checks it.
pub(crate) fn label(flag: &str, text: &str, max_bytes: u32) -> Result<(), Exit> {
    apollo11_core::check_note(flag, text, max_bytes).map_err(|e| Exit::fail(2, e))
}

/// `pause` and `rollback`: an operator action on a whole run, recorded with who and why;
/// `resume` then drives the run (and lifts a pause).
pub async fn act(
    dir: &DataDir,
    run_id: &str,
    action: RunAction,
    reason: &str,
    by: &str,
    token_file: Option<&Path>,
) -> Result<Exit, Exit> {
    label("--reason", reason, limits::ERROR_MESSAGE_BYTES_MAX)?;
    apollo11_core::check_operator("--by", by).map_err(|e| Exit::fail(2, e))?;
    let store = match open_or_reach(dir, token_file).await? {
        Writer::Local(log) => Arc::new(log),
        Writer::Server(server) => {
            let path = format!("{}/{}", Remote::run_path(run_id), action.name());
            let answer = server
                .post(&path, json!({"by": by, "reason": reason}))
                .await?;
            out::line(format!(
                "{run_id}: {action} recorded, by {by} ({reason}), event {}; the server drives the run on",
                answer["event_id"]
            ))?;
            return Ok(Exit::code(0));
        }
    };
    // An operator's action is appended unfenced, whoever drives the run.
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

/// The step a rerun starts from, and whether the steps after it run again too.
pub struct Rerun<'a> {
    pub step: &'a str,
    pub downstream: bool,
}

/// `rerun`: the step (and, with `--downstream`, the steps after it) runs again, recorded with
/// who and why; a server holding the data dir drives the run on, else `resume` does.
pub async fn rerun(
    dir: &DataDir,
    run_id: &str,
    rerun: Rerun<'_>,
    reason: &str,
    by: &str,
    token_file: Option<&Path>,
) -> Result<Exit, Exit> {
    label("--reason", reason, limits::ERROR_MESSAGE_BYTES_MAX)?;
    apollo11_core::check_operator("--by", by).map_err(|e| Exit::fail(2, e))?;
    let step = rerun.step;
    let store = match open_or_reach(dir, token_file).await? {
        Writer::Local(log) => Arc::new(log),
        Writer::Server(server) => {
            let path = format!("{}/rerun", Remote::step_path(run_id, step));
            let body = json!({"by": by, "reason": reason, "downstream": rerun.downstream});
            let answer = server.post(&path, body).await?;
            out::line(format!(
                "{run_id}: rerun of {step} recorded, by {by} ({reason}), event {}; the server drives the run on",
                answer["event_id"]
            ))?;
            return Ok(Exit::code(0));
        }
    };
    let engine = Engine::open(store, EngineConfig::default())
        .await
        .map_err(engine_exit)?;
    let done = (engine.rerun(&RunId::from(run_id), step, rerun.downstream, by, reason)).await;
    engine.close().await;
    done.map_err(engine_exit)?;
    out::line(format!(
        "{run_id}: rerun of {step} recorded, by {by} ({reason}); it happens at the next `apollo11 resume {run_id}`"
    ))?;
    Ok(Exit::code(0))
}
