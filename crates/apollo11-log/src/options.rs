//! Options of the file log.

use apollo11_core::limits;
use apollo11_store::StoreError;
use std::time::Duration;

/// When an append is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// After `fdatasync`: an acknowledged event survives power loss. The default.
    Fsync,
    /// After `write`: survives a process crash, not power loss. Opt in explicitly.
    Buffered,
}

/// How a file log is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// When appends are acknowledged.
    pub durability: Durability,
    /// Roll to a new segment before a segment would grow past this.
    pub segment_bytes_max: u64,
    /// Grow the last segment ahead of its writes, `limits::SEGMENT_PREALLOCATE_BYTES` at a
    /// time, so most appends do not change the file's size.
    pub preallocate: bool,
    /// Snapshots kept on disk (older ones are removed after a new one is saved).
    pub snapshots_kept: usize,
    /// Deterministic mode, for simulation: appends are committed on the calling task (no
    /// writer thread), file work runs there too (no blocking pool) and `scan_runs` visits
    /// one part after another (no threads), so that on a current-thread runtime with a
    /// simulated file system a seed replays exactly. Off by default: an append then blocks
    /// its caller's thread through the sync, and appends are not grouped.
    pub deterministic: bool,
    /// `Some(k)`: a writing open compresses each sealed segment (zstd, `cold/`) on a thread
    /// of its own once `k` newer sealed segments exist, and the segments already past that
    /// at the open; the writer never waits for it. `None` (the default): segments stay plain,
    /// so that a build older than compressed segments can still open the log. Ignored in
    /// [`Options::deterministic`] mode, which runs no thread: [`crate::FileLog::compress_cold`]
    /// compresses on the calling thread in any mode.
    pub compress_after: Option<usize>,
    /// How long a sync that returned with appends queued waits, at most, for the writer
    /// thread to write them, so that the next sync covers them (they are then answered
    /// after about 1.5 syncs instead of 2.5). A writer not scheduled by then (the cores
    /// busy) would delay every append already written, so the sync goes on without them.
    /// Zero: the next sync starts at once. 200 µs by default, about one sync of a
    /// virtual disk.
    pub sync_waits_for_writer: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            durability: Durability::Fsync,
            segment_bytes_max: limits::SEGMENT_BYTES_MAX,
            preallocate: true,
            snapshots_kept: 3,
            deterministic: false,
            compress_after: None,
            sync_waits_for_writer: Duration::from_micros(200),
        }
    }
}

impl Options {
    /// Checks the options against the format's limits.
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`] naming the first option outside its range, and the range.
    pub fn validate(&self) -> Result<(), StoreError> {
        let min = 4096;
        if !(min..=limits::SEGMENT_BYTES_MAX_LIMIT).contains(&self.segment_bytes_max) {
            return Err(StoreError::Invalid {
                what: "segment_bytes_max".into(),
                reason: format!(
                    "{} is outside {min}..={}",
                    self.segment_bytes_max,
                    limits::SEGMENT_BYTES_MAX_LIMIT
                ),
            });
        }
        if self.snapshots_kept == 0 {
            return Err(StoreError::Invalid {
                what: "snapshots_kept".into(),
                reason: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}
