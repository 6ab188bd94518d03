//! The narrow file-system interface every byte of the log goes through, so tests can swap
//! the real file system for one that simulates crashes, power loss and IO errors.
//!
//! Step outputs may hold secrets: on the real file system every directory the log creates
//! (and the data directory itself) has mode 0700 and every file it creates mode 0600,
//! whatever the umask. The lock file is never followed through a symbolic link nor taken
//! when it is a hard link to some other file: the writer truncates it.

use std::fs::{DirBuilder, File, OpenOptions, Permissions, TryLockError};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of every directory the log creates.
const DIR_MODE: u32 = 0o700;
/// Mode of every file the log creates.
const FILE_MODE: u32 = 0o600;

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
pub trait FsLock: Send + Sync {
    /// Writes the holder given to [`Fs::try_lock`] into the lock file, replacing what an
    /// earlier holder left there. Called only once the holder is sure to change the data
    /// directory: a writer refused for any reason writes nothing, not even this.
    ///
    /// # Errors
    ///
    /// The operating system's error.
    fn claim(&self) -> io::Result<()>;
}

/// File-system operations the log uses.
pub trait Fs: Send + Sync + 'static {
    /// Creates a directory and its parents, each one created (and `dir` itself) accessible
    /// to its owner only.
    ///
    /// # Errors
    ///
    /// The operating system's error.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Opens a file.
    ///
    /// # Errors
    ///
    /// The operating system's error.
    fn open(&self, path: &Path, mode: Mode) -> io::Result<Box<dyn FsFile>>;
    /// Names of the files in `dir`, sorted.
    ///
    /// # Errors
    ///
    /// The operating system's error.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Renames a file (atomically replacing `to`).
    ///
    /// # Errors
    ///
    /// The operating system's error.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    ///
    /// # Errors
    ///
    /// The operating system's error.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    ///
    /// # Errors
    ///
    /// The operating system's error.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path` (created if missing); [`FsLock::claim`] writes
    /// `holder` into it. `Ok(None)`, having changed nothing, when another process (or handle)
    /// holds it. Refuses, touching nothing, a `path` that is a symbolic link or not a file of
    /// its own.
    ///
    /// # Errors
    ///
    /// The operating system's error, or `InvalidInput` for a link or not a file of its own.
    fn try_lock(&self, path: &Path, holder: &str) -> io::Result<Option<Box<dyn FsLock>>>;
}

/// An open file. Positional IO only: the log tracks its own offsets.
pub trait FsFile: Send + Sync {
    /// Fills `buf` from `offset`; fails if the file is shorter.
    ///
    /// # Errors
    ///
    /// The operating system's error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`.
    ///
    /// # Errors
    ///
    /// The operating system's error.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes written data durable (`fdatasync`).
    ///
    /// # Errors
    ///
    /// The operating system's error.
    fn sync_data(&self) -> io::Result<()>;
    /// Sets the file's length, zero-filling when it grows.
    ///
    /// # Errors
    ///
    /// The operating system's error.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file's length in bytes.
    ///
    /// # Errors
    ///
    /// The operating system's error.
    fn size(&self) -> io::Result<u64>;

    /// The whole file.
    ///
    /// # Errors
    ///
    /// The operating system's error.
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
    file: File,
    holder: String,
}

impl FsLock for RealLock {
    fn claim(&self) -> io::Result<()> {
        self.file.set_len(0)?;
        FileExt::write_all_at(&self.file, self.holder.as_bytes(), 0)
    }
}

impl Fs for RealFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        // Top down, so that each directory created gets its mode whatever the umask.
        let missing: Vec<&Path> = dir
            .ancestors()
            .filter(|p| !p.as_os_str().is_empty())
            .take_while(|p| std::fs::symlink_metadata(p).is_err())
            .collect();
        for created in missing.iter().rev() {
            match DirBuilder::new().mode(DIR_MODE).create(created) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                _ => std::fs::set_permissions(created, Permissions::from_mode(DIR_MODE))?,
            }
        }
        // A directory that was there already (the data directory an operator made) is
        // narrowed to its owner too.
        let mode = std::fs::metadata(dir)?.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(dir, Permissions::from_mode(mode & DIR_MODE))?;
        }
        Ok(())
    }

    fn open(&self, path: &Path, mode: Mode) -> io::Result<Box<dyn FsFile>> {
        let mut options = OpenOptions::new();
        match mode {
            Mode::Read => options.read(true),
            Mode::Write => options.read(true).write(true),
            Mode::CreateNew => options
                .read(true)
                .write(true)
                .create_new(true)
                .mode(FILE_MODE),
        };
        let file = options.open(path)?;
        if mode == Mode::CreateNew {
            file.set_permissions(Permissions::from_mode(FILE_MODE))?;
        }
        Ok(Box::new(file))
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
        let refused = |why: &str| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is {why}; the log refuses to lock (and truncate) it: remove it",
                    path.display()
                ),
            )
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => refused("a symbolic link"),
                _ => e,
            })?;
        let metadata = file.metadata()?;
        if !metadata.is_file() {
            return Err(refused("not a regular file"));
        }
        if metadata.nlink() != 1 {
            return Err(refused("a hard link to another file"));
        }
        match file.try_lock() {
            Ok(()) => {
                // Only the holder narrows the mode: a refused writer changes nothing, its
                // inode's change time included.
                file.set_permissions(Permissions::from_mode(FILE_MODE))?;
                Ok(Some(Box::new(RealLock {
                    file,
                    holder: holder.to_owned(),
                })))
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
