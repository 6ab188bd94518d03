//! One error type for every store operation. Corruption and conflicts are values, never
//! panics; IO errors keep their source and say what was being done.

use apollo11_core::{RunId, Seq};
use std::sync::Arc;

/// Why a store operation failed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    /// The run is not at the stated seq: another writer got there first.
    #[error("conflict on run `{run_id}`: expected to append seq {expected}, but the run is at seq {actual}")]
    Conflict {
        /// The run.
        run_id: RunId,
        /// The seq the writer stated for its first event.
        expected: Seq,
        /// The run's last seq (0 for a new run), so the next valid seq is `actual + 1`.
        actual: Seq,
    },
    /// Stored data failed a check.
    #[error("corrupted data in {file} at offset {offset}: {reason}")]
    Corrupted {
        /// The file (or table) holding the damage.
        file: String,
        /// Byte offset of the damage in that file.
        offset: u64,
        /// What check failed.
        reason: String,
    },
    /// Another process holds the data directory for writing.
    #[error("{path} is locked by another writer{}", holder.as_deref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Locked {
        /// The lock file.
        path: String,
        /// What the lock file says about its holder, if anything.
        holder: Option<String>,
    },
    /// A durability failure (an fsync error) stopped the store; nothing after it was
    /// acknowledged. Reopen to recover.
    #[error("the store stopped after a durability failure and accepts nothing more: {cause}")]
    Poisoned {
        /// The original failure.
        cause: String,
    },
    /// An input is over a limit.
    #[error("{what} is {bytes} bytes, over the limit of {max}")]
    TooLarge {
        /// What was too large.
        what: String,
        /// Its size.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// An input is malformed.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// What was invalid.
        what: String,
        /// Why.
        reason: String,
    },
    /// Something asked for does not exist.
    #[error("{what} not found")]
    NotFound {
        /// What was missing.
        what: String,
    },
    /// The store was opened read-only.
    #[error("the store is open read-only")]
    ReadOnly,
    /// An IO operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The OS error.
        source: Arc<std::io::Error>,
    },
}

impl StoreError {
    /// Wraps an IO error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> StoreError {
        StoreError::Io {
            context: context.into(),
            source: Arc::new(source),
        }
    }
}
