//! `run` and `resume`: drive a run on the engine, show it live, stop cleanly on Ctrl-C.

use crate::data::{engine_exit, open_writer, DataDir};
use crate::{definition, render, shell, watch, Exit};
use apollo11_core::WorkflowSpec;
use apollo11_runtime::{Engine, EngineConfig, EngineError, RunHandle, RunId, RunStatus};
use std::path::Path;
use std::sync::Arc;

pub async fn start(
    dir: &DataDir,
    file: &Path,
    run_id: Option<String>,
    json: bool,
) -> Result<Exit, Exit> {
    let spec = definition::load(file).map_err(|e| Exit::fail(2, e.to_string()))?;
    let run_id = RunId(run_id.unwrap_or_else(|| default_run_id(&spec)));
    let store = Arc::new(open_writer(dir)?);
    let engine = Engine::open(store.clone(), EngineConfig::default())
        .await
        .map_err(engine_exit)?;
    let workflow = engine.register(
        shell::workflow(&spec, dir)
            .map_err(|e| Exit::fail(2, format!("{}: {e}", file.display())))?,
    );
    let handle = engine.start(&workflow, run_id).await.map_err(engine_exit)?;
    let exit = follow(dir, store, &engine, &spec, handle, json).await;
    engine.close().await;
    exit
}

pub async fn resume(dir: &DataDir, run_id: &str, json: bool) -> Result<Exit, Exit> {
    let store = Arc::new(open_writer(dir)?);
    let engine = Engine::open(store.clone(), EngineConfig::default())
        .await
        .map_err(engine_exit)?;
    let id = RunId::from(run_id);
    let spec = crate::data::load_run(store.as_ref(), run_id, None)
        .await?
        .spec;
    engine.register(shell::workflow(&spec, dir).map_err(|e| Exit::fail(1, e.to_string()))?);
    lift_pause(&engine, &id).await?;
    let handle = engine.resume(id).await.map_err(engine_exit)?;
    let exit = follow(dir, store, &engine, &spec, handle, json).await;
    engine.close().await;
    exit
}

/// `resume` is an operator's decision to go on: it lifts an operator's pause, recorded as
/// `RunResumed` by `$USER`.
async fn lift_pause<S: apollo11_runtime::Store>(
    engine: &Engine<S>,
    id: &RunId,
) -> Result<(), Exit> {
    let state = engine.state(id).await.map_err(engine_exit)?;
    if state.paused.is_none() {
        return Ok(());
    }
    let by = std::env::var("USER").unwrap_or_else(|_| "operator".to_owned());
    match engine
        .unpause(id, &by, "resumed with `apollo11 resume`")
        .await
    {
        // A finished run stays as it is; resume reports it.
        Ok(()) | Err(EngineError::NotAllowed { .. }) => Ok(()),
        Err(e) => Err(engine_exit(e)),
    }
}

/// A run id that sorts by start time and says what ran.
fn default_run_id(spec: &WorkflowSpec) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}-{}",
        spec.name,
        humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(now.as_secs())
        )
    )
    .replace(':', "")
}

/// Waits for the run while showing it; on Ctrl-C stops every step and leaves the run to resume.
async fn follow<S: apollo11_runtime::Store>(
    dir: &Path,
    store: Arc<S>,
    engine: &Engine<S>,
    spec: &WorkflowSpec,
    handle: RunHandle,
    json: bool,
) -> Result<Exit, Exit> {
    let run_id = handle.run_id().clone();
    let abort = handle.abort_handle();
    let watcher = (!json).then(|| watch::spawn(store, run_id.clone(), spec.clone()));
    let outcome = tokio::select! {
        outcome = handle.outcome() => Some(outcome),
        () = interrupted() => None,
    };
    if let Some(w) = watcher {
        w.finish().await;
    }
    let Some(outcome) = outcome else {
        abort.abort();
        return Err(Exit::fail(
            130,
            format!(
                "interrupted: running steps were stopped; continue with `apollo11 resume {run_id}`"
            ),
        ));
    };
    let status = outcome.map_err(engine_exit)?;
    let state = engine.state(&run_id).await.map_err(engine_exit)?;
    if json {
        println!("{}", render::status_json(&run_id, status, &state, spec));
    } else {
        println!(
            "{}",
            render::status_table(&run_id, status, &state, spec, dir)
        );
    }
    Ok(Exit::code(if status == RunStatus::Succeeded {
        0
    } else {
        1
    }))
}

/// Ctrl-C or SIGTERM (what `timeout`, systemd and Kubernetes send).
async fn interrupted() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
