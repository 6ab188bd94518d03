//! The tokio runtime the `apollo11` binary runs on, bounded so that a burst of blocking
//! reads queues instead of starting a thread each.

/// Threads of the blocking pool at most (file reads of the log and of step logs): a burst of
/// requests queues its reads on them instead of starting a thread each, and every thread
/// costs a stack and allocator caches that stay with the process.
pub const BLOCKING_THREADS_MAX: usize = 8;

/// The tokio runtime `apollo11` runs on: a worker a core, [`BLOCKING_THREADS_MAX`] blocking
/// threads.
///
/// # Errors
///
/// The runtime's threads cannot be started.
pub fn tokio_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(BLOCKING_THREADS_MAX)
        .enable_all()
        .build()
}
