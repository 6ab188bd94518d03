//! The scenarios, in one table: their names (a clap `ValueEnum`), what each measures against
//! which baseline (the help text), and the shape of the JSON each writes: its columns and the
//! stable keys of its rows, which the goals of BENCHMARKS.md name. `cargo xtask bench` reads
//! this same file (by path), so both programs list and accept the same scenarios.

use clap::ValueEnum;
use std::path::PathBuf;

/// A benchmark scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Scenario {
    /// Durable appends by 1, 16 and 256 appenders; baseline: a raw write + fdatasync loop, SQLite.
    Append,
    /// Latency at 10k, 50k, 100k events/s offered on schedule; baseline: SQLite driven alike.
    OpenLoop,
    /// Open + fold of a 1M-event log on every core; baseline: a naive one-thread replay.
    Replay,
    /// Engine::open in a fresh process, with and without a snapshot; baseline: no snapshot.
    Recovery,
    /// The engine's steps/s on many runs, a chain, a wide run; baseline: fsync limit, duroxide.
    Scheduler,
    /// Appends on PostgreSQL; baseline: one INSERT per transaction, the file log (needs a database).
    PgAppend,
    /// The scheduler workloads on PostgreSQL, 1 and 3 engines; baseline: duroxide (needs a database).
    PgScheduler,
    /// `apollo11 serve`: read latency, runs driven, stream delay, memory; baseline: the engine alone.
    Server,
    /// zstd of sealed segments: ratio and replay cost; baseline: the plain replay.
    Cold,
    /// gc's collect and its write-lock pause; baseline: writing the archive alone.
    Gc,
    /// 100,000 runs with retention on: the live log stays bounded; baseline: every byte appended.
    Lifecycle,
    /// 10,000 steps made by for_each (static, run time); baseline: the graph written out by hand.
    ForEach,
    /// Steps placed on `apollo11 worker`s, latency, memory; baselines: in-process, the processes alone.
    Workers,
    /// 1,000 schedules firing: fire lag, CPU; baseline: the same server with schedules disabled.
    Schedules,
    /// The cost of a cgroup per try and per engine step; baseline: the same tries without one.
    Limits,
}

/// The shape of a scenario's JSON: its columns, and the keys its rows carry as `row`.
pub struct Schema {
    /// Column names, in table order.
    pub columns: &'static [&'static str],
    /// Row keys, stable across `--quick` and full runs.
    pub rows: &'static [&'static str],
}

impl Scenario {
    /// The name on the command line and of `<out>/<name>.json`.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default()
    }

    /// The columns and row keys of the scenario's JSON.
    pub fn schema(self) -> Schema {
        let (columns, rows): (&[&str], &[&str]) = match self {
            Scenario::Append => (APPEND, &["1", "16", "256"]),
            Scenario::OpenLoop => (OPEN_LOOP, &["10000", "50000", "100000"]),
            Scenario::Replay => (REPLAY, &["log"]),
            Scenario::Recovery => (RECOVERY, &["no_snapshot", "snapshot", "one_run"]),
            Scenario::Scheduler => (SCHEDULER, SHAPES),
            Scenario::PgAppend => (PG_APPEND, &["1", "16", "256"]),
            Scenario::PgScheduler => (PG_SCHEDULER, SHAPES),
            Scenario::Server => (SERVER, SERVER_ROWS),
            Scenario::Cold => (COLD, &["five-stage", "ops-runbook", "replay"]),
            Scenario::Gc => (GC, &["collect"]),
            Scenario::Lifecycle => (LIFECYCLE, &["gc", "end"]),
            Scenario::ForEach => (FOR_EACH, &["hand", "static", "runtime", "expansion"]),
            Scenario::Workers => (MEASURE, WORKERS_ROWS),
            Scenario::Schedules => (MEASURE, SCHEDULES_ROWS),
            Scenario::Limits => (LIMITS, LIMITS_ROWS),
        };
        Schema { columns, rows }
    }
}

/// The flags both `apollo11-bench` and `cargo xtask bench` take.
#[derive(Debug, clap::Args)]
pub struct Flags {
    /// Shorter passes: a smoke test, not a figure.
    #[arg(long)]
    pub quick: bool,
    /// Install the Prometheus recorder first, as `apollo11 serve` does.
    #[arg(long)]
    pub metrics: bool,
    /// Where `<scenario>.json` goes [default: target/bench].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Where data files go, on the disk under test [default: the --out folder's data/].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Scenarios to run, in this order [default: all].
    #[arg(value_enum, value_name = "SCENARIO")]
    pub scenarios: Vec<Scenario>,
}

const SHAPES: &[&str] = &["runs", "chain", "wide"];

const MEASURE: &[&str] = &["measure", "value", "unit", "note"];

const APPEND: &[&str] = &[
    "appenders",
    "events_per_s",
    "events_per_fsync",
    "p50_us",
    "p99_us",
    "p999_us",
    "raw_fsync_events_per_s",
    "ratio_to_raw",
    "no_fsync_events_per_s",
    "overlap_bound_events_per_s",
    "serial_bound_events_per_s",
    "sqlite_events_per_s",
    "sqlite_events_per_tx",
    "sqlite_p99_us",
    "sqlite_loop_events_per_s",
    "ratio_to_sqlite",
];

const OPEN_LOOP: &[&str] = &[
    "offered_per_s",
    "events_per_s",
    "p50_us",
    "p99_us",
    "p999_us",
    "service_mean_us",
    "stream_bound_per_s",
    "sqlite_events_per_s",
    "sqlite_p50_us",
    "sqlite_p99_us",
    "sqlite_p999_us",
    "sqlite_stream_bound_per_s",
    "p99_ratio_to_sqlite",
    "raw_sync_p50_us",
    "raw_sync_p99_us",
];

const REPLAY: &[&str] = &[
    "events",
    "open_events_per_s",
    "read_events_per_s",
    "fold_events_per_s",
    "events_per_s",
    "mb_per_s",
    "naive_events_per_s",
    "ratio_to_naive",
];

const RECOVERY: &[&str] = &[
    "case",
    "events",
    "events_after_snapshot",
    "recovery_ms",
    "resident_bytes_per_event",
];

const SCHEDULER: &[&str] = &[
    "workload",
    "steps",
    "steps_per_s",
    "limit_steps_per_s",
    "ratio_to_limit",
    "peer_steps",
    "peer_steps_per_s",
    "ratio_to_peer",
];

const PG_APPEND: &[&str] = &[
    "appenders",
    "pg_events_per_s",
    "pg_p50_us",
    "pg_p99_us",
    "insert_per_tx_events_per_s",
    "insert_per_tx_p99_us",
    "ratio_to_insert_per_tx",
    "copy_events_per_s",
    "ratio_to_copy",
    "file_log_events_per_s",
    "ratio_to_file_log",
];

const PG_SCHEDULER: &[&str] = &[
    "workload",
    "steps",
    "pg_1_steps_per_s",
    "pg_3_steps_per_s",
    "ratio_3_to_1",
    "peer_steps",
    "peer_steps_per_s",
    "ratio_1_to_peer",
    "ratio_3_to_peer",
    "insert_commits_per_s",
    "ratio_1_to_insert_commits",
];

const SERVER: &[&str] = &[
    "figure",
    "load",
    "samples",
    "per_s",
    "p50_us",
    "p99_us",
    "p999_us",
    "engine_alone_per_s",
    "ratio",
    "goal",
];

const SERVER_ROWS: &[&str] = &[
    "run_state_closed",
    "runs_list_closed",
    "run_state_open",
    "memory",
    "runs_through_server",
    "runs_stream_delay",
    "chain_through_server",
    "chain_stream_delay",
];

const COLD: &[&str] = &[
    "log",
    "events",
    "segments_compressed",
    "plain_mb",
    "stored_mb",
    "ratio",
    "compress_mb_per_s",
    "replay_plain_events_per_s",
    "replay_cold_events_per_s",
    "replay_cold_to_plain_time",
];

const GC: &[&str] = &[
    "events",
    "runs_moved",
    "runs_left",
    "segments_rewritten",
    "live_mb_before",
    "live_mb_after",
    "archive_only_s",
    "collect_s",
    "collect_to_archive_only_time",
    "pause_ms",
];

const LIFECYCLE: &[&str] = &[
    "runs",
    "events",
    "appended_mb",
    "live_mb_before",
    "live_mb_after",
    "archive_mb",
    "runs_archived",
    "runs_left",
    "gc_s",
    "pause_ms",
    "steps_per_s",
    "live_mb_largest",
    "bound_mb",
];

const FOR_EACH: &[&str] = &[
    "graph",
    "steps",
    "steps_per_s",
    "ratio_to_hand",
    "peak_resident_bytes_per_step",
    "memory_ratio_to_hand",
    "expansion_ms",
];

const WORKERS_ROWS: &[&str] = &[
    "processes",
    "in_process",
    "on_workers",
    "latency_p50",
    "latency_p99",
    "memory_per_worker",
    "memory_per_try",
];

const SCHEDULES_ROWS: &[&str] = &[
    "fires",
    "lag_p50",
    "lag_p99",
    "lag_max",
    "cpu_firing",
    "cpu_disabled",
];

const LIMITS: &[&str] = &[
    "workload",
    "isolation",
    "tries",
    "p50_us",
    "p99_us",
    "added_p50_us",
    "added_p99_us",
    "steps_per_s",
    "ratio",
];

const LIMITS_ROWS: &[&str] = &["try_none", "try_cgroup", "steps_none", "steps_cgroup"];
