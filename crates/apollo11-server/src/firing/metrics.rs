//! The metrics of schedules: their names (the only place they are spelled), meanings and
//! buckets. Labels are the workflow's and the schedule's names, bounded by the registered
//! files.

use apollo11_schedule::FireTime;

/// Gauge, labels `workflow`, `schedule`: the fire time (seconds since the epoch) of the
/// newest run this process started for the schedule.
pub const LAST_FIRE_TIMESTAMP_SECONDS: &str = "apollo11_schedule_last_fire_timestamp_seconds";
/// Gauge, labels `workflow`, `schedule`: when the schedule's next fire is due (seconds since
/// the epoch; its time plus its jitter). In the past by more than a moment: nothing fires it.
pub const NEXT_FIRE_TIMESTAMP_SECONDS: &str = "apollo11_schedule_next_fire_timestamp_seconds";
/// Gauge, labels `workflow`, `schedule`: fire times due and not started yet (caught up, or
/// queued behind a run still running).
pub const WAITING_FIRES: &str = "apollo11_schedule_waiting_fires";
/// Histogram, labels `workflow`, `schedule`: seconds from a fire's due time (its time plus
/// its jitter) to its run's creation.
pub const FIRE_LAG_SECONDS: &str = "apollo11_schedule_fire_lag_seconds";
/// Counter, labels `workflow`, `schedule`: runs started by a schedule in this process.
pub const FIRES_TOTAL: &str = "apollo11_schedule_fires_total";
/// Counter, labels `workflow`, `schedule`: fires that started nothing because the
/// schedule's last run was still running (`overlap = "skip"`).
pub const SKIPPED_TOTAL: &str = "apollo11_schedule_skipped_total";
/// Counter, labels `workflow`, `schedule`: fire times missed while no server ran that the
/// schedule's `catch_up` did not start.
pub const MISSED_TOTAL: &str = "apollo11_schedule_missed_total";

/// Gauge, labels `workflow`, `schedule`: 1 while an operator has the schedule paused, else 0
/// (enabled schedules only).
pub const PAUSED: &str = "apollo11_schedule_paused";

/// Buckets of the histograms here.
pub const HISTOGRAM_BUCKETS: &[(&str, &[f64])] = &[(
    FIRE_LAG_SECONDS,
    &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0],
)];

/// Describes the metrics to the installed recorder.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_gauge!(
        LAST_FIRE_TIMESTAMP_SECONDS,
        Unit::Seconds,
        "Fire time of the newest run a schedule started in this process."
    );
    describe_gauge!(
        NEXT_FIRE_TIMESTAMP_SECONDS,
        Unit::Seconds,
        "When a schedule's next fire is due."
    );
    describe_gauge!(
        WAITING_FIRES,
        "Fire times due and not started yet: caught up, or queued behind a running run."
    );
    describe_histogram!(
        FIRE_LAG_SECONDS,
        Unit::Seconds,
        "Seconds from a fire's due time to its run's creation."
    );
    describe_counter!(FIRES_TOTAL, "Runs started by schedules in this process.");
    describe_counter!(
        SKIPPED_TOTAL,
        "Fires that started nothing: the schedule's last run was still running."
    );
    describe_gauge!(
        PAUSED,
        "1 while an operator has the schedule paused, else 0."
    );
    describe_counter!(
        MISSED_TOTAL,
        "Fire times missed while down that catch_up did not start."
    );
}

fn labels(workflow: &str, schedule: &str) -> [(&'static str, String); 2] {
    [
        ("workflow", workflow.to_owned()),
        ("schedule", schedule.to_owned()),
    ]
}

/// A run started for `fire`, `lag_ms` after it was due.
pub(super) fn fired(workflow: &str, schedule: &str, fire: &FireTime, lag_ms: u64) {
    let labels = labels(workflow, schedule);
    metrics::gauge!(LAST_FIRE_TIMESTAMP_SECONDS, &labels).set(fire.ms as f64 / 1_000.0);
    metrics::histogram!(FIRE_LAG_SECONDS, &labels).record(lag_ms as f64 / 1_000.0);
    metrics::counter!(FIRES_TOTAL, &labels).increment(1);
}

/// A fire skipped for overlap.
pub(super) fn skipped(workflow: &str, schedule: &str) {
    metrics::counter!(SKIPPED_TOTAL, &labels(workflow, schedule)).increment(1);
}

/// Fire times missed and not caught up.
pub(super) fn missed(workflow: &str, schedule: &str, n: usize) {
    metrics::counter!(MISSED_TOTAL, &labels(workflow, schedule)).increment(n as u64);
}

/// Where a schedule stands after a round: when it is next due, how many fires wait.
pub(super) fn standing(workflow: &str, schedule: &str, next_due_ms: u64, waiting: usize) {
    let labels = labels(workflow, schedule);
    metrics::gauge!(NEXT_FIRE_TIMESTAMP_SECONDS, &labels).set(next_due_ms as f64 / 1_000.0);
    metrics::gauge!(WAITING_FIRES, &labels).set(waiting as f64);
}

/// Whether the schedule is paused, seen at a round.
pub(super) fn paused(workflow: &str, schedule: &str, paused: bool) {
    metrics::gauge!(PAUSED, &labels(workflow, schedule)).set(if paused { 1.0 } else { 0.0 });
}
