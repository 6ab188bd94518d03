//! Shell steps: `sh -c COMMAND` in the workflow file's folder, in a process group of its own
//! so a timeout, Ctrl-C or a crash of the engine's driver kills everything it started.
//! Output and logs stay in the data directory (`files.rs`); events only point at them.
//!
//! A step's `sh` starts behind a gate: it waits on its stdin until its place (host and
//! process group, `group.rs`) is durable in the log, and exits without running the command
//! if `apollo11` dies first. A later `apollo11` that finds the try unfinished stops that
//! group (or pauses the run when it runs on another host), and takes what the try left in
//! its output file as its marker for the next attempt.
//!
//! Each attempt renders its command, `env` and `cwd` from what it sees (`command.rs`), runs
//! with only the engine's variables `env_pass` lets through, reads its dependencies' outputs
//! and the run's arguments from files (`inputs.rs`), and records the command as it runs and
//! its folder with its place, for front ends to show.

mod command;
mod group;
mod inputs;

pub use command::{render, shell_text, source_offset};

use crate::definition::{COMPENSATE, DIR, NON_RETRYABLE, RUN};
use crate::files::{
    create_private_dir, create_private_file, read_output, step_files, OutputError, StepFiles,
};
use apollo11_core::{check_name, limits, NameKind, WorkflowSpec};
use apollo11_runtime::{
    Leftover, Output, Settled, Step, StepContext, StepError, Workflow, WorkflowError,
};
use async_trait::async_trait;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

/// Where a shell step's try was placed, in words (`pid 10268 on db1 (boot 8c1f2a3b)`);
/// `None` for a handle that names no process group (another step executor's).
pub fn place_words(host: &str, handle: &str) -> Option<String> {
    serde_json::from_str::<group::Group>(handle)
        .ok()
        .map(|g| g.words(host))
}

/// One step of a workflow file.
pub struct ShellStep {
    run: String,
    compensate: Option<String>,
    dir: PathBuf,
    non_retryable: Vec<i32>,
    data_dir: PathBuf,
    rendering: command::Rendering,
}

impl ShellStep {
    /// A step file as an error names it: relative to the data dir, since error texts reach
    /// API and UI users, who are not shown where the server keeps its files.
    fn shown(&self, path: &Path) -> String {
        let inside = path.strip_prefix(&self.data_dir).unwrap_or(path);
        format!("{} in the data dir", inside.display())
    }
}

/// Kills a process group when dropped, unless the process finished first.
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

/// Builds the runtime workflow for a spec made by `definition::load` (or pinned by a run).
///
/// # Errors
///
/// What [`Workflow::from_spec`] returns for a spec that is not a valid workflow.
///
/// # Panics
///
/// If `data_dir` is relative: callers make it absolute first, as steps run in another folder.
pub fn workflow(spec: &WorkflowSpec, data_dir: &Path) -> Result<Workflow, WorkflowError> {
    // Steps run in their workflow's folder: a relative path would point somewhere else.
    assert!(
        data_dir.is_absolute(),
        "the data dir is made absolute first"
    );
    let dir = PathBuf::from(spec.attributes.get(DIR).map_or(".", String::as_str));
    Workflow::from_spec(spec.clone(), |s| {
        let non_retryable = s.attributes.get(NON_RETRYABLE).map_or(Vec::new(), |codes| {
            codes.split(',').filter_map(|c| c.parse().ok()).collect()
        });
        Arc::new(ShellStep {
            run: s.attributes.get(RUN).cloned().unwrap_or_default(),
            compensate: s.attributes.get(COMPENSATE).cloned(),
            dir: dir.clone(),
            non_retryable,
            data_dir: data_dir.to_path_buf(),
            rendering: command::Rendering::of(spec, s),
        })
    })
}

/// Payloads up to this size are also passed in an environment variable. Linux refuses to
/// start a process with one variable over 128 KiB; the `*_FILE` variable always works.
pub const ENV_PAYLOAD_BYTES_MAX: usize = 32 * 1024;

/// What `sh -c GATE sh COMMAND` runs: wait for `go` on stdin (sent once the place is
/// durable; end of file if `apollo11` died), then become `sh -c COMMAND` with stdin empty.
const GATE: &str = r#"IFS= read -r go && [ "$go" = go ] || exit 125; exec sh -c "$1" </dev/null"#;

impl ShellStep {
    async fn exec(
        &self,
        command: &str,
        ctx: &StepContext,
        compensation: bool,
    ) -> Result<Output, StepError> {
        let io = |what: &str, e: std::io::Error| StepError::retryable(format!("{what}: {e}"));
        for (kind, name) in [
            (NameKind::Run, ctx.run_id.as_str()),
            (NameKind::Step, ctx.step.as_str()),
        ] {
            check_name(kind, name).map_err(|e| StepError::fatal(e.to_string()))?;
        }
        let files = step_files(
            &self.data_dir,
            ctx.run_id.as_str(),
            ctx.step.as_str(),
            ctx.attempt,
            compensation,
        );
        let folder = files.log.parent().expect("step files live in a folder");
        create_private_dir(folder).map_err(|e| io("creating the step's folder", e))?;
        // An empty output file of our own: what the step writes there stays private, and a
        // crashed earlier try of this attempt leaves nothing behind for this one.
        create_private_file(&files.output).map_err(|e| io("creating the output file", e))?;
        let log = create_private_file(&files.log).map_err(|e| io("creating the step log", e))?;
        let prepared = self.rendering.prepare(command, ctx.scope(), &self.dir)?;
        let mut cmd = tokio::process::Command::new("sh");
        environment(&mut cmd, &prepared, &files, ctx);
        cmd.args(["-c", GATE, "sh", &prepared.command])
            .current_dir(&prepared.dir)
            .stdin(Stdio::piped())
            .stdout(log.try_clone().map_err(|e| io("opening the step log", e))?)
            .stderr(log)
            .process_group(0);
        let payload = if compensation {
            ctx.output.as_deref().map(|p| ("APOLLO11_STEP_OUTPUT", p))
        } else {
            ctx.previous_payload
                .as_deref()
                .map(|p| ("APOLLO11_PREVIOUS_PAYLOAD", p))
        };
        // The files handed over are removed however the attempt ends.
        let result = async {
            inputs::write(&files, ctx.scope()).map_err(|e| io("writing the step's inputs", e))?;
            if let Some((var, bytes)) = payload {
                pass_payload(&mut cmd, var, &files.payload, bytes)
                    .map_err(|e| io("writing the payload file", e))?;
            }
            self.wait(cmd, &prepared, &files, ctx).await
        }
        .await;
        if payload.is_some() {
            let _ = std::fs::remove_file(&files.payload);
        }
        inputs::remove(&files);
        result
    }

    /// Runs the process to its end and turns its exit and output into the attempt's result.
    async fn wait(
        &self,
        mut cmd: tokio::process::Command,
        prepared: &command::Prepared,
        files: &StepFiles,
        ctx: &StepContext,
    ) -> Result<Output, StepError> {
        let io = |what: &str, e: std::io::Error| StepError::retryable(format!("{what}: {e}"));
        let mut child = cmd.spawn().map_err(|e| {
            io(
                &format!(
                    "starting `sh -c {}` in {}",
                    prepared.command,
                    prepared.dir.display()
                ),
                e,
            )
        })?;
        let mut guard = GroupGuard(child.id().map(|id| id as i32));
        let pid = child
            .id()
            .ok_or_else(|| StepError::retryable("the step's sh ended at once"))?;
        let group =
            group::Group::led_by(pid).map_err(|e| io("finding the step's process group", e))?;
        let host = group::host().map_err(|e| io("reading this host's name", e))?;
        // Nothing runs before its place is durable: the gate opens after this.
        ctx.placed_with(&host, &group.handle(), prepared.detail())
            .await?;
        let gate = child.stdin.take().expect("stdin is piped");
        // Three bytes into an empty pipe: the write cannot block.
        let gate = gate
            .into_owned_fd()
            .map_err(|e| io("opening the step's gate", e))?;
        std::fs::File::from(gate)
            .write_all(b"go\n")
            .map_err(|e| io("opening the step's gate", e))?;
        let status = child
            .wait()
            .await
            .map_err(|e| io("waiting for the step", e))?;
        guard.0 = None;
        // Relative to the data dir: error texts reach API and UI users, who are not shown
        // where the server keeps its files.
        let log = self.shown(&files.log);
        let written = output(&files.output, &self.shown(&files.output))?;
        match status.code() {
            Some(0) => Ok(Output(written)),
            Some(code) => {
                let message = format!("exited with code {code} (log: {log})");
                let error = if self.non_retryable.contains(&code) {
                    StepError::fatal(message)
                } else {
                    StepError::retryable(message)
                };
                Err(if written.is_empty() {
                    error
                } else {
                    error.with_payload(written)
                })
            }
            None => Err(StepError::retryable(format!(
                "killed by a signal (log: {log})"
            ))),
        }
    }
}

/// The process's environment: the engine's own variables (only those `env_pass` lists, when
/// the workflow has one), then the step's `env` and its secrets' variables, then the
/// `APOLLO11_*` variables (which nothing overrides).
fn environment(
    cmd: &mut tokio::process::Command,
    prepared: &command::Prepared,
    files: &StepFiles,
    ctx: &StepContext,
) {
    if let Some(pass) = &prepared.pass {
        cmd.env_clear();
        for var in pass {
            if let Some(value) = std::env::var_os(var) {
                cmd.env(var, value);
            }
        }
    }
    cmd.envs(prepared.env.iter().map(|(k, v)| (k, v)))
        .env("APOLLO11_RUN_ID", ctx.run_id.as_str())
        .env("APOLLO11_STEP", ctx.step.as_str())
        .env("APOLLO11_ATTEMPT", ctx.attempt.to_string())
        .env("APOLLO11_IDEMPOTENCY_KEY", &ctx.idempotency_key)
        .env("APOLLO11_OUTPUT", &files.output)
        .env("APOLLO11_INPUTS", &files.inputs)
        .env("APOLLO11_PARAMS", &files.params);
}

/// Hands a payload to a step: always as a file (`VAR_FILE`, 0600, in the data dir), and also
/// in `VAR` itself when it is small and free of NUL (which no environment variable can hold).
fn pass_payload(
    cmd: &mut tokio::process::Command,
    var: &str,
    path: &Path,
    bytes: &[u8],
) -> std::io::Result<()> {
    create_private_file(path)?.write_all(bytes)?;
    cmd.env(format!("{var}_FILE"), path);
    if bytes.len() <= ENV_PAYLOAD_BYTES_MAX && !bytes.contains(&0) {
        cmd.env(var, String::from_utf8_lossy(bytes).as_ref());
    }
    Ok(())
}

/// The step's output file, bounded by `STEP_OUTPUT_BYTES_MAX`: an output over it is a
/// failure no retry can fix, found from the file's size before anything is read.
/// The output file at `path` (`shown` as [`ShellStep::shown`] says it) as a payload.
fn output(path: &Path, shown: &str) -> Result<Vec<u8>, StepError> {
    let max = limits::STEP_OUTPUT_BYTES_MAX;
    read_output(path, max).map_err(|e| match e {
        OutputError::TooLarge { bytes } => StepError::fatal(format!(
            "the output file {shown} is {bytes} bytes, over the limit of {max} bytes (STEP_OUTPUT_BYTES_MAX); write large results to a file of the step's own and put its path in the output"
        )),
        OutputError::Io(e) => StepError::retryable(format!("reading the output file {shown}: {e}")),
    })
}

#[async_trait]
impl Step for ShellStep {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        self.exec(&self.run, ctx, false).await
    }

    async fn compensate(&self, ctx: &StepContext) -> Result<(), StepError> {
        match &self.compensate {
            Some(command) => self.exec(command, ctx, true).await.map(|_| ()),
            None => Err(StepError::fatal("this step has no compensation")),
        }
    }

    fn has_compensation(&self) -> bool {
        self.compensate.is_some()
    }

    /// Stops the try's process group if it may still run, and takes its output file as the
    /// marker for the next attempt.
    async fn settle(&self, leftover: &Leftover) -> Settled {
        if let Some(place) = &leftover.place {
            if let Err(reason) = group::stop(&place.host, &place.handle).await {
                return Settled::Unreachable { reason };
            }
        }
        let files = step_files(
            &self.data_dir,
            leftover.run_id.as_str(),
            leftover.step.as_str(),
            leftover.attempt,
            leftover.kind.is_compensation(),
        );
        inputs::remove(&files);
        // An output over the limit, or one that cannot be read, is no marker.
        let marker = read_output(&files.output, limits::STEP_OUTPUT_BYTES_MAX).ok();
        Settled::Stopped { marker }
    }
}
