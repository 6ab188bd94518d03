//! Cold segments: a sealed segment rewritten zstd-compressed, one zstd frame per
//! [`BLOCK_BYTES`] of the segment, with a block table at the end, so that its decompressed
//! bytes are the original segment byte for byte (every record keeps its CRC) and a read
//! decompresses one block, never a whole segment. [`compress_segment`] writes one (temp file,
//! sync, rename over the plain segment, directory sync: a crash leaves the plain segment or
//! the compressed one, never neither); [`open_segment`] is the one seam every reader opens a
//! segment through, handing out its bytes whether plain or compressed; `background.rs`
//! compresses the sealed segments of a writing open past [`crate::Options::compress_after`].

mod background;
mod file;

pub(crate) use background::{compress_sealed, exclusive};
pub use background::{Compactor, Signal};
#[cfg(feature = "testing")]
pub use file::encode;
pub use file::{Broken, ColdFile};

use crate::durable_files::write_atomically;
use crate::file_system::{Fs, FsFile, Mode};
use crate::format::segment;
use apollo11_store::StoreError;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// Segment bytes in each zstd frame of a cold segment.
pub const BLOCK_BYTES: usize = 1 << 20;

/// A segment file as opened: its bytes, whether it is compressed or not.
pub enum SegmentFile {
    /// A segment as the writer wrote it.
    Plain(Arc<dyn FsFile>),
    /// A compressed segment, read through its decompressed bytes.
    Cold(Arc<ColdFile>),
}

impl SegmentFile {
    /// The segment's bytes (decompressed when cold; a cold one is read only).
    pub fn file(&self) -> Arc<dyn FsFile> {
        match self {
            SegmentFile::Plain(file) => file.clone(),
            SegmentFile::Cold(cold) => cold.clone(),
        }
    }

    /// The size of the file on disk when it is compressed.
    pub fn stored_bytes(&self) -> Option<u64> {
        match self {
            SegmentFile::Plain(_) => None,
            SegmentFile::Cold(cold) => Some(cold.stored_bytes()),
        }
    }

    /// All of the segment's bytes that can be read, and, for a damaged cold segment, where
    /// its bytes stop being readable and why.
    ///
    /// # Errors
    ///
    /// The file system's error.
    pub fn read_intact(&self) -> io::Result<(Vec<u8>, Option<Broken>)> {
        match self {
            SegmentFile::Plain(file) => Ok((file.read_all()?, None)),
            SegmentFile::Cold(cold) => cold.read_intact(),
        }
    }
}

/// Opens the segment file at `path`, plain or compressed (told by its first bytes: a zstd
/// frame's magic number, where a plain segment starts with `APOLLO11`). A compressed one can
/// only be read, whatever `mode` says.
///
/// # Errors
///
/// The file system's error.
pub fn open_segment(fs: &dyn Fs, path: &Path, mode: Mode) -> io::Result<SegmentFile> {
    let raw = fs.open(path, mode)?;
    if file::is_cold(raw.as_ref())? {
        Ok(SegmentFile::Cold(Arc::new(ColdFile::new(raw))))
    } else {
        Ok(SegmentFile::Plain(raw.into()))
    }
}

/// The segment `bytes` compressed, checked to decompress to them.
///
/// # Errors
///
/// zstd's error, or [`io::ErrorKind::InvalidData`] when the result does not decompress to
/// `bytes`.
pub fn compress_checked(bytes: &[u8]) -> io::Result<Vec<u8>> {
    let compressed = file::encode(bytes)?;
    if file::decode(&compressed).as_deref() != Ok(bytes) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "its compressed copy does not decompress to it",
        ));
    }
    Ok(compressed)
}

/// What compressing a segment did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compressed {
    /// The segment's size before.
    pub plain_bytes: u64,
    /// The compressed file's size.
    pub stored_bytes: u64,
}

/// Rewrites the sealed segment at `path` compressed, in place: the compressed file is
/// written to a temp file and synced, checked to decompress to the segment's bytes, renamed
/// over the segment and the directory synced. `None` when it was compressed already. Never
/// call it on the segment the writer appends to.
///
/// # Errors
///
/// [`StoreError::Corrupted`] (the segment is left as it is) when the segment does not scan
/// to its end cleanly: damage is for `verify` and `repair`, not to be compressed away;
/// [`StoreError::Io`] naming the file when a read, write, sync or rename fails (the segment
/// is then the plain one or the compressed one, whole).
pub fn compress_segment(fs: &dyn Fs, path: &Path) -> Result<Option<Compressed>, StoreError> {
    let name = format!(
        "segments/{}",
        path.file_name().unwrap_or_default().to_string_lossy()
    );
    let io = |what: &str, e| StoreError::io(format!("{what} {}", path.display()), e);
    let bytes = match open_segment(fs, path, Mode::Read).map_err(|e| io("opening", e))? {
        SegmentFile::Cold(_) => {
            // What a crash after the rename can leave: the temp file's name too.
            let _ = fs.remove(&path.with_extension("tmp"));
            return Ok(None);
        }
        SegmentFile::Plain(file) => file.read_all().map_err(|e| io("reading", e))?,
    };
    let refused = |offset: u64, reason: String| StoreError::Corrupted {
        file: name.clone(),
        offset,
        reason: format!("{reason}; the segment is not compressed"),
    };
    match segment::scan(&bytes) {
        Err(stop) => return Err(refused(stop.offset, stop.reason)),
        Ok(scanned) => {
            if let Some(stop) = scanned.stop {
                return Err(refused(stop.offset, stop.reason));
            }
        }
    }
    let compressed = compress_checked(&bytes).map_err(|e| io("compressing", e))?;
    write_atomically(fs, path, &compressed)?;
    Ok(Some(Compressed {
        plain_bytes: bytes.len() as u64,
        stored_bytes: compressed.len() as u64,
    }))
}
