//! A crash-simulating file system for tests. Writes and `set_len`s stay pending on their
//! file until `sync_data`; creations, renames and removals stay pending on their directory
//! until `sync_dir`. [`SimFs::power_loss`] returns the file system a machine would find
//! after losing power: each pending data operation applied, dropped, torn or garbled, and
//! a random prefix of the pending directory operations applied. Faults make syncs fail or
//! the disk fill up. Deterministic for a given seed.

use crate::file_system::{Fs, FsFile, FsLock, Mode};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// A fault to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The sync (`sync_data` or `sync_dir`) numbered `n` (from 0) and every later one fail
    /// with an IO error.
    FailSync(u32),
    /// Writes fail with "no space" once this many bytes were written in all (what fits is
    /// written first, as a real disk would). `set_len` reserves nothing, like a sparse file.
    DiskFull(u64),
    /// The machine loses power during the sync numbered `at`: the file system it leaves
    /// (see [`SimFs::power_loss`] with `seed`) is kept for [`SimFs::crashed`], and that sync
    /// and every later one fail.
    PowerLossAtSync {
        /// Which sync.
        at: u32,
        /// Decides what the pending operations become.
        seed: u64,
    },
    /// Every sync and every read waits, blocking its thread, until [`SimFs::release`] (or
    /// [`STALL_MS_MAX`] pass, so that a test of what else runs meanwhile fails rather than
    /// hangs). [`SimFs::stalled`] counts the operations waiting.
    Stall,
    /// The sync numbered `n` (from 0) panics, in whichever thread makes it: a bug, as
    /// opposed to an IO error.
    PanicAtSync(u32),
}

/// The longest a [`Fault::Stall`] holds an operation.
pub const STALL_MS_MAX: u64 = 3_000;

/// Operations held by [`Fault::Stall`].
#[derive(Default)]
struct Stall {
    /// `(released, waiting)`.
    state: Mutex<(bool, u32)>,
    released: Condvar,
}

#[derive(Clone, Debug)]
enum DataOp {
    Write { offset: u64, bytes: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<DataOp>,
}

#[derive(Clone, Debug)]
enum DirOp {
    Link(PathBuf, Arc<Mutex<Inode>>),
    Unlink(PathBuf),
}

#[derive(Default)]
struct State {
    files: BTreeMap<PathBuf, Arc<Mutex<Inode>>>,
    durable_files: BTreeMap<PathBuf, Arc<Mutex<Inode>>>,
    pending_dir_ops: Vec<DirOp>,
    dirs: BTreeSet<PathBuf>,
    locks: BTreeSet<PathBuf>,
    fault: Option<Fault>,
    syncs: u32,
    written: u64,
    crashed: Option<SimFs>,
}

/// The simulated file system. Clones share state.
#[derive(Clone, Default)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
    stall: Arc<Stall>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn apply(data: &mut Vec<u8>, op: &DataOp) {
    match op {
        DataOp::Write { offset, bytes } => {
            let end = *offset as usize + bytes.len();
            if data.len() < end {
                data.resize(end, 0);
            }
            data[*offset as usize..end].copy_from_slice(bytes);
        }
        DataOp::SetLen(len) => data.resize(*len as usize, 0),
    }
}

/// xorshift64*: a tiny deterministic generator, so a failing seed replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

impl SimFs {
    /// An empty file system.
    pub fn new() -> SimFs {
        SimFs::default()
    }

    /// Injects a fault from now on (replacing any earlier one).
    pub fn set_fault(&self, fault: Option<Fault>) {
        let mut state = lock(&self.state);
        state.fault = fault;
        state.syncs = 0;
        lock(&self.stall.state).0 = false;
    }

    /// Operations a [`Fault::Stall`] holds right now.
    pub fn stalled(&self) -> u32 {
        lock(&self.stall.state).1
    }

    /// Lets every operation a [`Fault::Stall`] holds (or would hold) go on.
    pub fn release(&self) {
        lock(&self.stall.state).0 = true;
        self.stall.released.notify_all();
    }

    /// Under [`Fault::Stall`], waits until released (at most [`STALL_MS_MAX`]).
    fn stall_point(&self) {
        if lock(&self.state).fault != Some(Fault::Stall) {
            return;
        }
        let mut held = lock(&self.stall.state);
        held.1 += 1;
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(STALL_MS_MAX);
        while !held.0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            held = self
                .stall
                .released
                .wait_timeout(held, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        held.1 -= 1;
    }

    /// Syncs performed since the fault was last set.
    pub fn syncs(&self) -> u32 {
        lock(&self.state).syncs
    }

    /// The durable content of a file, as a power loss that drops every pending operation
    /// would leave it.
    pub fn durable_content(&self, path: &Path) -> Option<Vec<u8>> {
        let state = lock(&self.state);
        state
            .durable_files
            .get(path)
            .map(|inode| lock(inode).durable.clone())
    }

    /// The file system after a power loss, decided by `seed`. The old one stays usable (a
    /// process still holding it writes into the void).
    pub fn power_loss(&self, seed: u64) -> SimFs {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let state = lock(&self.state);
        let mut names = state.durable_files.clone();
        let applied = rng.below(state.pending_dir_ops.len() as u64 + 1) as usize;
        for op in &state.pending_dir_ops[..applied] {
            match op {
                DirOp::Link(path, inode) => names.insert(path.clone(), inode.clone()),
                DirOp::Unlink(path) => names.remove(path),
            };
        }
        let mut files = BTreeMap::new();
        for (path, inode) in names {
            let inode = lock(&inode);
            let mut data = inode.durable.clone();
            for op in &inode.pending {
                survive(&mut data, op, &mut rng);
            }
            let fresh = Inode {
                data: data.clone(),
                durable: data,
                pending: Vec::new(),
            };
            files.insert(path, Arc::new(Mutex::new(fresh)));
        }
        let after = State {
            durable_files: files.clone(),
            files,
            dirs: state.dirs.clone(),
            ..State::default()
        };
        SimFs {
            state: Arc::new(Mutex::new(after)),
            stall: Arc::default(),
        }
    }

    /// The file system left by a [`Fault::PowerLossAtSync`] that struck.
    pub fn crashed(&self) -> Option<SimFs> {
        lock(&self.state).crashed.clone()
    }

    fn sync(&self) -> io::Result<()> {
        self.stall_point();
        let mut state = lock(&self.state);
        let n = state.syncs;
        state.syncs += 1;
        match state.fault {
            Some(Fault::PanicAtSync(at)) if n == at => {
                drop(state);
                panic!("injected panic in sync #{n}");
            }
            Some(Fault::FailSync(at)) if n >= at => Err(io::Error::other(format!(
                "injected sync failure (sync #{n})"
            ))),
            Some(Fault::PowerLossAtSync { at, seed }) if n >= at => {
                if n == at {
                    drop(state);
                    let image = self.power_loss(seed);
                    lock(&self.state).crashed = Some(image);
                }
                Err(io::Error::other(format!(
                    "power lost during sync #{n} (simulated)"
                )))
            }
            _ => Ok(()),
        }
    }
}

/// What a power loss does to one pending operation.
fn survive(data: &mut Vec<u8>, op: &DataOp, rng: &mut Rng) {
    match (rng.below(10), op) {
        (0..=3, _) => apply(data, op),
        (4..=6, _) => {}
        (7..=8, DataOp::Write { offset, bytes }) => {
            let kept = rng.below(bytes.len() as u64 + 1) as usize;
            apply(
                data,
                &DataOp::Write {
                    offset: *offset,
                    bytes: bytes[..kept].to_vec(),
                },
            );
        }
        (_, DataOp::Write { offset, bytes }) => {
            let mut garbled = bytes.clone();
            for _ in 0..=rng.below(8) {
                let i = rng.below(garbled.len() as u64) as usize;
                if let Some(b) = garbled.get_mut(i) {
                    *b = rng.next() as u8;
                }
            }
            apply(
                data,
                &DataOp::Write {
                    offset: *offset,
                    bytes: garbled,
                },
            );
        }
        (_, DataOp::SetLen(_)) => apply(data, op),
    }
}

struct SimFile {
    fs: SimFs,
    inode: Arc<Mutex<Inode>>,
}

struct SimLock {
    fs: SimFs,
    path: PathBuf,
}

impl FsLock for SimLock {
    /// Simulated locks live in memory only: there is no lock file to write.
    fn claim(&self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for SimLock {
    fn drop(&mut self) {
        lock(&self.fs.state).locks.remove(&self.path);
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", path.display()),
    )
}

impl Fs for SimFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = lock(&self.state);
        for ancestor in dir.ancestors() {
            state.dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    fn open(&self, path: &Path, mode: Mode) -> io::Result<Box<dyn FsFile>> {
        let mut state = lock(&self.state);
        let inode = match (mode, state.files.get(path)) {
            (Mode::CreateNew, Some(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists", path.display()),
                ))
            }
            (Mode::CreateNew, None) => {
                if !state.dirs.contains(path.parent().unwrap_or(Path::new(""))) {
                    return Err(not_found(path));
                }
                let inode = Arc::new(Mutex::new(Inode::default()));
                state.files.insert(path.to_path_buf(), inode.clone());
                state
                    .pending_dir_ops
                    .push(DirOp::Link(path.to_path_buf(), inode.clone()));
                inode
            }
            (Mode::Read | Mode::Write, Some(inode)) => inode.clone(),
            (Mode::Read | Mode::Write, None) => return Err(not_found(path)),
        };
        Ok(Box::new(SimFile {
            fs: self.clone(),
            inode,
        }))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let state = lock(&self.state);
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(state
            .files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = lock(&self.state);
        let inode = state.files.remove(from).ok_or_else(|| not_found(from))?;
        state.files.insert(to.to_path_buf(), inode.clone());
        state
            .pending_dir_ops
            .push(DirOp::Link(to.to_path_buf(), inode));
        state
            .pending_dir_ops
            .push(DirOp::Unlink(from.to_path_buf()));
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut state = lock(&self.state);
        state.files.remove(path).ok_or_else(|| not_found(path))?;
        state
            .pending_dir_ops
            .push(DirOp::Unlink(path.to_path_buf()));
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.sync()?;
        let mut state = lock(&self.state);
        let ops = std::mem::take(&mut state.pending_dir_ops);
        let (mine, others): (Vec<DirOp>, Vec<DirOp>) = ops.into_iter().partition(|op| match op {
            DirOp::Link(p, _) | DirOp::Unlink(p) => p.parent() == Some(dir),
        });
        for op in mine {
            match op {
                DirOp::Link(path, inode) => state.durable_files.insert(path, inode),
                DirOp::Unlink(path) => state.durable_files.remove(&path),
            };
        }
        state.pending_dir_ops = others;
        Ok(())
    }

    fn try_lock(&self, path: &Path, _holder: &str) -> io::Result<Option<Box<dyn FsLock>>> {
        let mut state = lock(&self.state);
        if !state.locks.insert(path.to_path_buf()) {
            return Ok(None);
        }
        Ok(Some(Box::new(SimLock {
            fs: self.clone(),
            path: path.to_path_buf(),
        })))
    }
}

impl FsFile for SimFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.fs.stall_point();
        let inode = lock(&self.inode);
        let end = offset as usize + buf.len();
        if end > inode.data.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end",
            ));
        }
        buf.copy_from_slice(&inode.data[offset as usize..end]);
        Ok(())
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut bytes = buf;
        let mut full = false;
        {
            let mut state = lock(&self.fs.state);
            if let Some(Fault::DiskFull(limit)) = state.fault {
                let free = limit.saturating_sub(state.written);
                if (buf.len() as u64) > free {
                    bytes = &buf[..free as usize];
                    full = true;
                }
            }
            state.written += bytes.len() as u64;
        }
        let mut inode = lock(&self.inode);
        let op = DataOp::Write {
            offset,
            bytes: bytes.to_vec(),
        };
        apply(&mut inode.data, &op);
        inode.pending.push(op);
        if full {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "no space left on device (simulated)",
            ));
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.fs.sync()?;
        let mut inode = lock(&self.inode);
        let pending = std::mem::take(&mut inode.pending);
        for op in &pending {
            apply(&mut inode.durable, op);
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut inode = lock(&self.inode);
        let op = DataOp::SetLen(len);
        apply(&mut inode.data, &op);
        inode.pending.push(op);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(lock(&self.inode).data.len() as u64)
    }
}
