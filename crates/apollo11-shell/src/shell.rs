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

mod cgroup;
mod command;
mod execute;
mod exited;
mod group;
mod inputs;
mod job;
mod limits;
mod remote;
mod waits;

pub use command::{render, shell_text, source_offset};
pub use execute::{
    execute, finished, kill, reattach, Ended, Files, Placing, ENV_PAYLOAD_BYTES_MAX,
};
pub use job::{Job, Outcome};
pub use limits::{set_isolation, Held, Isolation, Limits, LIMITS};
pub use remote::{
    words as label_words, Placement, RemoteHandle, COMPENSATE_ON, ON, QUEUE_TIMEOUT,
    QUEUE_TIMEOUT_DEFAULT_MS,
};
pub use waits::name_waits;

use crate::classify::{rules_of, ClassRule};
use crate::definition::{COMPENSATE, DIR, NON_RETRYABLE, RUN};
use crate::files::{read_output, step_files, StepFiles};
use apollo11_core::{check_name, FailureClass, NameKind, WorkflowSpec};
use apollo11_dispatch::Dispatcher;
use apollo11_runtime::{
    Leftover, Output, Settled, Step, StepContext, StepError, Usage, Workflow, WorkflowError,
};
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a shell step's try was placed, in words (`pid 10268 on db1 (boot 8c1f2a3b)`, with
/// `worker w1` for a try on a worker); `None` for a handle that names no process group
/// (another step executor's).
pub fn place_words(host: &str, handle: &str) -> Option<String> {
    if let Ok(remote) = serde_json::from_str::<RemoteHandle>(handle) {
        let group = serde_json::from_value::<group::Group>(remote.group).ok()?;
        return Some(format!("{}, worker {}", group.words(host), remote.worker));
    }
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
    classes: Vec<ClassRule>,
    limits: Limits,
    data_dir: PathBuf,
    rendering: command::Rendering,
    placement: Placement,
    /// Where tries placed on workers go; `None` where no worker can reach the engine (a
    /// run of the command line), and a placed try fails saying so.
    workers: Option<Dispatcher>,
}

/// Builds the runtime workflow for a spec made by `definition::load` (or pinned by a run),
/// whose placed steps cannot run (no worker reaches a run of the command line).
///
/// # Errors
///
/// What [`Workflow::from_spec`] returns for a spec that is not a valid workflow.
///
/// # Panics
///
/// If `data_dir` is relative: callers make it absolute first, as steps run in another folder.
pub fn workflow(spec: &WorkflowSpec, data_dir: &Path) -> Result<Workflow, WorkflowError> {
    workflow_on(spec, data_dir, None)
}

/// [`workflow`], its placed steps sent to workers through `workers`.
///
/// # Errors
///
/// As [`workflow`].
///
/// # Panics
///
/// As [`workflow`].
pub fn workflow_on(
    spec: &WorkflowSpec,
    data_dir: &Path,
    workers: Option<&Dispatcher>,
) -> Result<Workflow, WorkflowError> {
    // Steps run in their workflow's folder: a relative path would point somewhere else.
    assert!(
        data_dir.is_absolute(),
        "the data dir is made absolute first"
    );
    let dir = PathBuf::from(spec.attributes.get(DIR).map_or(".", String::as_str));
    let classes = rules_of(spec);
    Workflow::from_spec(spec.clone(), |s| {
        let non_retryable = s.attributes.get(NON_RETRYABLE).map_or(Vec::new(), |codes| {
            codes.split(',').filter_map(|c| c.parse().ok()).collect()
        });
        Arc::new(ShellStep {
            run: s.attributes.get(RUN).cloned().unwrap_or_default(),
            compensate: s.attributes.get(COMPENSATE).cloned(),
            dir: dir.clone(),
            non_retryable,
            classes: classes.clone(),
            limits: Limits::of_attributes(&s.attributes),
            data_dir: data_dir.to_path_buf(),
            rendering: command::Rendering::of(spec, s),
            placement: Placement::of(s),
            workers: workers.cloned(),
        })
    })
}

/// Checks that this process can hold the limits of each of `spec`'s steps it runs itself
/// (not those placed on workers), before a run starts: a try would fail at its start.
///
/// # Errors
///
/// The first step whose limits nothing here can hold, and why.
pub fn check_limits(spec: &WorkflowSpec) -> Result<(), String> {
    let here = spec.steps.iter().filter(|s| !s.attributes.contains_key(ON));
    for step in here {
        let limits = Limits::of_attributes(&step.attributes);
        limits::plan(&limits, cgroup::available)
            .map_err(|e| format!("step `{}`: {e}", step.name))?;
    }
    Ok(())
}

/// Records a local try's place as the engine's `Placed`, with what it runs.
struct Recorded<'a> {
    ctx: &'a StepContext,
    detail: Vec<u8>,
}

#[async_trait]
impl Placing for Recorded<'_> {
    async fn placed(&self, host: &str, handle: &str) -> Result<(), StepError> {
        (self.ctx)
            .placed_with(host, handle, self.detail.clone())
            .await
    }

    fn used(&self, usage: Usage) {
        self.ctx.used(usage);
    }

    fn running(&self) {
        self.ctx.measures_when_stopped();
    }

    async fn stopped(&self) {
        self.ctx.cancel.clone().cancelled().await;
    }
}

impl ShellStep {
    /// Runs one try: here, or on a worker when the step is placed.
    async fn exec(
        &self,
        command: &str,
        ctx: &StepContext,
        compensation: bool,
    ) -> Result<Output, StepError> {
        // A try's first poll runs on its run's driver, until the try first waits: the files
        // and the process start in the try's own task instead, beside the driver's work.
        tokio::task::yield_now().await;
        for (kind, name) in [
            (NameKind::Run, ctx.run_id.as_str()),
            (NameKind::Step, ctx.step.as_str()),
        ] {
            check_name(kind, name).map_err(|e| StepError::fatal(e.to_string()))?;
        }
        let prepared = self.rendering.prepare(command, ctx.scope(), &self.dir)?;
        // A retry after an `oom` may run with more memory than the step's own.
        let limits = Limits {
            memory: ctx.memory_limit.or(self.limits.memory),
            ..self.limits.clone()
        };
        let job = Job::of(
            ctx,
            prepared,
            compensation,
            &self.non_retryable,
            &self.classes,
            &limits,
        );
        if let Some(needs) = self.placement.needs(compensation, ctx.scope())? {
            let workers = self.workers.as_ref().ok_or_else(|| {
                StepError::fatal(format!(
                    "no_worker: the step runs on a worker with {}, and only `apollo11 serve` has workers",
                    label_words(&needs)
                ))
                .with_class(FailureClass::NoWorker)
            })?;
            return self.placement.dispatch(workers, needs, &job, ctx).await;
        }
        let files = self.files(
            ctx.run_id.as_str(),
            ctx.step.as_str(),
            ctx.attempt,
            compensation,
        );
        let at = Files {
            files: &files,
            base: &self.data_dir,
            base_words: "the data dir",
            exit: None,
        };
        let placing = Recorded {
            ctx,
            detail: job.detail_here(),
        };
        execute(&job, &at, &placing).await
    }

    fn files(&self, run: &str, step: &str, attempt: u32, compensation: bool) -> StepFiles {
        step_files(&self.data_dir, run, step, attempt, compensation)
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

    /// Stops the try's process group if it may still run (on a worker, through it), reads
    /// what it used from the cgroup a dead engine left of it and removes that, and takes its
    /// output file as the marker for the next attempt.
    async fn settle(&self, leftover: &Leftover) -> Settled {
        let mut used = None;
        if let Some(place) = &leftover.place {
            if RemoteHandle::of(place).is_some() {
                return match &self.workers {
                    Some(workers) => remote::settle(workers, place).await,
                    None => Settled::Unreachable {
                        reason: "it ran on a worker, and only `apollo11 serve` reaches workers"
                            .to_owned(),
                    },
                };
            }
            if let Err(reason) = group::stop(&place.host, &place.handle).await {
                return Settled::Unreachable { reason };
            }
            // A dead engine left its cgroup behind: it tells what the try used, then goes.
            let compensation = leftover.kind.is_compensation();
            let (run, step) = (leftover.run_id.as_str(), leftover.step.as_str());
            let name = cgroup::name_of(&self.data_dir, run, step, leftover.attempt, compensation);
            used = cgroup::Cgroup::find(&name).map(|c| c.usage(leftover.started_ms));
        }
        let files = self.files(
            leftover.run_id.as_str(),
            leftover.step.as_str(),
            leftover.attempt,
            leftover.kind.is_compensation(),
        );
        inputs::remove(&files);
        // An output over the limit, or one that cannot be read, is no marker.
        let marker = read_output(&files.output, apollo11_core::limits::STEP_OUTPUT_BYTES_MAX).ok();
        Settled::Stopped { marker, used }
    }

    fn can_adopt(&self, leftover: &Leftover) -> bool {
        self.workers.is_some() && leftover.place.as_ref().and_then(RemoteHandle::of).is_some()
    }

    async fn adopt(&self, ctx: &StepContext, leftover: &Leftover) -> Result<Output, StepError> {
        match &self.workers {
            Some(workers) => remote::adopt(workers, ctx, leftover).await,
            None => Err(StepError::lost("only `apollo11 serve` reaches workers")),
        }
    }
}
