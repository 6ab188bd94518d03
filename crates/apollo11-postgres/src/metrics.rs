//! The PostgreSQL backend's metrics: their names (the only place they are spelled) and what
//! each means. Emitted through the `metrics` facade; a binary that installs no recorder pays
//! next to nothing. Every series is one per process.

/// Counter: listening connections of the change feed that could not be opened or were lost.
/// Until one is back the feed reads the store every poll interval, so subscribers still see
/// every event, later.
pub const FEED_LISTEN_FAILURES_TOTAL: &str = "apollo11_pg_feed_listen_failures_total";
/// Counter: reads of new events by the change feed that failed (each is tried again on the
/// next round; subscribers only wait).
pub const FEED_READ_FAILURES_TOTAL: &str = "apollo11_pg_feed_read_failures_total";

/// Registers the help text of each metric with the installed recorder (call it after
/// installing one; without one it does nothing).
pub fn describe() {
    metrics::describe_counter!(
        FEED_LISTEN_FAILURES_TOTAL,
        "Change feed LISTEN connections that failed to open or were lost (the feed polls meanwhile)."
    );
    metrics::describe_counter!(
        FEED_READ_FAILURES_TOTAL,
        "Change feed reads of new events that failed (tried again on the next round)."
    );
}
