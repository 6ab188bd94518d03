//! The narrow file-system interface every byte of the log goes through, so tests can swap
//! the real file system for one that simulates crashes, power loss and IO errors.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// How to open a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    Write,
    /// Read and write; the file must not exist yet.
    CreateNew,
}

/// A held lock; dropping it releases the lock.
pub trait FsLock: Send + Sync {}

/// File-system operations the log uses.
pub trait Fs: Send + Sync + 'static {
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Opens a file.
    fn open(&self, path: &Path, mode: Mode) -> io::Result<Box<dyn FsFile>>;
    /// Names of the files in `dir`, sorted.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Renames a file (atomically replacing `to`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path` (created if missing), writing `holder` into it.
    /// `Ok(None)` when another process (or handle) holds it.
    fn try_lock(&self, path: &Path, holder: &str) -> io::Result<Option<Box<dyn FsLock>>>;
}

/// An open file. Positional IO only: the log tracks its own offsets.
pub trait FsFile: Send + Sync {
    /// Fills `buf` from `offset`; fails if the file is shorter.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes written data durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// Sets the file's length, zero-filling when it grows.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file's length in bytes.
    fn size(&self) -> io::Result<u64>;

    /// The whole file.
    fn read_all(&self) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; usize::try_from(self.size()?).map_err(io::Error::other)?];
        self.read_exact_at(&mut buf, 0)?;
        Ok(buf)
    }
}

/// The operating system's file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

/// Holds the OS lock for as long as it lives.
struct RealLock {
    _file: File,
}
impl FsLock for RealLock {}

impl Fs for RealFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn open(&self, path: &Path, mode: Mode) -> io::Result<Box<dyn FsFile>> {
        let mut options = OpenOptions::new();
        match mode {
            Mode::Read => options.read(true),
            Mode::Write => options.read(true).write(true),
            Mode::CreateNew => options.read(true).write(true).create_new(true),
        };
        Ok(Box::new(options.open(path)?))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn try_lock(&self, path: &Path, holder: &str) -> io::Result<Option<Box<dyn FsLock>>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => {
                file.set_len(0)?;
                FileExt::write_all_at(&file, holder.as_bytes(), 0)?;
                Ok(Some(Box::new(RealLock { _file: file })))
            }
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }
}

impl FsFile for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}
