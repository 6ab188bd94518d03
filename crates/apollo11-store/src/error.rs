//! One error type for every store operation. Corruption and conflicts are values, never
//! panics; IO errors keep their source and say what was being done. Messages name what
//! failed and where, never what to do about it in a particular front end (a CLI command, an
//! HTTP status): that is the front end's to say.
//!
//! The enum is `#[non_exhaustive]`: backends will add kinds of failure. Callers match the
//! kinds they act on and ask [`StoreError::is_retryable`] about the rest.

use apollo11_core::{RunId, Seq};
use std::sync::Arc;

/// Why a store operation failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// A control was written expecting a version it is no longer at: another writer got
    /// there first.
    #[error(
        "conflict on control `{key}`: expected version {expected}, but it is at version {actual}"
    )]
    ControlConflict {
        /// The control's key.
        key: String,
        /// The version the writer read (0: none).
        expected: u64,
        /// The version it is at.
        actual: u64,
    },
    /// A fenced append carried an epoch that is not the run's current one: its writer lost
    /// the run's lease (to a takeover, or never held it) and must stop driving the run.
    #[error("run `{run_id}` is fenced off at epoch {epoch}: its lease is at epoch {current}")]
    Fenced {
        /// The run.
        run_id: RunId,
        /// The epoch the writer stated.
        epoch: u64,
        /// The run's current epoch (0 for a run never leased).
        current: u64,
    },
    /// A lease was renewed or released by an owner that no longer holds it at its epoch.
    #[error("`{owner}` no longer holds the lease of run `{run_id}` at epoch {epoch}")]
    LeaseLost {
        /// The run.
        run_id: RunId,
        /// Who believed it held the lease.
        owner: String,
        /// The epoch it believed it held.
        epoch: u64,
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
    /// A read without the data directory's lock met a `gc` swap in progress in another
    /// process (or one a crash left unfinished): the segments were mid-swap, not damaged.
    /// Worth retrying; a writing open finishes an unfinished swap.
    #[error("a gc is in progress ({manifest}); retry, or a writing open will finish it")]
    GcInProgress {
        /// The swap's manifest, relative to the data directory (`archive/<gen>.gc`).
        manifest: String,
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
    /// The backend could not be asked, or did not answer in time: a connection refused or
    /// lost, a pool with no free connection, a timeout. Always worth retrying; an append that
    /// failed this way may still have been written, which its retry (with the same expected
    /// seq) finds out as a [`StoreError::Conflict`].
    #[error("the store is unavailable: {message}")]
    Unavailable {
        /// What was being done, and what the backend's client said.
        message: String,
        /// The database's SQLSTATE (`57P01`, `08006`), when the database said why.
        sqlstate: Option<String>,
    },
    /// The backend answered with an error of its own: a database's serialization failure or
    /// deadlock (retryable: the transaction did not happen), a constraint it enforces, a
    /// permission (not retryable).
    #[error("the store refused: {message}")]
    Backend {
        /// What was being done, and the backend's error (its code, when it has one).
        message: String,
        /// Whether the same call may succeed if made again.
        retryable: bool,
        /// The database's SQLSTATE (`40001`, `23505`), when it has one.
        sqlstate: Option<String>,
    },
}

impl StoreError {
    /// Whether making the same call again may succeed: the failure was transient (the
    /// backend unavailable, a transaction that lost a race inside the database). A
    /// [`StoreError::Conflict`] is not: the caller must read what was written first. Neither
    /// is anything about the data (damage, a limit, a poisoned file log).
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Unavailable { .. } | StoreError::GcInProgress { .. } => true,
            StoreError::Backend { retryable, .. } => *retryable,
            StoreError::Conflict { .. }
            | StoreError::ControlConflict { .. }
            | StoreError::Fenced { .. }
            | StoreError::LeaseLost { .. }
            | StoreError::Corrupted { .. }
            | StoreError::Locked { .. }
            | StoreError::Poisoned { .. }
            | StoreError::TooLarge { .. }
            | StoreError::Invalid { .. }
            | StoreError::NotFound { .. }
            | StoreError::ReadOnly
            | StoreError::Io { .. } => false,
        }
    }

    /// The database's SQLSTATE of an [`StoreError::Unavailable`] or [`StoreError::Backend`]
    /// the database explained (`40001` a serialization failure, `23505` a unique violation,
    /// `57P01` the server shutting down), for callers that decide by it.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            StoreError::Unavailable { sqlstate, .. } | StoreError::Backend { sqlstate, .. } => {
                sqlstate.as_deref()
            }
            _ => None,
        }
    }

    /// [`StoreError::Unavailable`] with no database code: the backend is out of reach or
    /// closing.
    pub fn unavailable(message: impl Into<String>) -> StoreError {
        StoreError::Unavailable {
            message: message.into(),
            sqlstate: None,
        }
    }

    /// Wraps an IO error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> StoreError {
        StoreError::Io {
            context: context.into(),
            source: Arc::new(source),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transient_failures_are_retryable() {
        let retryable = [
            StoreError::Unavailable {
                message: "connection reset".into(),
                sqlstate: None,
            },
            StoreError::Backend {
                message: "40001 could not serialize access".into(),
                retryable: true,
                sqlstate: Some("40001".into()),
            },
        ];
        assert!(retryable.iter().all(StoreError::is_retryable));
        let not = [
            StoreError::Backend {
                message: "23505 duplicate key".into(),
                retryable: false,
                sqlstate: Some("23505".into()),
            },
            StoreError::Conflict {
                run_id: RunId::from("r"),
                expected: Seq(2),
                actual: Seq(3),
            },
            StoreError::Poisoned {
                cause: "fsync".into(),
            },
            StoreError::Fenced {
                run_id: RunId::from("r"),
                epoch: 1,
                current: 2,
            },
            StoreError::LeaseLost {
                run_id: RunId::from("r"),
                owner: "a".into(),
                epoch: 1,
            },
            StoreError::io("syncing", std::io::Error::other("EIO")),
        ];
        assert!(!not.iter().any(StoreError::is_retryable));
        let codes: Vec<_> = retryable
            .iter()
            .chain(&not)
            .map(StoreError::sqlstate)
            .collect();
        assert_eq!(codes[..3], [None, Some("40001"), Some("23505")]);
        assert!(codes[3..].iter().all(Option::is_none));
    }
}
