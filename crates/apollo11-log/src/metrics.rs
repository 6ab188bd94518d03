//! The log's metrics: their names (the only place they are spelled), what each means, and
//! the histogram buckets an exporter should give them. The log only emits through the
//! `metrics` facade; a binary that installs no recorder pays next to nothing. Labels carry no
//! run id: every series here is one per process.

/// Counter: events made durable (counted after the sync of the batch that holds them).
pub const EVENTS_APPENDED_TOTAL: &str = "apollo11_events_appended_total";
/// Histogram: events in each group commit (one batch: one write, made durable by a sync).
pub const APPEND_BATCH_EVENTS: &str = "apollo11_append_batch_events";
/// Histogram: seconds each `fdatasync` of the log's writer took (one covers the batches
/// written before it started, one batch in the usual case).
pub const FSYNC_SECONDS: &str = "apollo11_fsync_seconds";
/// Gauge, label `phase`: seconds the last open took to recover. The log reports
/// `phase="log"` (lock, segments, torn tail); the runtime reports the engine's part.
pub const RECOVERY_SECONDS: &str = "apollo11_recovery_seconds";
/// Gauge: 1 while a writing open accepts appends, 0 once a failure has poisoned it.
pub const LOG_WRITABLE: &str = "apollo11_log_writable";
/// Counter: sealed segments compressed (`Options::compress_after`).
pub const SEGMENTS_COMPRESSED_TOTAL: &str = "apollo11_log_segments_compressed_total";
/// Counter: passes of the background compression that stopped at a segment they could not
/// compress (it stays plain and readable; the next seal tries again).
pub const COMPRESSION_FAILURES_TOTAL: &str = "apollo11_log_compression_failures_total";

/// The `phase` label of [`RECOVERY_SECONDS`] set by the log.
pub const PHASE_LOG: &str = "log";

/// Buckets for the log's histograms, by metric name: batches are counted in events (1 up to
/// the largest group), syncs from 50 µs (a fast NVMe) to 2 s (a disk in trouble).
pub const HISTOGRAM_BUCKETS: &[(&str, &[f64])] = &[
    (
        APPEND_BATCH_EVENTS,
        &[
            1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
        ],
    ),
    (
        FSYNC_SECONDS,
        &[
            0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
            0.25, 0.5, 1.0, 2.0,
        ],
    ),
];

/// Registers the help text of each metric with the installed recorder (call it after
/// installing one; without one it does nothing).
pub fn describe() {
    metrics::describe_counter!(EVENTS_APPENDED_TOTAL, "Events made durable in the log.");
    metrics::describe_histogram!(APPEND_BATCH_EVENTS, "Events per group commit of the log.");
    metrics::describe_histogram!(
        FSYNC_SECONDS,
        metrics::Unit::Seconds,
        "Time each group commit's fdatasync took."
    );
    metrics::describe_gauge!(
        RECOVERY_SECONDS,
        metrics::Unit::Seconds,
        "Seconds the last open took to recover, by phase."
    );
    metrics::describe_counter!(
        SEGMENTS_COMPRESSED_TOTAL,
        "Sealed segments of the log compressed."
    );
    metrics::describe_counter!(
        COMPRESSION_FAILURES_TOTAL,
        "Background compression passes stopped by a segment they could not compress."
    );
    metrics::describe_gauge!(
        LOG_WRITABLE,
        "1 while the log accepts appends, 0 once a failed write or sync stopped it."
    );
}

/// Records a batch made durable: its events.
pub(crate) fn batch_durable(events: usize) {
    metrics::counter!(EVENTS_APPENDED_TOTAL).increment(events as u64);
    metrics::histogram!(APPEND_BATCH_EVENTS).record(events as f64);
}

/// Records the time a sync of the log took.
pub(crate) fn synced(seconds: f64) {
    metrics::histogram!(FSYNC_SECONDS).record(seconds);
}

/// Records a writing open: how long recovery took, and that the log accepts appends.
pub(crate) fn opened(recovery_seconds: f64) {
    metrics::gauge!(RECOVERY_SECONDS, "phase" => PHASE_LOG).set(recovery_seconds);
    metrics::gauge!(LOG_WRITABLE).set(1.0);
}

/// Records that the log refuses writes from now on.
pub(crate) fn poisoned() {
    metrics::gauge!(LOG_WRITABLE).set(0.0);
}

/// Records a sealed segment compressed.
pub(crate) fn segment_compressed() {
    metrics::counter!(SEGMENTS_COMPRESSED_TOTAL).increment(1);
}

/// Records a background compression pass stopped by a segment it could not compress.
pub(crate) fn compression_failed() {
    metrics::counter!(COMPRESSION_FAILURES_TOTAL).increment(1);
}
