//! Running one try's [`Job`] as a process, the same way in the engine and on a worker:
//! `sh -c GATE sh COMMAND` in a process group of its own, its environment, inputs and
//! payload handed over as files, the gate opened once the place is recorded, the exit and
//! the output file turned into the attempt's result.

use super::cgroup::Cgroup;
use super::group;
use super::job::Job;
use super::limits::{self, Held};
use crate::classify;
use crate::files::{create_private_dir, create_private_file, read_output, OutputError, StepFiles};
use apollo11_core::{FailureClass, Usage};
use apollo11_runtime::{Output, StepError};
use async_trait::async_trait;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;

/// Payloads up to this size are also passed in an environment variable. Linux refuses to
/// start a process with one variable over 128 KiB; the `*_FILE` variable always works.
pub const ENV_PAYLOAD_BYTES_MAX: usize = 32 * 1024;

/// What `sh -c GATE sh COMMAND EXIT ENTRY…` runs: move itself into the try's cgroup,
/// writing `0` to each `ENTRY` ([`Cgroup::entries`]; none without a cgroup), then wait for
/// `go` on stdin (sent once the place is durable; end of file if the one that started it
/// died), then run `COMMAND` itself, as `sh -c COMMAND` would: stdin empty, no positional
/// parameters, its own variables unset (named so that no variable of the step's is
/// touched). `EXIT` is empty here.
///
/// The command is `eval`ed by the gate's shell rather than handed to a second `sh` by
/// `exec`: one program started a try instead of two. The process tree is the same (dash
/// forks a command's programs either way); a message of the shell's own names `eval`
/// (`sh: 1: eval: foo: not found`).
const GATE: &str = concat!(
    r#"__apollo11_c=$1; shift 2; "#,
    r#"for __apollo11_e; do echo 0 > "$__apollo11_e" || exit 125; done; "#,
    r#"IFS= read -r __apollo11_go && [ "$__apollo11_go" = go ] || exit 125; "#,
    r#"exec </dev/null; "#,
    r#"eval "unset __apollo11_c __apollo11_e __apollo11_go; set --; $__apollo11_c""#
);

/// [`GATE`], the command run in a subshell and its exit status written to the file `EXIT`
/// once it ends: what a worker restarted while the try ran reads, since it is no longer the
/// process's parent. (A command killed by a signal exits its subshell with 128 + the
/// signal's number.)
const GATE_RECORDED: &str = concat!(
    r#"__apollo11_c=$1; __apollo11_x=$2; shift 2; "#,
    r#"for __apollo11_e; do echo 0 > "$__apollo11_e" || exit 125; done; "#,
    r#"IFS= read -r __apollo11_go && [ "$__apollo11_go" = go ] || exit 125; "#,
    r#"(eval "unset __apollo11_c __apollo11_x __apollo11_e __apollo11_go; set --; "#,
    r#"$__apollo11_c") </dev/null; __apollo11_s=$?; "#,
    r#"printf %s "$__apollo11_s" > "$__apollo11_x"; exit "$__apollo11_s""#
);

/// Records where a try's process runs before it may act: the engine appends `Placed`, a
/// worker asks its server to.
#[async_trait]
pub trait Placing: Send + Sync {
    /// Records `host` and `handle`; an error means the process must not run.
    async fn placed(&self, host: &str, handle: &str) -> Result<(), StepError>;

    /// Keeps what the try used, once its process ended, for its outcome.
    fn used(&self, usage: Usage);

    /// Told once the try's process runs (its gate open); it measures what the try used
    /// even when [`Placing::stopped`] ends it.
    fn running(&self) {}

    /// Completes when the try is to be stopped before its end (the engine's timeout): its
    /// process group is then killed, measured, and the try fails. The default: never.
    async fn stopped(&self) {
        std::future::pending::<()>().await;
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

/// Where an executor keeps a try's files, and how its errors name them.
pub struct Files<'a> {
    /// The try's files.
    pub files: &'a StepFiles,
    /// The folder error texts name them relative to (they reach API and UI users, who are
    /// not shown where the engine or a worker keeps its files).
    pub base: &'a Path,
    /// Where the base is, in words (`the data dir`, `the worker's work dir`).
    pub base_words: &'a str,
    /// Where the command's exit status is written when it ends, if anywhere (a worker's
    /// tries: see [`reattach`]).
    pub exit: Option<&'a Path>,
}

impl Files<'_> {
    fn shown(&self, path: &Path) -> String {
        let inside = path.strip_prefix(self.base).unwrap_or(path);
        format!("{} in {}", inside.display(), self.base_words)
    }
}

/// Runs `job` to its end: its files created, its process started behind the gate, placed
/// with `placing`, and its exit and output file made its result. The files handed over
/// (inputs, parameters, payload) are removed however it ends.
///
/// # Errors
///
/// The attempt's failure, classified: an exit code (fatal when `job.non_retryable` lists
/// it; `spawn` for 126 and 127, or an author's class), a signal, an output over the limit
/// (`output_too_large`), a folder missing or a process that could not start (`spawn`), a
/// file that could not be made, a place refused.
///
/// # Panics
///
/// If `at.files.log` has no parent folder (step files always live in one).
pub async fn execute(
    job: &Job,
    at: &Files<'_>,
    placing: &dyn Placing,
) -> Result<Output, StepError> {
    let files = at.files;
    let folder = files.log.parent().expect("step files live in a folder");
    create_private_dir(folder).map_err(|e| io("creating the step's folder", e))?;
    // A delay asked for by a crashed earlier try of this attempt is not this one's.
    let _ = std::fs::remove_file(&files.retry_after);
    // An empty output file of our own: what the step writes there stays private, and a
    // crashed earlier try of this attempt leaves nothing behind for this one.
    create_private_file(&files.output).map_err(|e| io("creating the output file", e))?;
    let log = create_private_file(&files.log).map_err(|e| io("creating the step log", e))?;
    if !job.dir.is_dir() {
        let message = format!(
            "the step's folder {} does not exist or is not a folder",
            job.dir.display()
        );
        return Err(StepError::fatal(message).with_class(FailureClass::Spawn));
    }
    let mut cmd = tokio::process::Command::new("sh");
    environment(&mut cmd, job, files);
    match at.exit {
        Some(exit) => cmd
            .args(["-c", GATE_RECORDED, "sh", &job.command])
            .arg(exit),
        None => cmd.args(["-c", GATE, "sh", &job.command, ""]),
    };
    cmd.current_dir(&job.dir)
        .stdin(Stdio::piped())
        .stdout(log.try_clone().map_err(|e| io("opening the step log", e))?)
        .stderr(log)
        .process_group(0);
    let var = if job.compensation {
        "APOLLO11_STEP_OUTPUT"
    } else {
        "APOLLO11_PREVIOUS_PAYLOAD"
    };
    let result = async {
        super::inputs::write(files, &job.inputs, &job.params)
            .map_err(|e| io("writing the step's inputs", e))?;
        if let Some(bytes) = &job.payload {
            pass_payload(&mut cmd, var, &files.payload, bytes)
                .map_err(|e| io("writing the payload file", e))?;
        }
        wait(cmd, job, at, placing).await
    }
    .await;
    if job.payload.is_some() {
        let _ = std::fs::remove_file(&files.payload);
    }
    super::inputs::remove(files);
    result
}

fn io(what: &str, e: std::io::Error) -> StepError {
    StepError::retryable(format!("{what}: {e}"))
}

/// Runs the process to its end and turns its exit and output into the attempt's result.
async fn wait(
    mut cmd: tokio::process::Command,
    job: &Job,
    at: &Files<'_>,
    placing: &dyn Placing,
) -> Result<Output, StepError> {
    let (held, cgroup) = isolate(job, at)?;
    cmd.args(cgroup.iter().flat_map(Cgroup::entries));
    let mut child = cmd.spawn().map_err(|e| {
        let what = format!("starting `sh -c {}` in {}", job.command, job.dir.display());
        io(&what, e).with_class(FailureClass::Spawn)
    })?;
    let mut guard = GroupGuard(child.id().map(|id| id as i32));
    let pid = child
        .id()
        .ok_or_else(|| StepError::retryable("the step's sh ended at once"))?;
    hold(pid, job, held)?;
    let group = group::Group::led_by(pid).map_err(|e| io("finding the step's process group", e))?;
    let host = group::host().map_err(|e| io("reading this host's name", e))?;
    // Nothing runs before its place is durable: the gate opens after this.
    placing.placed(&host, &group.handle()).await?;
    let gate = child.stdin.take().expect("stdin is piped");
    // Three bytes into an empty pipe: the write cannot block.
    let gate = gate
        .into_owned_fd()
        .map_err(|e| io("opening the step's gate", e))?;
    std::fs::File::from(gate).write_all(b"go\n").map_err(|e| {
        // Its `sh` ended before the gate: a cgroup it could not move into (its log says).
        let what = match cgroup {
            Some(_) => "opening the step's gate (its sh ended first: see the step's log)",
            None => "opening the step's gate",
        };
        io(what, e)
    })?;
    let began = std::time::Instant::now();
    placing.running();
    // Unless its gate runs the command itself (no exit file), the gate's `sh` counts the
    // command's CPU only once it has waited for it, which a killed group never does.
    let counted = Counted {
        ended: cgroup.is_none(),
        killed: cgroup.is_none() && at.exit.is_none(),
    };
    let (cpu, status) = run_to_end(&mut child, pid, counted, placing).await;
    let status = status.map_err(|e| io("waiting for the step", e))?;
    if status.is_some() {
        guard.0 = None;
    }
    placing.used(usage(job, held, cgroup.as_ref(), cpu, began.elapsed()));
    let Some(status) = status else {
        return Err(StepError::retryable("stopped by the engine before its end"));
    };
    let ended = match (status.code(), status.signal()) {
        (Some(code), _) => Ended::Exit(code),
        (None, Some(signal)) => Ended::Signal(signal),
        (None, None) => Ended::Killed,
    };
    let result = oom_classed(finished(job, at, ended), cgroup.as_ref(), job);
    if let Some(cgroup) = cgroup {
        // Read already: removed off the try's path (dropped unrun at shutdown, it is
        // removed all the same).
        tokio::task::spawn_blocking(move || drop(cgroup));
    }
    result
}

/// `result`, a failure classed `oom` when the try's cgroup counted an OOM kill.
fn oom_classed(
    result: Result<Output, StepError>,
    cgroup: Option<&Cgroup>,
    job: &Job,
) -> Result<Output, StepError> {
    match cgroup {
        Some(cgroup) if cgroup.oom_killed() => result.map_err(|e| out_of_memory(e, job)),
        _ => result,
    }
}

/// Whether the CPU time a try's `sh` shows when it ends is the try's: when it ends on its
/// own, and when its group is killed.
#[derive(Clone, Copy)]
struct Counted {
    ended: bool,
    killed: bool,
}

/// What the try's `sh` (`pid`, its group's leader) came to: its exit status, or `None` when
/// `placing` stopped it first (its group then killed, and waited for); and, where `counted`
/// says it is the try's (no cgroup counts it), the CPU time it showed when it ended, before
/// it was reaped.
async fn run_to_end(
    child: &mut tokio::process::Child,
    pid: u32,
    counted: Counted,
    placing: &dyn Placing,
) -> (
    Option<(u64, u64)>,
    std::io::Result<Option<std::process::ExitStatus>>,
) {
    let end = async {
        let cpu = match counted.ended {
            true => super::exited::cpu_ms(pid).await,
            false => None,
        };
        (cpu, child.wait().await)
    };
    tokio::pin!(end);
    tokio::select! {
        biased;
        (cpu, status) = &mut end => (cpu, status.map(Some)),
        () = placing.stopped() => {
            let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
            let (cpu, status) = end.await;
            (cpu.filter(|_| counted.killed), status.map(|_| None))
        }
    }
}

/// How `job`'s limits are held here, and its cgroup when it has one (to be read once the
/// try ends, and removed when dropped).
///
/// # Errors
///
/// A limit nothing here can hold (fatal: the step must not run unlimited), a cgroup that
/// could not be made.
fn isolate(job: &Job, at: &Files<'_>) -> Result<(Held, Option<Cgroup>), StepError> {
    let held = job
        .held()
        .map_err(|m| StepError::fatal(m).with_class(FailureClass::Spawn))?;
    let cgroup = match held {
        Held::Cgroup => Some(
            Cgroup::create(&cgroup_name(job, at), &job.limits)
                .map_err(|e| io("making the step's cgroup", e))?,
        ),
        Held::None | Held::Rlimit => None,
    };
    Ok((held, cgroup))
}

/// The name of the cgroup of `job`'s try run from `at`: the same in a later life of its
/// executor.
fn cgroup_name(job: &Job, at: &Files<'_>) -> String {
    let Job {
        run_id,
        step,
        attempt,
        compensation,
        ..
    } = job;
    super::cgroup::name_of(at.base, run_id, step, *attempt, *compensation)
}

/// What a try of `job` whose limits were `held` used in `wall`: its cgroup's counters when
/// it had one (peak memory is known only then), else the `cpu` time (user, system) its
/// process showed when it ended; and the memory limit it ran with.
fn usage(
    job: &Job,
    held: Held,
    cgroup: Option<&Cgroup>,
    cpu: Option<(u64, u64)>,
    wall: std::time::Duration,
) -> Usage {
    let used = cgroup.map(Cgroup::used).unwrap_or_default();
    Usage {
        isolation: held.word().to_owned(),
        wall_ms: u64::try_from(wall.as_millis()).unwrap_or(u64::MAX),
        cpu_user_ms: used.cpu_user_ms.or(cpu.map(|c| c.0)),
        cpu_system_ms: used.cpu_system_ms.or(cpu.map(|c| c.1)),
        peak_memory_bytes: used.peak_memory_bytes,
        memory_limit_bytes: job.limits.memory,
    }
}

/// Puts `job`'s rlimits on its `sh` (`pid`), still at its gate (it moves itself into its
/// cgroup): what it starts inherits them.
fn hold(pid: u32, job: &Job, held: Held) -> Result<(), StepError> {
    limits::set_rlimits(pid, &job.limits, held).map_err(|e| io("setting the step's rlimits", e))
}

/// `error`, a try the kernel killed for going over its memory limit, classed `oom`.
fn out_of_memory(mut error: StepError, job: &Job) -> StepError {
    let limit = job.limits.memory.unwrap_or_default();
    error.message = format!(
        "killed by the kernel: out of memory, over its limit of {limit} bytes; {}",
        error.message
    );
    error.class = Some(FailureClass::Oom);
    error
}

/// How a try's process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code.
    Exit(i32),
    /// It was killed by the signal of this number.
    Signal(i32),
    /// It was killed, by what is not known (a try watched again after a restart whose
    /// process left no exit status).
    Killed,
}

/// The result of a try whose process `ended`: its exit and its output file, a failure
/// classified (see [`classify`]) and fingerprinted from the last lines of its log.
///
/// # Errors
///
/// As [`execute`].
pub fn finished(job: &Job, at: &Files<'_>, ended: Ended) -> Result<Output, StepError> {
    let log = at.shown(&at.files.log);
    let written = output(&at.files.output, &at.shown(&at.files.output))?;
    let tail = classify::tail(&at.files.log);
    let error = match ended {
        Ended::Exit(0) => return Ok(Output(written)),
        Ended::Exit(code) => {
            let message = format!("exited with code {code} (log: {log})");
            let error = if job.non_retryable.contains(&code) {
                StepError::fatal(message)
            } else {
                StepError::retryable(message)
            };
            error.with_class(classify::classify(&job.classes, code, &tail))
        }
        Ended::Signal(signal) => {
            let class = classify::signal_class(signal);
            StepError::retryable(format!("killed by a signal, {class} (log: {log})"))
                .with_class(class)
        }
        Ended::Killed => StepError::retryable(format!("killed by a signal (log: {log})"))
            .with_class(FailureClass::Signal("unknown".to_owned())),
    };
    let error = if over_cpu_time(job, ended) {
        StepError::retryable(format!(
            "killed for going over its cpu time limit of {} s (log: {log})",
            job.limits.cpu_time_s.unwrap_or_default()
        ))
        .with_class(FailureClass::CpuTime)
    } else {
        error
    };
    let mut error = error.with_fingerprint(&tail);
    error.retry_after_ms = retry_after_ms(&at.files.retry_after);
    Err(if written.is_empty() {
        error
    } else {
        error.with_payload(written)
    })
}

/// Whether a try with a cpu time limit ended by SIGXCPU (its `sh` exits with 128 + its
/// number when the command it ran was killed so).
fn over_cpu_time(job: &Job, ended: Ended) -> bool {
    let xcpu = nix::sys::signal::Signal::SIGXCPU as i32;
    job.limits.cpu_time_s.is_some()
        && matches!(ended, Ended::Signal(s) | Ended::Exit(s) if s == xcpu || s == 128 + xcpu)
}

/// The delay a failed try asked for in the file at `path` (`APOLLO11_RETRY_AFTER_FILE`): a
/// duration (`30s`, `2m`) or a number of seconds, at most `DURATION_MS_MAX`; `None` when
/// the file is missing or says neither. The file is removed.
fn retry_after_ms(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let _ = std::fs::remove_file(path);
    let text = text.trim();
    let ms = match text.parse::<u64>() {
        Ok(seconds) => seconds.saturating_mul(1_000),
        Err(_) => u64::try_from(humantime::parse_duration(text).ok()?.as_millis()).ok()?,
    };
    Some(ms.min(apollo11_core::limits::DURATION_MS_MAX))
}

/// Watches the process group `handle` (as [`Placing::placed`] got it) of a try that an
/// earlier life of its executor started with [`Files::exit`] set, until it ends; then its
/// result, its exit status read from that file (none there: it was killed). Its cgroup,
/// found again by its name, is read for what it used (kept with `placing`, its wall time
/// counted from its process's start) and for an OOM kill, then removed. [`Placing::stopped`]
/// kills the group, which is then measured the same.
///
/// # Errors
///
/// As [`execute`]; a handle that names no process group.
pub async fn reattach(
    job: &Job,
    at: &Files<'_>,
    handle: &str,
    placing: &dyn Placing,
) -> Result<Output, StepError> {
    let group: group::Group = serde_json::from_str(handle).map_err(|e| {
        StepError::lost(format!(
            "the handle `{handle}` names no process group ({e})"
        ))
    })?;
    let cgroup = Cgroup::find(&cgroup_name(job, at));
    let held = match cgroup {
        Some(_) => Held::Cgroup,
        None => job.held().unwrap_or(Held::None),
    };
    let stop = placing.stopped();
    tokio::pin!(stop);
    let mut stopping = false;
    while group.runs() {
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            () = &mut stop, if !stopping => {
                stopping = true;
                let _ = kill(handle).await;
            }
        }
    }
    let wall = group.started_ago().unwrap_or_default();
    placing.used(usage(job, held, cgroup.as_ref(), None, wall));
    let code = at
        .exit
        .and_then(|path| std::fs::read_to_string(path).ok())
        .and_then(|text| text.trim().parse().ok());
    let ended = code.map_or(Ended::Killed, Ended::Exit);
    let result = oom_classed(finished(job, at, ended), cgroup.as_ref(), job);
    if let Some(cgroup) = cgroup {
        // Read already: removed off the try's path (dropped unrun at shutdown, it is
        // removed all the same).
        tokio::task::spawn_blocking(move || drop(cgroup));
    }
    result
}

/// Kills the process group `handle` names and waits until none of it runs.
///
/// # Errors
///
/// Why it may still run (a handle that names no group, one that will not end).
pub async fn kill(handle: &str) -> Result<(), String> {
    let host = group::host().map_err(|e| format!("reading this host's name: {e}"))?;
    group::stop(&host, handle).await
}

/// The process's environment: the executor's own variables (only those `env_pass` lists,
/// when the workflow has one), then the step's `env` and its secrets' variables, then the
/// `APOLLO11_*` variables (which nothing overrides).
fn environment(cmd: &mut tokio::process::Command, job: &Job, files: &StepFiles) {
    if let Some(pass) = &job.pass {
        cmd.env_clear();
        for var in pass {
            if let Some(value) = std::env::var_os(var) {
                cmd.env(var, value);
            }
        }
    }
    cmd.envs(job.env.iter().map(|(k, v)| (k, v)))
        .env("APOLLO11_RUN_ID", &job.run_id)
        .env("APOLLO11_STEP", &job.step)
        .env("APOLLO11_ATTEMPT", job.attempt.to_string())
        .env(
            "APOLLO11_IDEMPOTENCY_KEY",
            format!("{}/{}", job.run_id, job.step),
        )
        .env("APOLLO11_OUTPUT", &files.output)
        .env("APOLLO11_INPUTS", &files.inputs)
        .env("APOLLO11_PARAMS", &files.params)
        .env("APOLLO11_RETRY_AFTER_FILE", &files.retry_after);
}

/// Hands a payload to a step: always as a file (`VAR_FILE`, 0600), and also in `VAR` itself
/// when it is small and free of NUL (which no environment variable can hold).
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

/// The output file at `path` (`shown` in words) as a payload, bounded by
/// `STEP_OUTPUT_BYTES_MAX`: an output over it is a failure no retry can fix, found from the
/// file's size before anything is read.
fn output(path: &Path, shown: &str) -> Result<Vec<u8>, StepError> {
    let max = apollo11_core::limits::STEP_OUTPUT_BYTES_MAX;
    read_output(path, max).map_err(|e| match e {
        OutputError::TooLarge { bytes } => StepError::fatal(format!(
            "the output file {shown} is {bytes} bytes, over the limit of {max} bytes (STEP_OUTPUT_BYTES_MAX); write large results to a file of the step's own and put its path in the output"
        ))
        .with_class(FailureClass::OutputTooLarge),
        OutputError::Io(e) => StepError::retryable(format!("reading the output file {shown}: {e}")),
    })
}
