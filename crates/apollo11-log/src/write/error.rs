//! What stops the writer: the first failure of a write or a sync (the log's own, or a
//! snapshot's or a blob's), kept as the cause of the poisoning every later call reports.

use apollo11_store::StoreError;
use std::io;
use std::sync::Arc;

/// The raw OS error of a write to a full disk (`ENOSPC`).
const ENOSPC: i32 = 28;

/// A failure that stops the writer, and poisons the store.
#[derive(Clone, Debug, thiserror::Error)]
pub enum WriteError {
    /// A write or a size change found no space left on the device.
    #[error("{doing}: the disk is full ({source})")]
    DiskFull {
        /// What was being done, with the file (and the offset, for a segment's write).
        doing: String,
        /// The OS error.
        source: Arc<io::Error>,
    },
    /// Any other IO failure: a write, a sync (never retried), a file created or renamed.
    #[error("{doing}: {source}")]
    Io {
        /// What was being done, with the file (and the offset, for a segment's write).
        doing: String,
        /// The OS error.
        source: Arc<io::Error>,
    },
    /// The writer panicked: a bug, which stops the store like an IO failure.
    #[error("the log writer panicked: {message}")]
    Panicked {
        /// The panic's message.
        message: String,
    },
    /// A `gc` failed once its manifest could be on disk: only the next open may finish it.
    #[error("gc stopped half way, to be finished by the next open: {source}")]
    GcStopped {
        /// Its failure.
        source: StoreError,
    },
}

impl WriteError {
    /// The failure `source` met while `doing`: [`WriteError::DiskFull`] when the device has
    /// no space left, else [`WriteError::Io`].
    pub fn io(doing: impl Into<String>, source: io::Error) -> WriteError {
        WriteError::of(doing.into(), Arc::new(source))
    }

    /// [`WriteError::io`] for an OS error already shared (a [`StoreError::Io`]'s).
    pub(crate) fn of(doing: String, source: Arc<io::Error>) -> WriteError {
        let full =
            source.kind() == io::ErrorKind::StorageFull || source.raw_os_error() == Some(ENOSPC);
        if full {
            WriteError::DiskFull { doing, source }
        } else {
            WriteError::Io { doing, source }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enospc_is_a_full_disk_by_kind_or_by_raw_os_error() {
        let by_kind = io::Error::new(io::ErrorKind::StorageFull, "no space");
        let by_errno = io::Error::from_raw_os_error(ENOSPC);
        for source in [by_kind, by_errno] {
            let error = WriteError::io("writing segments/1.seg at offset 40", source);
            assert!(matches!(error, WriteError::DiskFull { .. }), "{error:?}");
            assert!(error
                .to_string()
                .starts_with("writing segments/1.seg at offset 40: the disk is full"));
        }
    }

    #[test]
    fn another_os_error_is_io_with_its_source() {
        let error = WriteError::io("syncing segments/1.seg", io::Error::other("EIO"));
        match &error {
            WriteError::Io { doing, source } => {
                assert_eq!(doing, "syncing segments/1.seg");
                assert_eq!(source.to_string(), "EIO");
            }
            other => panic!("not an IO error: {other:?}"),
        }
        assert_eq!(error.to_string(), "syncing segments/1.seg: EIO");
    }
}
