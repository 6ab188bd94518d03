//! `override`, `pause`, `rollback`, `rerun`, and what every operator action shares: sent to
//! the server that holds the data dir, else appended here for `resume` to act on.

use crate::data::{engine_exit, DataDir};
use crate::remote::{open_or_reach, Remote, Writer};
use crate::{out, Exit};
use apollo11_core::{limits, OverrideTarget};
use apollo11_runtime::{Engine, EngineConfig, EngineError, RunAction, RunId};
use apollo11_store::DynStore;
use serde_json::{json, Value};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;

/// An operator action as both ways of recording it need it.
pub(crate) struct Action<'a> {
    /// The run.
    pub run_id: &'a str,
    /// Its route on the server (`/api/v1/runs/RUN/steps/STEP/rerun`).
    pub path: String,
    /// What the server is sent (`by` and `reason` are added).
    pub body: Value,
    /// What was done, in words: `s set to succeeded`.
    pub done: String,
    /// What acts on it once appended here: ``continue with `apollo11 resume RUN` ``.
    pub next: String,
    /// Why.
    pub reason: &'a str,
    /// Who.
    pub by: &'a str,
}

/// Records `action`: through the server that holds the data dir, else by `local` on an
/// engine of this process (an operator's action is appended unfenced, whoever drives the
/// run). `local` hands the engine back with its answer.
pub(crate) async fn perform<F, Fut>(
    dir: &DataDir,
    token_file: Option<&Path>,
    action: Action<'_>,
    local: F,
) -> Result<Exit, Exit>
where
    F: FnOnce(Engine<DynStore>) -> Fut,
    Fut: Future<Output = (Engine<DynStore>, Result<(), EngineError>)>,
{
    let Action {
        run_id,
        path,
        mut body,
        done,
        next,
        reason,
        by,
    } = action;
    label("--reason", reason, limits::ERROR_MESSAGE_BYTES_MAX)?;
    apollo11_core::check_operator("--by", by).map_err(|e| Exit::fail(2, e))?;
    let store = match open_or_reach(dir, token_file).await? {
        Writer::Local(log) => Arc::new(log),
        Writer::Server(server) => {
            body["by"] = json!(by);
            body["reason"] = json!(reason);
            let answer = server.post(&path, body).await?;
            out::line(format!(
                "{run_id}: {done} by {by} ({reason}), event {}; the server drives the run on",
                answer["event_id"]
            ))?;
            return Ok(Exit::code(0));
        }
    };
    let engine = Engine::open(store, EngineConfig::default())
        .await
        .map_err(engine_exit)?;
    let (engine, answer) = local(engine).await;
    engine.close().await;
    answer.map_err(engine_exit)?;
    out::line(format!("{run_id}: {done} by {by} ({reason}); {next}"))?;
    Ok(Exit::code(0))
}

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
    let action = Action {
        run_id,
        path: format!("{}/override", Remote::step_path(run_id, step)),
        body: json!({"to": to.name()}),
        done: format!("{step} set to {}", to.name()),
        next: format!("continue with `apollo11 resume {run_id}`"),
        reason,
        by,
    };
    perform(dir, token_file, action, |engine| async move {
        let id = RunId::from(run_id);
        let done = engine.override_step(&id, step, to, by, reason).await;
        (engine, done.map(drop))
    })
    .await
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
    let recorded = Action {
        run_id,
        path: format!("{}/{}", Remote::run_path(run_id), action.name()),
        body: json!({}),
        done: format!("{action} recorded,"),
        next: match action {
            RunAction::Pause => format!("`apollo11 resume` lifts it {run_id}"),
            RunAction::Resume | RunAction::Rollback => {
                format!("it happens at the next `apollo11 resume` {run_id}")
            }
        },
        reason,
        by,
    };
    perform(dir, token_file, recorded, |engine| async move {
        let id = RunId::from(run_id);
        let done = match action {
            RunAction::Pause => engine.pause(&id, by, reason).await,
            RunAction::Resume => engine.unpause(&id, by, reason).await,
            RunAction::Rollback => engine.request_rollback(&id, by, reason).await,
        };
        (engine, done.map(drop))
    })
    .await
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
    let Rerun { step, downstream } = rerun;
    let action = Action {
        run_id,
        path: format!("{}/rerun", Remote::step_path(run_id, step)),
        body: json!({"downstream": downstream}),
        done: format!("rerun of {step} recorded,"),
        next: format!("it happens at the next `apollo11 resume {run_id}`"),
        reason,
        by,
    };
    perform(dir, token_file, action, |engine| async move {
        let id = RunId::from(run_id);
        let done = engine.rerun(&id, step, downstream, by, reason).await;
        (engine, done.map(drop))
    })
    .await
}
