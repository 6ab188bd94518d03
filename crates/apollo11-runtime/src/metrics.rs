//! The runtime's metrics: their names (the only place they are spelled), what each means,
//! the histogram buckets an exporter should give them, and the bookkeeping behind the
//! gauges. Everything goes through the `metrics` facade; only a binary installs a recorder.
//!
//! Labels are bounded by the registered definitions (workflow and step names, outcomes,
//! run statuses); a run id is never a label.

use apollo11_core::{FailureClass, RunId, Usage};
use apollo11_machine::{RunState, RunStatus, StepStatus};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// Histogram, labels `workflow`, `step`, `outcome`: seconds from an attempt's `Started` to
/// its outcome, on the events' clock (millisecond steps), for attempts this process ran
/// (`succeeded`, `failed`, `timeout`; an attempt found `interrupted` has none).
pub const STEP_DURATION_SECONDS: &str = "apollo11_step_duration_seconds";
/// Histogram, labels `workflow`, `step`: the peak memory of a try in bytes, for tries whose
/// executor could read it (a cgroup held them).
pub const STEP_PEAK_MEMORY_BYTES: &str = "apollo11_step_peak_memory_bytes";
/// Histogram, labels `workflow`, `step`: the CPU time of a try, user and system, in
/// seconds, for tries whose executor could read it.
pub const STEP_CPU_SECONDS: &str = "apollo11_step_cpu_seconds";
/// Counter, labels `workflow`, `outcome`: attempts ended, by how (`succeeded`, `failed`,
/// `timeout` — it ran past its timeout and was stopped —, `interrupted`).
pub const STEP_ATTEMPTS_TOTAL: &str = "apollo11_step_attempts_total";
/// Counter, labels `workflow`, `class`: failed attempts by their failure class (`exit:1`,
/// `timeout`, `spawn`, an author's `transient`); past [`CLASS_LABELS_MAX`] distinct classes
/// in one process, further ones count as `other`.
pub const STEP_FAILURES_TOTAL: &str = "apollo11_step_failures_total";
/// Most distinct `class` labels of [`STEP_FAILURES_TOTAL`] in one process. Built-in classes
/// are few (exit codes 1 to 255, signals) and an author's are declared in the workflow, so
/// the bound is a guard against a Rust step inventing classes, not a limit a file meets.
pub const CLASS_LABELS_MAX: usize = 512;
/// Counter, labels `workflow`, `outcome`: compensation tries ended (`compensated`,
/// `failed`, `interrupted`).
pub const COMPENSATIONS_TOTAL: &str = "apollo11_compensations_total";
/// Gauge, label `state`: runs by the status this engine last saw them in (the runs its
/// drivers work on, since it opened).
pub const RUNS: &str = "apollo11_runs";
/// Gauge: compensations under way or waiting for their next try, in the runs of [`RUNS`].
pub const COMPENSATIONS_PENDING: &str = "apollo11_compensations_pending";
/// Histogram: seconds each scheduling decision (`decide`) took.
pub const SCHEDULER_LOOP_SECONDS: &str = "apollo11_scheduler_loop_seconds";
/// Gauge, label `phase`: seconds the last open took; the engine reports `phase="engine"`
/// (load the snapshot, fold the log after it). The same name as the log's recovery gauge.
pub const RECOVERY_SECONDS: &str = "apollo11_recovery_seconds";
/// Counter, labels `workflow`, `status`: runs whose driver reached a terminal status.
pub const RUNS_FINISHED_TOTAL: &str = "apollo11_runs_finished_total";
/// Counter: store errors a driver waited out (the store unavailable, a lost race).
pub const STORE_RETRIES_TOTAL: &str = "apollo11_store_retries_total";

/// Counter: runs this engine claimed whose lease someone held before (an instance died,
/// stalled or lost its database past the lease's ttl).
pub const LEASE_TAKEOVERS_TOTAL: &str = "apollo11_lease_takeovers_total";
/// Counter: appends of this engine's drivers the store refused for a stale epoch (the
/// lease had passed to another instance); each stops its driver.
pub const STALE_EPOCH_REJECTIONS_TOTAL: &str = "apollo11_stale_epoch_rejections_total";

/// Gauge, label `by`: runs whose state the process keeps in memory, by who keeps it
/// ([`HELD_BY_ENGINE`]: the engine's view, every run of the live log; [`HELD_BY_INSPECTOR`]:
/// the inspector's rows, every run listed since it last refreshed). Both go down when a
/// `gc` moves runs out of the live log.
pub const RUNS_HELD: &str = "apollo11_runs_held";
/// The `by` label of [`RUNS_HELD`] for the engine's view.
pub const HELD_BY_ENGINE: &str = "engine";
/// The `by` label of [`RUNS_HELD`] for the inspector's rows.
pub const HELD_BY_INSPECTOR: &str = "inspector";

/// The `phase` label of [`RECOVERY_SECONDS`] set by the engine.
pub const PHASE_ENGINE: &str = "engine";

/// Every status [`RUNS`] reports, each present (0 at first) once an engine is open.
const RUN_STATES: [RunStatus; 5] = [
    RunStatus::Running,
    RunStatus::Succeeded,
    RunStatus::Failed,
    RunStatus::RolledBack,
    RunStatus::Paused,
];

/// Buckets for the runtime's histograms, by metric name: steps from 5 ms to an hour,
/// their peak memory from 1 MiB to 16 GiB and CPU time from 10 ms to an hour, decisions
/// from 10 µs to half a second.
pub const HISTOGRAM_BUCKETS: &[(&str, &[f64])] = &[
    (
        STEP_DURATION_SECONDS,
        &[
            0.005, 0.025, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0,
        ],
    ),
    (
        STEP_PEAK_MEMORY_BYTES,
        &[
            1_048_576.0,
            16_777_216.0,
            67_108_864.0,
            268_435_456.0,
            1_073_741_824.0,
            4_294_967_296.0,
            17_179_869_184.0,
        ],
    ),
    (
        STEP_CPU_SECONDS,
        &[0.01, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0, 3600.0],
    ),
    (
        SCHEDULER_LOOP_SECONDS,
        &[
            0.000_01, 0.000_05, 0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.5,
        ],
    ),
];

/// Registers the help text of each metric with the installed recorder (call it after
/// installing one; without one it does nothing).
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_histogram!(
        STEP_DURATION_SECONDS,
        Unit::Seconds,
        "Step attempt durations by workflow, step and outcome."
    );
    describe_counter!(STEP_ATTEMPTS_TOTAL, "Step attempts ended, by outcome.");
    describe_histogram!(
        STEP_PEAK_MEMORY_BYTES,
        Unit::Bytes,
        "Peak memory of step tries, by workflow and step."
    );
    describe_histogram!(
        STEP_CPU_SECONDS,
        Unit::Seconds,
        "CPU time (user and system) of step tries, by workflow and step."
    );
    describe_counter!(
        LEASE_TAKEOVERS_TOTAL,
        "Runs claimed whose lease another instance held before."
    );
    describe_counter!(
        STALE_EPOCH_REJECTIONS_TOTAL,
        "Appends refused for a stale lease epoch."
    );
    describe_counter!(
        STEP_FAILURES_TOTAL,
        "Failed step attempts, by failure class."
    );
    describe_counter!(COMPENSATIONS_TOTAL, "Compensation tries ended, by outcome.");
    describe_gauge!(RUNS, "Runs by the status this engine last saw.");
    describe_gauge!(
        COMPENSATIONS_PENDING,
        "Compensations under way or waiting for their next try."
    );
    describe_histogram!(
        SCHEDULER_LOOP_SECONDS,
        Unit::Seconds,
        "Time of each scheduling decision."
    );
    describe_gauge!(
        RECOVERY_SECONDS,
        Unit::Seconds,
        "Seconds the last open took to recover, by phase."
    );
    describe_counter!(RUNS_FINISHED_TOTAL, "Runs that reached a terminal status.");
    describe_gauge!(
        RUNS_HELD,
        "Runs whose state is kept in memory, by who keeps it."
    );
    describe_counter!(STORE_RETRIES_TOTAL, "Store errors waited out by a driver.");
}

/// What [`STEP_ATTEMPTS_TOTAL`] counts, by its `outcome` label.
pub const ATTEMPT_OUTCOMES: [&str; 4] = ["succeeded", "failed", "timeout", "interrupted"];
/// What [`COMPENSATIONS_TOTAL`] counts, by its `outcome` label.
pub const COMPENSATION_OUTCOMES: [&str; 3] = ["compensated", "failed", "interrupted"];

/// A run of `workflow` is about to be driven: its counters are registered at 0, so the first
/// failure or timeout is an increase a scraper sees (a series born at 1 shows none).
pub(crate) fn run_started(workflow: &str) {
    for outcome in ATTEMPT_OUTCOMES {
        attempt_counter(workflow, outcome).increment(0);
    }
    for outcome in COMPENSATION_OUTCOMES {
        compensation_counter(workflow, outcome).increment(0);
    }
}

fn attempt_counter(workflow: &str, outcome: &'static str) -> metrics::Counter {
    metrics::counter!(STEP_ATTEMPTS_TOTAL, "workflow" => workflow.to_owned(), "outcome" => outcome)
}

fn compensation_counter(workflow: &str, outcome: &'static str) -> metrics::Counter {
    metrics::counter!(COMPENSATIONS_TOTAL, "workflow" => workflow.to_owned(), "outcome" => outcome)
}

/// An attempt ended `outcome`, after `seconds` when this process ran it.
pub(crate) fn attempt_ended(
    workflow: &str,
    step: &str,
    outcome: &'static str,
    seconds: Option<f64>,
) {
    attempt_counter(workflow, outcome).increment(1);
    if let Some(seconds) = seconds {
        metrics::histogram!(
            STEP_DURATION_SECONDS,
            "workflow" => workflow.to_owned(),
            "step" => step.to_owned(),
            "outcome" => outcome
        )
        .record(seconds);
    }
}

/// A try of `step` in `workflow` used `usage`.
pub(crate) fn try_used(workflow: &str, step: &str, usage: &Usage) {
    let labels = [("workflow", workflow.to_owned()), ("step", step.to_owned())];
    if let Some(peak) = usage.peak_memory_bytes {
        metrics::histogram!(STEP_PEAK_MEMORY_BYTES, &labels).record(peak as f64);
    }
    if let Some(seconds) = usage.cpu_seconds() {
        metrics::histogram!(STEP_CPU_SECONDS, &labels).record(seconds);
    }
}

/// An attempt of `workflow` failed with `class`.
pub(crate) fn attempt_failed(workflow: &str, class: &FailureClass) {
    static SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let name = class.name();
    let label = {
        let mut seen = SEEN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.contains(&name) || seen.len() < CLASS_LABELS_MAX {
            seen.insert(name.clone());
            name
        } else {
            "other".to_owned()
        }
    };
    metrics::counter!(STEP_FAILURES_TOTAL, "workflow" => workflow.to_owned(), "class" => label)
        .increment(1);
}

/// A compensation try ended `outcome`.
pub(crate) fn compensation_ended(workflow: &str, outcome: &'static str) {
    compensation_counter(workflow, outcome).increment(1);
}

/// A run's driver reached `status`.
pub(crate) fn run_finished(workflow: &str, status: RunStatus) {
    metrics::counter!(RUNS_FINISHED_TOTAL, "workflow" => workflow.to_owned(), "status" => status.name())
        .increment(1);
}

/// One decision took `seconds`.
pub(crate) fn decided(seconds: f64) {
    metrics::histogram!(SCHEDULER_LOOP_SECONDS).record(seconds);
}

/// A driver waits out a store error.
pub(crate) fn store_retry() {
    metrics::counter!(STORE_RETRIES_TOTAL).increment(1);
}

/// Runs claimed from another holder.
pub(crate) fn taken_over(runs: u64) {
    metrics::counter!(LEASE_TAKEOVERS_TOTAL).increment(runs);
}

/// An append refused for a stale epoch.
pub(crate) fn stale_epoch() {
    metrics::counter!(STALE_EPOCH_REJECTIONS_TOTAL).increment(1);
}

/// `by` keeps `runs` runs in memory now.
pub(crate) fn runs_held(by: &'static str, runs: usize) {
    metrics::gauge!(RUNS_HELD, "by" => by).set(runs as f64);
}

/// An engine opened in `seconds`: its gauges are present from now on.
pub(crate) fn engine_opened(seconds: f64) {
    metrics::gauge!(RECOVERY_SECONDS, "phase" => PHASE_ENGINE).set(seconds);
    for status in RUN_STATES {
        metrics::gauge!(RUNS, "state" => status.name()).increment(0.0);
    }
    metrics::gauge!(COMPENSATIONS_PENDING).increment(0.0);
}

/// Whether a step's compensation is pending: under way, or failed and waiting for a try.
pub(crate) fn compensation_pending(status: StepStatus) -> bool {
    matches!(
        status,
        StepStatus::Compensating | StepStatus::CompensationFailed
    )
}

/// Compensations pending in a run.
pub(crate) fn pending_in(state: &RunState) -> u32 {
    let pending = state
        .steps
        .values()
        .filter(|s| compensation_pending(s.status));
    pending.count() as u32
}

/// What the gauges count of one run.
#[derive(Clone, Copy, PartialEq)]
struct Seen {
    status: RunStatus,
    pending: u32,
}

/// The runs an engine drove since it opened, with the status each was last seen in (running
/// while a driver works on it, then the status its driver ended with) and its pending
/// compensations; [`RUNS`] and [`COMPENSATIONS_PENDING`] are the sums. A run the engine has
/// not driven is not counted: the log holds no status (it is derived), and folding every run
/// at open would cost what the engine's lean view saves. A paused run is counted once
/// something resumes it (it then ends paused again at once, appending nothing). A finished
/// run (succeeded, rolled back) stays in the sums but leaves the map: nothing changes it any
/// more, and its driver, if it is driven again, counts nothing (so a long-lived engine keeps
/// nothing here for the runs it finished).
#[derive(Default)]
pub(crate) struct RunGauges {
    runs: Mutex<HashMap<RunId, Seen>>,
}

impl RunGauges {
    /// Records `run` as seen in `status` with `pending` compensations.
    pub fn seen(&self, run: &RunId, status: RunStatus, pending: u32) {
        let now = Seen { status, pending };
        let before = if status.is_finished() {
            self.lock().remove(run)
        } else {
            self.lock().insert(run.clone(), now)
        };
        if before != Some(now) {
            adjust(before, Some(now));
        }
    }

    /// Stops counting `run` (its driver stopped without a status: an error, an abort).
    pub fn forget(&self, run: &RunId) {
        let before = self.lock().remove(run);
        adjust(before, None);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Seen>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Moves the gauges from what a run counted for to what it counts for now.
fn adjust(before: Option<Seen>, now: Option<Seen>) {
    if let Some(b) = before {
        metrics::gauge!(RUNS, "state" => b.status.name()).decrement(1.0);
        metrics::gauge!(COMPENSATIONS_PENDING).decrement(f64::from(b.pending));
    }
    if let Some(n) = now {
        metrics::gauge!(RUNS, "state" => n.status.name()).increment(1.0);
        metrics::gauge!(COMPENSATIONS_PENDING).increment(f64::from(n.pending));
    }
}
