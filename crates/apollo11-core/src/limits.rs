//! Every bound Apollo-11 enforces, in one place. Units are in the names.

/// Largest payload kept inline in an event; larger payloads go to the blob store.
pub const PAYLOAD_INLINE_BYTES_MAX: u32 = 4 * 1024;

/// Largest encoded event record accepted by any decoder (a payload is inline only up to
/// [`PAYLOAD_INLINE_BYTES_MAX`], so this leaves ample room for names and errors).
pub const RECORD_BYTES_MAX: u32 = 64 * 1024;

/// Largest error message kept in a `Failed` event; longer messages are cut at a char
/// boundary by the writer (the full text belongs to the step's own logs).
pub const ERROR_MESSAGE_BYTES_MAX: u32 = 2 * 1024;

/// Largest output a shell step may leave in its output file, in bytes. It becomes the step's
/// payload: read whole into memory and kept in the blob store, so it is checked from the file's
/// size before anything is read. Bulk results belong in the step's own files.
pub const STEP_OUTPUT_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// Longest duration a workflow definition may state (a timeout, a retry delay): 365 days.
/// Far beyond any sensible wait, and far from the `u64` milliseconds that would wrap.
pub const DURATION_MS_MAX: u64 = 365 * 24 * 3600 * 1000;

/// Largest run id, step name or workflow name, in bytes. Names become single path components
/// (a run's folder, a step's log file), so this stays below the 255 bytes most file systems
/// allow in one component, with room for the suffixes added to it.
pub const NAME_BYTES_MAX: u32 = 200;

/// Largest free-form label: an operator's name (`by`), a scheduler instance's name.
pub const LABEL_BYTES_MAX: u32 = 256;

/// Most items one `for_each` declaration may expand to: over it, a definition is invalid
/// (items known when the run is created) or the template step fails (items known at run
/// time), naming the count and this limit.
pub const FOR_EACH_ITEMS_MAX: u32 = 10_000;

/// Largest value of one workflow parameter, in bytes of its JSON text: arguments are pinned
/// in the run's definition, which is not the place for bulk data.
pub const PARAM_VALUE_BYTES_MAX: u32 = 64 * 1024;

/// Most steps a run's graph may have: room for a `for_each` of [`FOR_EACH_ITEMS_MAX`] items
/// beside the steps around it, with a second one as large.
pub const DAG_NODES_MAX: u32 = 2 * FOR_EACH_ITEMS_MAX;

/// Default segment size of the file log before it rolls to a new segment.
pub const SEGMENT_BYTES_MAX: u64 = 100 * 1024 * 1024;

/// The file log grows its last segment ahead of its writes by this much at a time, so most
/// appends do not change the file's size, and opening reads few preallocated zeros.
pub const SEGMENT_PREALLOCATE_BYTES: u64 = 4 * 1024 * 1024;

/// Default number of events between two snapshots.
pub const SNAPSHOT_EVERY_EVENTS: u64 = 1_000;

/// Most events one append may carry. With `RECORD_BYTES_MAX` this bounds one append to
/// 64 MiB, which keeps every record offset of the file log inside a `u32`.
pub const APPEND_BATCH_EVENTS_MAX: u32 = 1_000;

/// Depth of every bounded queue between components (appenders to the log writer, etc.).
pub const QUEUE_DEPTH_MAX: u32 = 4_096;

/// Events a store's change feed holds for its slowest subscriber. A subscriber this far
/// behind is told it fell behind (and re-reads the log) rather than make the writer wait.
pub const CHANGE_FEED_EVENTS_MAX: u32 = 4_096;

/// Number of successful durations needed before `timeout = "auto"` trusts its p99.
pub const AUTO_TIMEOUT_SAMPLES_MIN: u32 = 20;

/// Largest segment size the file log accepts as an option (record offsets are `u32`).
pub const SEGMENT_BYTES_MAX_LIMIT: u64 = 1024 * 1024 * 1024;

/// The file log's writer stops gathering queued appends into one write once it holds this
/// many bytes: group commit amortizes fsync without unbounded memory.
pub const GROUP_COMMIT_BYTES_MAX: u32 = 8 * 1024 * 1024;

/// Largest data, as JSON, an operator's signal to a waiting step may carry (it becomes the
/// step's output).
pub const SIGNAL_DATA_BYTES_MAX: u32 = 64 * 1024;
