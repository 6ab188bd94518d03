//! `run` and `resume`: drive a run on the engine, show it live, stop cleanly on Ctrl-C.

use crate::data::{engine_exit, open_engine, DataDir};
use crate::definition::{self, ParamArgs};
use crate::remote::{open_or_reach, Remote, Writer};
use crate::{out, render, watch, Exit};
use apollo11_core::WorkflowSpec;
use apollo11_runtime::{Engine, EngineError, Inspector, RunHandle, RunId, RunStatus};
use apollo11_shell::run_folder::{self, default_run_id};
use apollo11_shell::shell;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// How `run` reaches a server holding the data dir: with the token of `--token-file`, and
/// whether it starts the served definition when the file's is another (`--use-served`).
pub struct RemoteStart<'a> {
    pub token: Option<&'a Path>,
    pub use_served: bool,
}

pub async fn start(
    dir: &DataDir,
    file: &Path,
    params: &ParamArgs,
    run_id: Option<String>,
    json: bool,
    remote: RemoteStart<'_>,
) -> Result<Exit, Exit> {
    let mut interrupts = Interrupts::install()?;
    // Everything is checked before the data dir is opened: bad values create nothing.
    let given = definition::given(file, params)?;
    let spec = definition::instantiate(file, &given)?;
    if let Some(id) = &run_id {
        crate::run_id_arg("--run-id", id)?;
    }
    let store = match open_or_reach(dir, remote.token).await? {
        Writer::Local(log) => {
            shell::check_limits(&spec).map_err(|e| Exit::fail(2, e))?;
            Arc::new(log)
        }
        Writer::Server(server) => {
            let mine = (!remote.use_served).then_some((file, &given.declared));
            let run_id = server
                .start(&spec.name, run_id, mine, &given.values)
                .await?;
            return follow_remote(&server, &run_id, json, &mut interrupts).await;
        }
    };
    let engine = open_engine(&store).await?;
    let workflow = Arc::new(
        shell::workflow(&spec, dir)
            .map_err(|e| Exit::fail(2, format!("{}: {e}", file.display())))?,
    );
    let handle = match run_id {
        Some(id) => {
            run_folder::create(dir, &id, &spec).map_err(|e| Exit::fail(2, e.to_string()))?;
            engine
                .start(&workflow, RunId(id))
                .await
                .map_err(engine_exit)?
        }
        None => start_with_default_id(dir, &engine, &workflow).await?,
    };
    let exit = follow(dir, store, &spec, handle, json, &mut interrupts).await;
    engine.close().await;
    exit
}

/// Starts a run under a new default id: a second run in the same millisecond (or a clock
/// set back) gets a suffix rather than an error.
async fn start_with_default_id<S: apollo11_runtime::Store>(
    dir: &DataDir,
    engine: &Engine<S>,
    workflow: &Arc<apollo11_runtime::Workflow>,
) -> Result<RunHandle, Exit> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    let spec = workflow.spec();
    let mut n = 1;
    loop {
        let id = default_run_id(&spec.name, now_ms, n);
        run_folder::create(dir, &id, spec).map_err(|e| Exit::fail(2, e.to_string()))?;
        match engine.start(workflow, RunId(id)).await {
            Err(EngineError::RunExists { .. }) if n < DEFAULT_ID_TRIES => n += 1,
            other => return other.map_err(engine_exit),
        }
    }
}

pub async fn resume(
    dir: &DataDir,
    run_id: &str,
    json: bool,
    token_file: Option<&Path>,
) -> Result<Exit, Exit> {
    let mut interrupts = Interrupts::install()?;
    let store = match open_or_reach(dir, token_file).await? {
        Writer::Local(log) => Arc::new(log),
        Writer::Server(server) => {
            let path = format!("{}/resume", Remote::run_path(run_id));
            server
                .post(&path, json!({"by": operator(), "reason": RESUME_REASON}))
                .await?;
            return follow_remote(&server, run_id, json, &mut interrupts).await;
        }
    };
    let engine = open_engine(&store).await?;
    let id = RunId::from(run_id);
    let spec = Inspector::new(store.clone())
        .definition(&id)
        .await
        .map_err(engine_exit)?;
    let workflow = Arc::new(shell::workflow(&spec, dir).map_err(|e| Exit::fail(1, e.to_string()))?);
    lift_pause(&engine, &id).await?;
    let handle = engine.resume(&workflow, id).await.map_err(engine_exit)?;
    let exit = follow(dir, store, &spec, handle, json, &mut interrupts).await;
    engine.close().await;
    exit
}

/// Follows a run the server drives; Ctrl-C stops following, not the run.
async fn follow_remote(
    server: &Remote,
    run_id: &str,
    json: bool,
    interrupts: &mut Interrupts,
) -> Result<Exit, Exit> {
    tokio::select! {
        exit = server.follow(run_id, json) => exit,
        () = interrupts.recv() => Err(Exit::fail(
            130,
            format!("stopped following; run {run_id} goes on at the server"),
        )),
    }
}

/// Who `resume` says lifted a pause: `$USER`.
fn operator() -> String {
    std::env::var("USER").unwrap_or_else(|_| "operator".to_owned())
}

/// Why, as `resume` records it.
const RESUME_REASON: &str = "resumed with `apollo11 resume`";

/// How many suffixed ids a new run tries before giving up.
const DEFAULT_ID_TRIES: u32 = 100;

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
    match engine.unpause(id, &operator(), RESUME_REASON).await {
        // A finished run stays as it is; resume reports it.
        Ok(_) | Err(EngineError::NotAllowed { .. }) => Ok(()),
        Err(e) => Err(engine_exit(e)),
    }
}

/// Waits for the run while showing it; on Ctrl-C stops every step and leaves the run to resume.
async fn follow<S: apollo11_runtime::Store>(
    dir: &Path,
    store: Arc<S>,
    spec: &WorkflowSpec,
    handle: RunHandle,
    json: bool,
    interrupts: &mut Interrupts,
) -> Result<Exit, Exit> {
    let run_id = handle.run_id().clone();
    let abort = handle.abort_handle();
    let watcher = (!json).then(|| watch::spawn(store.clone(), run_id.clone(), spec.clone()));
    let outcome = tokio::select! {
        outcome = handle.outcome() => Some(outcome),
        () = interrupts.recv() => None,
        () = out::closed() => None,
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
    let view = Inspector::new(store)
        .status(&run_id, None)
        .await
        .map_err(engine_exit)?;
    let shown = if json {
        render::status_json(&view)
    } else {
        render::status_table(&view, dir)
    };
    // The run is over: its status decides the exit code, whether stdout is still read or not.
    let _ = out::line(shown);
    Ok(Exit::code(if status == RunStatus::Succeeded {
        0
    } else {
        1
    }))
}

/// The signals that stop a run and leave it to `resume`: Ctrl-C, SIGTERM (what `timeout`,
/// systemd and Kubernetes send) and SIGHUP (the terminal was closed). Installed before the
/// run starts, so none of them can end the process without stopping its steps.
pub struct Interrupts {
    interrupt: Signal,
    term: Signal,
    hangup: Signal,
}

impl Interrupts {
    pub fn install() -> Result<Interrupts, Exit> {
        let install = |kind: SignalKind| {
            signal(kind).map_err(|e| Exit::fail(1, format!("installing a signal handler: {e}")))
        };
        Ok(Interrupts {
            interrupt: install(SignalKind::interrupt())?,
            term: install(SignalKind::terminate())?,
            hangup: install(SignalKind::hangup())?,
        })
    }

    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.term.recv() => {}
            _ = self.hangup.recv() => {}
        }
    }
}
