//! Shell steps: `sh -c COMMAND` in the workflow file's folder, in a process group of its own
//! so a timeout, Ctrl-C or a crash of the engine's driver kills everything it started.
//! Output and logs stay in the data directory; events only point at them.

use crate::definition::{COMPENSATE, DIR, NON_RETRYABLE, RUN};
use apollo11_core::WorkflowSpec;
use apollo11_runtime::{
    Output, Step, StepBuilder, StepContext, StepError, Workflow, WorkflowError,
};
use async_trait::async_trait;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// One step of a workflow file.
pub struct ShellStep {
    run: String,
    compensate: Option<String>,
    dir: PathBuf,
    non_retryable: Vec<i32>,
    data_dir: PathBuf,
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
pub fn workflow(spec: &WorkflowSpec, data_dir: &Path) -> Result<Workflow, WorkflowError> {
    let dir = PathBuf::from(spec.attributes.get(DIR).map_or(".", String::as_str));
    let mut builder = Workflow::builder(&spec.name)
        .on_failure(spec.on_failure)
        .max_concurrency(spec.max_concurrency);
    for (key, value) in &spec.attributes {
        builder = builder.attribute(key, value);
    }
    for s in &spec.steps {
        let non_retryable = s.attributes.get(NON_RETRYABLE).map_or(Vec::new(), |codes| {
            codes.split(',').filter_map(|c| c.parse().ok()).collect()
        });
        let code = ShellStep {
            run: s.attributes.get(RUN).cloned().unwrap_or_default(),
            compensate: s.attributes.get(COMPENSATE).cloned(),
            dir: dir.clone(),
            non_retryable,
            data_dir: data_dir.to_path_buf(),
        };
        let deps: Vec<&str> = s.depends_on.iter().map(String::as_str).collect();
        let mut step = StepBuilder::new(&s.name, code)
            .depends_on(&deps)
            .idempotency(s.idempotency)
            .retry(s.retry.clone())
            .timeout(s.timeout);
        for (key, value) in &s.attributes {
            step = step.attribute(key, value);
        }
        builder = builder.step(step);
    }
    builder.build()
}

/// Where an attempt's log goes.
pub fn log_path(
    data_dir: &Path,
    run: &str,
    step: &str,
    attempt: u32,
    compensation: bool,
) -> PathBuf {
    let suffix = if compensation { ".compensate" } else { "" };
    data_dir
        .join("logs")
        .join(run)
        .join(format!("{step}.{attempt}{suffix}.log"))
}

impl ShellStep {
    async fn exec(
        &self,
        command: &str,
        ctx: &StepContext,
        compensation: bool,
    ) -> Result<Output, StepError> {
        let io = |what: &str, e: std::io::Error| StepError::retryable(format!("{what}: {e}"));
        let log = log_path(
            &self.data_dir,
            ctx.run_id.as_str(),
            ctx.step.as_str(),
            ctx.attempt,
            compensation,
        );
        let output = log.with_extension("output");
        std::fs::create_dir_all(log.parent().expect("logs live in a folder"))
            .map_err(|e| io("creating the log folder", e))?;
        let _ = std::fs::remove_file(&output);
        let file = std::fs::File::create(&log).map_err(|e| io("creating the step log", e))?;
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(command)
            .current_dir(&self.dir)
            .env("APOLLO11_RUN_ID", ctx.run_id.as_str())
            .env("APOLLO11_STEP", ctx.step.as_str())
            .env("APOLLO11_ATTEMPT", ctx.attempt.to_string())
            .env("APOLLO11_IDEMPOTENCY_KEY", &ctx.idempotency_key)
            .env("APOLLO11_OUTPUT", &output)
            .stdin(Stdio::null())
            .stdout(
                file.try_clone()
                    .map_err(|e| io("opening the step log", e))?,
            )
            .stderr(file)
            .process_group(0);
        if let Some(previous) = &ctx.previous_payload {
            cmd.env(
                "APOLLO11_PREVIOUS_PAYLOAD",
                String::from_utf8_lossy(previous).as_ref(),
            );
        }
        if let Some(recorded) = &ctx.output {
            cmd.env(
                "APOLLO11_STEP_OUTPUT",
                String::from_utf8_lossy(recorded).as_ref(),
            );
        }
        let mut child = cmd.spawn().map_err(|e| {
            io(
                &format!("starting `sh -c {command}` in {}", self.dir.display()),
                e,
            )
        })?;
        let mut guard = GroupGuard(child.id().map(|id| id as i32));
        let status = child
            .wait()
            .await
            .map_err(|e| io("waiting for the step", e))?;
        guard.0 = None;
        let written = std::fs::read(&output).unwrap_or_default();
        match status.code() {
            Some(0) => Ok(Output(written)),
            Some(code) => {
                let message = format!("exited with code {code} (log: {})", log.display());
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
                "killed by a signal (log: {})",
                log.display()
            ))),
        }
    }
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
}
