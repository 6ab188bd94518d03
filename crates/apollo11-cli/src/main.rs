//! `apollo11`: run workflows of shell steps on the embedded file log, and inspect, resume,
//! override and verify them. Exit codes: 0 succeeded, 1 failed / rolled back / paused,
//! 2 usage or validation error, 3 damaged log, 4 data dir in use by another writer (a
//! server holding it is reached over its API instead).

mod bundle;
mod data;
mod definition;
mod flags;
mod gc;
mod inspect;
mod operate;
mod out;
mod remote;
mod render;
mod run;
mod schedules;
mod scrub;
#[cfg(feature = "server")]
mod serve;
mod shared;
mod signal;
mod traces;
mod watch;
mod worker;

use apollo11_core::{check_name, NameKind};
use apollo11_runtime::RunAction;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "apollo11",
    version,
    about = "Durable workflows of shell steps: run, resume, inspect, replay."
)]
struct Cli {
    /// The data directory (event log, snapshots, blobs, step logs).
    #[arg(
        long,
        global = true,
        env = "APOLLO11_DATA_DIR",
        default_value = ".apollo11"
    )]
    data_dir: PathBuf,
    /// Roll the event log to a new segment file at this size (bytes).
    #[arg(long, global = true, env = "APOLLO11_SEGMENT_BYTES", default_value_t = apollo11_core::limits::SEGMENT_BYTES_MAX)]
    segment_bytes: u64,
    /// Compress each sealed segment of the event log (zstd, in the background, never holding
    /// up an append) once this many newer sealed segments exist. Off by default: a build
    /// older than compressed segments cannot open a log holding one.
    #[arg(long, global = true, env = "APOLLO11_COMPRESS_AFTER")]
    compress_after: Option<usize>,
    /// The token of a server (`serve --token-file`): `serve` requires it of every API call;
    /// `run`, `resume`, `override`, `pause` and `rollback` send it to the server holding the
    /// data dir.
    #[arg(long, global = true, env = "APOLLO11_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// A PostgreSQL database (`postgres://…`) holding the events instead of the data dir's
    /// log, shared by any number of `serve` (and other) processes; the data dir keeps the
    /// step files.
    #[arg(long, global = true, env = "APOLLO11_STORE")]
    store: Option<String>,
    /// How steps' `limits` are held where steps run (`run`, `resume`, `serve`, `worker`):
    /// `auto`, a cgroup where a limit needs one; `cgroup`, one for every step with limits;
    /// `rlimit`, rlimits alone (memory as address space). A limit nothing can hold fails
    /// the step's try at its start.
    #[arg(
        long,
        global = true,
        env = "APOLLO11_ISOLATION",
        default_value = "auto"
    )]
    isolation: apollo11_shell::shell::Isolation,
    /// The database schema of --store.
    #[arg(
        long,
        global = true,
        env = "APOLLO11_STORE_SCHEMA",
        default_value = "apollo11"
    )]
    store_schema: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a new run of a workflow file; exit 0 if it succeeds, 1 if it fails, rolls back or pauses.
    Run {
        workflow: PathBuf,
        #[arg(long)]
        run_id: Option<String>,
        /// Print the final status as JSON instead of a live view.
        #[arg(long)]
        json: bool,
        /// When a server holds the data dir: start the workflow of the file's name as the
        /// server defines it, even when the file defines it otherwise.
        #[arg(long)]
        use_served: bool,
        #[command(flatten)]
        params: definition::ParamArgs,
    },
    /// Continue an interrupted or paused run with the definition it started with.
    Resume {
        run_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Step states rebuilt from the log (at a past event with --at).
    Status {
        run_id: String,
        #[arg(long)]
        at: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// The run's events in order (JSON lines with --json).
    Events {
        run_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Every run with its state (with --all, the archived runs too).
    Runs {
        #[arg(long)]
        json: bool,
        /// Also the runs `gc` archived, each marked `archived` (`"archived": true`).
        #[arg(long)]
        all: bool,
    },
    /// Put a step in a state by hand; recorded with who and why.
    Override {
        run_id: String,
        step: String,
        #[arg(long, value_parser = ["succeeded", "skipped", "pending", "failed"])]
        to: String,
        #[arg(long)]
        reason: String,
        #[arg(long, env = "USER", default_value = "operator")]
        by: String,
    },
    /// Pause a run: it starts nothing new; `resume` lifts the pause. Recorded with who and why.
    Pause {
        run_id: String,
        #[arg(long)]
        reason: String,
        #[arg(long, env = "USER", default_value = "operator")]
        by: String,
    },
    /// Roll a run back (compensate what it did, in reverse order) at its next `resume`.
    Rollback {
        run_id: String,
        #[arg(long)]
        reason: String,
        #[arg(long, env = "USER", default_value = "operator")]
        by: String,
    },
    /// Run a step that ran again (with --downstream, every step after it too): the steps of
    /// the set with a compensation are compensated first, in reverse order. Recorded with
    /// who and why.
    Rerun {
        run_id: String,
        step: String,
        /// Also every step that depends on STEP, directly or not.
        #[arg(long)]
        downstream: bool,
        #[arg(long)]
        reason: String,
        #[arg(long, env = "USER", default_value = "operator")]
        by: String,
    },
    /// End the wait of a step waiting for a signal; --data (JSON) becomes its output.
    /// Recorded with who and why; refused (exit 2) when the step is not waiting.
    Signal {
        run_id: String,
        step: String,
        /// The step's output, as JSON.
        #[arg(long)]
        data: Option<String>,
        #[arg(long)]
        reason: String,
        #[arg(long, env = "USER", default_value = "operator")]
        by: String,
    },
    /// Approve a step waiting for a signal: a signal carrying {"approved": true}.
    Approve {
        run_id: String,
        step: String,
        #[arg(long)]
        reason: String,
        #[arg(long, env = "USER", default_value = "operator")]
        by: String,
    },
    /// What `resume` would do (rerun, compensate), changing nothing; with --rerun STEP,
    /// what `apollo11 rerun` of it would do.
    Plan {
        run_id: String,
        /// The step a rerun would start from.
        #[arg(long)]
        rerun: Option<String>,
        /// With --rerun: the steps after it too.
        #[arg(long, requires = "rerun")]
        downstream: bool,
    },
    /// Check a workflow file and the parameter values given; sum up the steps it makes;
    /// exit 0 or 2.
    Validate {
        workflow: PathBuf,
        #[command(flatten)]
        params: definition::ParamArgs,
    },
    /// Draw the steps a workflow file makes with the parameter values given; exit 0 or 2.
    Graph {
        workflow: PathBuf,
        #[command(flatten)]
        params: definition::ParamArgs,
        #[arg(long, value_enum, default_value_t)]
        format: definition::GraphFormat,
    },
    /// Check every record, segment, snapshot and blob; exit 0 clean, 3 damage. With a FILE
    /// (a run bundle of `export`), check that file instead.
    Verify {
        /// A run bundle to check instead of the data dir.
        file: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Write one run (events, blobs, step files) to a self-contained, checksummed bundle file.
    Export {
        run_id: String,
        /// The bundle file to write; an existing one is refused unless --force.
        #[arg(short, long)]
        output: PathBuf,
        /// Replace the bundle file if it exists (only a regular file, never a link, a
        /// device or a folder).
        #[arg(long)]
        force: bool,
    },
    /// Add the run of a bundle file (`export`) to this data dir, under this log's event ids;
    /// importing the same bundle again changes nothing.
    Import { file: PathBuf },
    /// Cut the log at its first damage, losing every event after it (kept in .torn files),
    /// and remove damaged snapshots. Says what it would cut and changes nothing without --yes.
    Repair {
        /// Make the cut.
        #[arg(long)]
        yes: bool,
    },
    /// Compress (zstd) every sealed segment of the log older than the newest KEEP sealed ones,
    /// now; reads see the same events. `--compress-after` does it in the background.
    Compact {
        /// Sealed segments left plain, newest first.
        #[arg(long, default_value_t = 0)]
        keep: usize,
    },
    /// Archive the finished runs the retention policy lets go (flags over `[retention]` in
    /// the data dir's apollo11.toml): moved out of the live log into an archive file, still
    /// read by status, events, runs --all and export. Takes the data dir's lock.
    Gc {
        /// Keep runs that ended less than N days ago.
        #[arg(long, value_name = "N")]
        keep_days: Option<u32>,
        /// Keep the newest N runs of each workflow.
        #[arg(long, value_name = "N")]
        keep_last: Option<u32>,
        /// List the runs that would be archived, changing nothing (takes no lock).
        #[arg(long)]
        dry_run: bool,
    },
    /// Serve the HTTP API and web UI on the data dir, driving runs of the workflows in
    /// --workflows; resumes interrupted runs at start. Ctrl-C stops.
    #[cfg(feature = "server")]
    Serve {
        /// The address to listen on; other than loopback only with --token-file.
        #[arg(long, default_value = apollo11_server::DEFAULT_LISTEN)]
        listen: std::net::SocketAddr,
        /// A folder of workflow files (`*/workflow.toml` or `*.toml`) runs can be started from.
        #[arg(long)]
        workflows: Option<PathBuf>,
        /// With --store: how long this instance's leases last unrenewed (`10s`, `2s`,
        /// `500ms`); another instance takes its runs over after it.
        #[arg(long, default_value = "10s", value_parser = serve::parse_lease_ttl)]
        lease_ttl: std::time::Duration,
        /// Archive, every DURATION (`1h`, `30m`), the finished runs the data dir's
        /// `[retention]` policy lets go, as `gc` does, on this server's own writer.
        #[arg(long, value_name = "DURATION", value_parser = flags::at_least_a_second)]
        gc_every: Option<std::time::Duration>,
        /// Answer requests whose Host is NAME (or NAME:PORT), beside the listen address
        /// (and localhost on loopback): the name a proxy or DNS gives this server. Repeatable.
        #[arg(long = "allow-host", value_name = "NAME")]
        allow_host: Vec<String>,
        /// Connections served at once; past them a connection is answered 503 and closed.
        /// Lowered to the file limit minus the descriptors kept for steps, logs and segments.
        #[arg(long, value_name = "N", default_value_t = apollo11_server::DEFAULT_MAX_CONNECTIONS,
              value_parser = clap::value_parser!(u32).range(1..))]
        max_connections: u32,
        /// How long a connection may take to send a request's head, or sit idle between
        /// requests, before it is closed.
        #[arg(long, value_name = "DURATION", default_value = "10s",
              value_parser = flags::at_least_a_second)]
        header_timeout: std::time::Duration,
        /// The listen backlog: connections the kernel queues before the server accepts them.
        #[arg(long, value_name = "N", default_value_t = apollo11_server::DEFAULT_BACKLOG)]
        listen_backlog: u32,
        /// The token of workers (first line of the file): it opens the worker routes and
        /// nothing else. Without it, workers use the --token-file token.
        #[arg(long, value_name = "FILE")]
        worker_token_file: Option<PathBuf>,
        /// A worker silent this long is lost with its tries (class `worker_lost`).
        #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = flags::at_least_a_second)]
        heartbeat_timeout: std::time::Duration,
    },
    /// Run the steps servers place on this machine: connects out to each --server, takes
    /// tries whose labels it carries, runs them as `apollo11 run` would, reports back.
    Worker {
        /// A server's URL (`http://HOST:PORT`). Repeatable: instances sharing a database.
        #[arg(long = "server", value_name = "URL", required = true)]
        servers: Vec<String>,
        /// Labels this worker carries, `NAME=VALUE,...` (repeatable); `hostname=` is added.
        #[arg(long, value_name = "K=V,...")]
        labels: Vec<String>,
        /// Tries run at once.
        #[arg(long, value_name = "N", default_value_t = 4)]
        slots: u32,
        /// Its name among the servers' workers (default: this host's name).
        #[arg(long)]
        name: Option<String>,
        /// Where tries keep their files while they run.
        #[arg(long, value_name = "DIR", default_value = ".apollo11-worker")]
        work_dir: PathBuf,
        /// How often it heartbeats (keep it well under the servers' --heartbeat-timeout).
        #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = flags::at_least_a_second)]
        heartbeat_every: std::time::Duration,
    },
    /// List the workers a server hears from, and the tries waiting for one.
    Workers {
        /// The server's URL.
        #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8711")]
        server: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Start the runs of a schedule's fire times in a range that have none, through a
    /// server (idempotent: a fire time that ran is left alone).
    Backfill {
        /// The workflow.
        workflow: String,
        /// Its schedule (may be left out when it has one).
        #[arg(long)]
        schedule: Option<String>,
        /// The range's start, RFC 3339 (`2026-12-01T00:00:00Z`), included.
        #[arg(long, value_name = "TIME")]
        from: String,
        /// The range's end, included.
        #[arg(long, value_name = "TIME")]
        to: String,
        /// Runs running at once at most.
        #[arg(long, value_name = "N", default_value_t = 4)]
        max_parallel: u32,
        /// Say what would start; start nothing.
        #[arg(long)]
        dry_run: bool,
        /// Confirm a range of more than 10,000 fire times.
        #[arg(long)]
        yes: bool,
        /// The server's URL.
        #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8711")]
        server: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the schedules a server fires: next fire, last fire and its run's state.
    Schedules {
        /// The server's URL.
        #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8711")]
        server: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Pause or resume a schedule, through a server: recorded with who and why, kept across
    /// restarts, seen by every instance sharing the store.
    Schedule {
        #[command(subcommand)]
        action: ScheduleAction,
    },
}

/// What `apollo11 schedule` does.
#[derive(Subcommand)]
enum ScheduleAction {
    /// Stop a schedule firing until it is resumed.
    Pause(ScheduleNote),
    /// Let a paused schedule fire again; its `catch_up` decides which fire times of the
    /// pause start.
    Resume(ScheduleNote),
}

/// The schedule, who acts and why.
#[derive(clap::Args)]
struct ScheduleNote {
    /// The schedule, as WORKFLOW/NAME.
    schedule: String,
    #[arg(long)]
    reason: String,
    #[arg(long, env = "USER", default_value = "operator")]
    by: String,
    /// The server's URL.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8711")]
    server: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// How a command ended, as an exit code and what to say on stderr.
pub(crate) struct Exit {
    pub(crate) code: i32,
    pub(crate) message: Option<String>,
}

impl Exit {
    pub(crate) fn code(code: i32) -> Exit {
        Exit {
            code,
            message: None,
        }
    }

    pub(crate) fn fail(code: i32, message: impl Into<String>) -> Exit {
        Exit {
            code,
            message: Some(message.into()),
        }
    }
}

/// jemalloc, whose background thread hands memory back after a burst (configured at build
/// time: `.cargo/config.toml`).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    traces::init();
    apollo11_shell::shell::set_isolation(cli.isolation);
    let runtime = apollo11_runtime::tokio_runtime().expect("a tokio runtime");
    let exit = runtime.block_on(dispatch(cli));
    // Dropping the runtime drops every task, which kills the process groups of steps that an
    // interrupt left running.
    drop(runtime);
    if let Some(message) = exit.message {
        warn(&message);
    }
    std::process::exit(exit.code);
}

/// Says something on stderr, escaped (messages quote names, paths and notes from outside);
/// a closed stderr is no reason to fail.
pub(crate) fn warn(message: &str) {
    use std::io::Write;
    let shown = out::shown(message, MESSAGE_CHARS_MAX);
    let _ = writeln!(std::io::stderr(), "apollo11: {shown}");
}

/// Longest message printed on stderr.
const MESSAGE_CHARS_MAX: usize = 8 * 1024;

/// Checks a run id given on the command line (`what` names the argument): the names rule
/// every store applies, before anything is opened or written.
pub(crate) fn run_id_arg(what: &str, id: &str) -> Result<(), Exit> {
    check_name(NameKind::Run, id).map_err(|e| Exit::fail(2, format!("{what}: {e}")))
}

/// The run id and step arguments of a command that names them, checked.
fn check_args(command: &Command) -> Result<(), Exit> {
    match command {
        Command::Resume { run_id, .. }
        | Command::Status { run_id, .. }
        | Command::Events { run_id, .. }
        | Command::Plan {
            run_id,
            rerun: None,
            ..
        }
        | Command::Export { run_id, .. }
        | Command::Pause { run_id, .. }
        | Command::Rollback { run_id, .. } => run_id_arg("RUN_ID", run_id),
        Command::Override { run_id, step, .. }
        | Command::Rerun { run_id, step, .. }
        | Command::Signal { run_id, step, .. }
        | Command::Approve { run_id, step, .. }
        | Command::Plan {
            run_id,
            rerun: Some(step),
            ..
        } => {
            run_id_arg("RUN_ID", run_id)?;
            check_name(NameKind::Step, step).map_err(|e| Exit::fail(2, format!("STEP: {e}")))
        }
        Command::Run { .. }
        | Command::Runs { .. }
        | Command::Validate { .. }
        | Command::Graph { .. }
        | Command::Verify { .. }
        | Command::Import { .. }
        | Command::Repair { .. }
        | Command::Compact { .. }
        | Command::Gc { .. }
        | Command::Worker { .. }
        | Command::Workers { .. }
        | Command::Schedules { .. }
        | Command::Schedule { .. }
        | Command::Backfill { .. } => Ok(()),
        #[cfg(feature = "server")]
        Command::Serve { .. } => Ok(()),
    }
}

async fn dispatch(cli: Cli) -> Exit {
    if let Err(exit) = check_args(&cli.command) {
        return exit;
    }
    match cli.command {
        Command::Worker {
            servers,
            labels,
            slots,
            name,
            work_dir,
            heartbeat_every,
        } => {
            let options = worker::WorkerOptions {
                servers,
                labels,
                slots,
                token_file: cli.token_file.clone(),
                name,
                work_dir,
                heartbeat_every,
            };
            return worker::run(options).await.unwrap_or_else(|exit| exit);
        }
        Command::Workers { server, json } => {
            let token = cli.token_file.as_deref();
            return worker::list(&server, token, json)
                .await
                .unwrap_or_else(|exit| exit);
        }
        Command::Schedules { server, json } => {
            let token = cli.token_file.as_deref();
            return schedules::list(&server, token, json)
                .await
                .unwrap_or_else(|exit| exit);
        }
        Command::Schedule { action } => {
            let (note, pause) = match &action {
                ScheduleAction::Pause(note) => (note, true),
                ScheduleAction::Resume(note) => (note, false),
            };
            let asked = schedules::Toggle {
                schedule: &note.schedule,
                pause,
                by: &note.by,
                reason: &note.reason,
            };
            let token = cli.token_file.as_deref();
            return schedules::toggle(&note.server, token, &asked, note.json)
                .await
                .unwrap_or_else(|exit| exit);
        }
        Command::Backfill {
            workflow,
            schedule,
            from,
            to,
            max_parallel,
            dry_run,
            yes,
            server,
            json,
        } => {
            let asked = schedules::Backfill {
                workflow: &workflow,
                schedule: schedule.as_deref(),
                from: &from,
                to: &to,
                max_parallel,
                dry_run,
                yes,
            };
            let token = cli.token_file.as_deref();
            return schedules::backfill(&server, token, &asked, json)
                .await
                .unwrap_or_else(|exit| exit);
        }
        _ => {}
    }
    let dir = match data::DataDir::new(
        &cli.data_dir,
        (cli.segment_bytes, cli.compress_after),
        cli.store.as_deref(),
        &cli.store_schema,
    ) {
        Ok(dir) => dir,
        Err(exit) => return exit,
    };
    let token = cli.token_file.as_deref();
    let result = match cli.command {
        Command::Run {
            workflow,
            run_id,
            json,
            use_served,
            params,
        } => {
            let remote = run::RemoteStart { token, use_served };
            run::start(&dir, &workflow, &params, run_id, json, remote).await
        }
        Command::Resume { run_id, json } => run::resume(&dir, &run_id, json, token).await,
        Command::Status { run_id, at, json } => inspect::status(&dir, &run_id, at, json).await,
        Command::Events { run_id, json } => inspect::events(&dir, &run_id, json).await,
        Command::Runs { json, all } => inspect::runs(&dir, json, all).await,
        Command::Override {
            run_id,
            step,
            to,
            reason,
            by,
        } => operate::override_step(&dir, &run_id, &step, &to, &reason, &by, token).await,
        Command::Pause { run_id, reason, by } => {
            operate::act(&dir, &run_id, RunAction::Pause, &reason, &by, token).await
        }
        Command::Rollback { run_id, reason, by } => {
            operate::act(&dir, &run_id, RunAction::Rollback, &reason, &by, token).await
        }
        Command::Rerun {
            run_id,
            step,
            downstream,
            reason,
            by,
        } => {
            let rerun = operate::Rerun {
                step: &step,
                downstream,
            };
            operate::rerun(&dir, &run_id, rerun, &reason, &by, token).await
        }
        Command::Signal {
            run_id,
            step,
            data,
            reason,
            by,
        } => match signal::data_arg(data.as_deref()) {
            Ok(data) => {
                let (ids, note) = (
                    (run_id.as_str(), step.as_str()),
                    (reason.as_str(), by.as_str()),
                );
                signal::signal(&dir, ids, data.as_ref(), note, token).await
            }
            Err(exit) => Err(exit),
        },
        Command::Approve {
            run_id,
            step,
            reason,
            by,
        } => {
            let (ids, note) = (
                (run_id.as_str(), step.as_str()),
                (reason.as_str(), by.as_str()),
            );
            signal::signal(&dir, ids, Some(&signal::approval()), note, token).await
        }
        Command::Plan {
            run_id,
            rerun: None,
            ..
        } => inspect::plan(&dir, &run_id).await,
        Command::Plan {
            run_id,
            rerun: Some(step),
            downstream,
        } => inspect::rerun_plan(&dir, &run_id, &step, downstream).await,
        Command::Validate { workflow, params } => definition::validate(&workflow, &params),
        Command::Graph {
            workflow,
            params,
            format,
        } => definition::graph(&workflow, &params, format),
        Command::Verify {
            file: Some(file),
            json,
        } => bundle::verify(&file, json),
        Command::Verify { file: None, json } => dir
            .file_log_only("verify")
            .and_then(|()| scrub::verify(&dir, json)),
        Command::Export {
            run_id,
            output,
            force,
        } => bundle::export(&dir, &run_id, &output, force).await,
        Command::Import { file } => bundle::import(&dir, &file).await,
        Command::Repair { yes } => dir
            .file_log_only("repair")
            .and_then(|()| scrub::repair(&dir, yes)),
        Command::Compact { keep } => dir
            .file_log_only("compact")
            .and_then(|()| scrub::compact(&dir, keep)),
        Command::Gc {
            keep_days,
            keep_last,
            dry_run: true,
        } => gc::dry_run(&dir, keep_days, keep_last).await,
        Command::Gc {
            keep_days,
            keep_last,
            dry_run: false,
        } => gc::collect(&dir, keep_days, keep_last).await,
        Command::Worker { .. }
        | Command::Workers { .. }
        | Command::Schedules { .. }
        | Command::Schedule { .. }
        | Command::Backfill { .. } => {
            unreachable!("handled before the data dir is opened")
        }
        #[cfg(feature = "server")]
        Command::Serve {
            listen,
            workflows,
            lease_ttl,
            gc_every,
            allow_host,
            max_connections,
            header_timeout,
            listen_backlog,
            worker_token_file,
            heartbeat_timeout,
        } => {
            let mut conns = apollo11_server::ConnLimits::default();
            conns.max_connections = max_connections;
            conns.header_timeout = header_timeout;
            conns.backlog = listen_backlog;
            let options = serve::ServeOptions {
                listen,
                workflows,
                token_file: cli.token_file.clone(),
                lease_ttl,
                gc_every,
                allow_host,
                conns,
                worker_token_file,
                heartbeat_timeout,
            };
            serve::serve(&dir, options).await
        }
    };
    result.unwrap_or_else(|exit| exit)
}
