//! The dispatcher's metrics: their names (the only place they are spelled), what each means,
//! the histogram's buckets, and the three it records where their facts happen (through the
//! `metrics` facade; only a binary installs a recorder).
//!
//! The gauges are not recorded: they are counts of what the dispatcher holds now, so a front
//! end computes them when it is scraped, from [`Dispatcher::workers`](crate::Dispatcher::workers)
//! and [`Dispatcher::queued`](crate::Dispatcher::queued) ([`gauges`]). A label set nobody
//! waits for then has no series, rather than a zero kept forever.

use crate::view::{QueuedView, WorkerView};
use crate::Labels;

/// Gauge: workers heard from within the heartbeat timeout.
pub const WORKERS_CONNECTED: &str = "apollo11_workers_connected";
/// Gauge, label `state`: the slots of the connected workers, `total` and `busy` (tries a
/// worker holds for this engine, adopted ones included).
pub const WORKER_SLOTS: &str = "apollo11_worker_slots";
/// Gauge, labels `needs` (the labels, `role=db,zone=a`) and `matched` (`true` when a
/// connected worker carries them): tries waiting for a worker. At most
/// [`QUEUED_SERIES_MAX`] label sets are named, the rest summed under `needs="other"`.
pub const WORKER_QUEUED_TRIES: &str = "apollo11_worker_queued_tries";
/// Histogram: seconds from a try's submission to a worker taking it (tries that leave the
/// queue otherwise, past their queue timeout or withdrawn, are not observed).
pub const WORKER_QUEUE_WAIT_SECONDS: &str = "apollo11_worker_queue_wait_seconds";
/// Counter: workers declared lost (silent past the heartbeat timeout while holding tries).
pub const WORKERS_LOST_TOTAL: &str = "apollo11_workers_lost_total";
/// Counter, label `reason`: results of workers refused, `decided` (the try was decided
/// without it: never recorded), `unknown` (the dispatcher does not know the try yet: the
/// worker reports again) or `not_recorded` (taken, but not durable in the log in time, or
/// the engine stopped first: the worker reports again).
pub const WORKER_RESULTS_REFUSED_TOTAL: &str = "apollo11_worker_results_refused_total";

/// How many label sets [`WORKER_QUEUED_TRIES`] names; the others are summed under
/// [`NEEDS_OTHER`], so a `for_each` over ten thousand hosts waits in at most this many
/// series and two more.
pub const QUEUED_SERIES_MAX: usize = 50;
/// The `needs` of the label sets past [`QUEUED_SERIES_MAX`]: never a rendered label set,
/// which is empty or holds a `=`.
pub const NEEDS_OTHER: &str = "other";

/// Buckets of the queue wait: 10 ms to an hour (a try's queue timeout is 10 minutes by
/// default).
pub const HISTOGRAM_BUCKETS: &[(&str, &[f64])] = &[(
    WORKER_QUEUE_WAIT_SECONDS,
    &[
        0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 600.0, 1800.0, 3600.0,
    ],
)];

/// The `reason`s of [`WORKER_RESULTS_REFUSED_TOTAL`].
pub const REFUSAL_REASONS: [&str; 3] = ["decided", "unknown", "not_recorded"];

/// Registers the help text of each recorded metric with the installed recorder (call it
/// after installing one; without one it does nothing).
pub fn describe() {
    use metrics::{describe_counter, describe_histogram, Unit};
    describe_histogram!(
        WORKER_QUEUE_WAIT_SECONDS,
        Unit::Seconds,
        "Time from a try's submission to a worker taking it."
    );
    describe_counter!(
        WORKERS_LOST_TOTAL,
        "Workers silent past the heartbeat timeout while holding tries."
    );
    describe_counter!(
        WORKER_RESULTS_REFUSED_TOTAL,
        "Results of workers refused, by reason."
    );
}

/// A dispatcher started: its counters are registered at 0, so the first loss or refusal is
/// an increase a scraper sees.
pub(crate) fn started() {
    metrics::counter!(WORKERS_LOST_TOTAL).increment(0);
    for reason in REFUSAL_REASONS {
        metrics::counter!(WORKER_RESULTS_REFUSED_TOTAL, "reason" => reason).increment(0);
    }
}

/// A worker took a try that waited `seconds`.
pub(crate) fn taken(seconds: f64) {
    metrics::histogram!(WORKER_QUEUE_WAIT_SECONDS).record(seconds);
}

/// A worker was declared lost.
pub(crate) fn lost() {
    metrics::counter!(WORKERS_LOST_TOTAL).increment(1);
}

/// A worker's result was refused for `reason` (one of [`REFUSAL_REASONS`]).
pub(crate) fn refused(reason: &'static str) {
    metrics::counter!(WORKER_RESULTS_REFUSED_TOTAL, "reason" => reason).increment(1);
}

/// The gauges' values now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// [`WORKERS_CONNECTED`].
    pub connected: u32,
    /// [`WORKER_SLOTS`] `total`.
    pub slots: u32,
    /// [`WORKER_SLOTS`] `busy`.
    pub busy: u32,
    /// [`WORKER_QUEUED_TRIES`], one series a label set, bounded.
    pub queued: Vec<QueuedSeries>,
}

/// One series of [`WORKER_QUEUED_TRIES`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedSeries {
    /// Its `needs` label.
    pub needs: String,
    /// Its `matched` label.
    pub matched: bool,
    /// How many tries wait.
    pub tries: u32,
}

/// The gauges of a dispatcher's workers and queue. The label sets no connected worker
/// carries come first among those named, then the longest queues.
pub fn gauges(workers: &[WorkerView], queued: &[QueuedView]) -> Gauges {
    // A worker an adoption named but that has not called yet is not connected.
    let connected = workers.iter().filter(|w| w.connected_since_ms > 0);
    let mut sets: Vec<&QueuedView> = queued.iter().collect();
    sets.sort_by_key(|q| (q.matched, std::cmp::Reverse(q.tries)));
    let mut series: Vec<QueuedSeries> = (sets.iter().take(QUEUED_SERIES_MAX))
        .map(|q| QueuedSeries {
            needs: needs_label(&q.needs),
            matched: q.matched,
            tries: q.tries,
        })
        .collect();
    for matched in [false, true] {
        let rest = sets.iter().skip(QUEUED_SERIES_MAX);
        let tries: u32 = rest.filter(|q| q.matched == matched).map(|q| q.tries).sum();
        if tries > 0 {
            let needs = NEEDS_OTHER.to_owned();
            series.push(QueuedSeries {
                needs,
                matched,
                tries,
            });
        }
    }
    Gauges {
        connected: connected.clone().count() as u32,
        slots: connected.map(|w| w.slots).sum(),
        busy: workers.iter().map(|w| w.running).sum(),
        queued: series,
    }
}

/// Labels as the `needs` label says them: `role=db,zone=a`.
pub fn needs_label(labels: &Labels) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(",")
}
