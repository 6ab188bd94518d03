//! `FileLog` and its whole public API: every `pub` method is here, thin where the work is
//! a concern of its own (opening in `open.rs`, compression in `cold/`, archives in
//! `archive/`, `gc` in `gc/`); the store traits it implements are in `access.rs`. Also what
//! its blocking work shares ([`Files`]) and how appends reach the writer ([`Writing`]).

use crate::archive::Written;
use crate::cold::Compactor;
use crate::file_system::{Fs, FsLock, RealFs};
use crate::open::Recovery;
use crate::run_index::Index;
use crate::write::pipeline::Lane;
use crate::write::writer::{AppendRequest, Shared, Writer};
use crate::write::WriteError;
use crate::{Collected, Compressed, LockHolder, Options};
use apollo11_core::{EventRef, RunId};
use apollo11_store::{RunSummary, StoreError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLockReadGuard};
use std::thread::JoinHandle;

/// The file backend: one data directory, one writer process.
pub struct FileLog {
    pub(crate) files: Arc<Files>,
    /// How appends reach the writer; `None` when read-only.
    pub(crate) writing: Option<Writing>,
    /// The writer thread, joined when dropped; `None` when read-only or deterministic.
    pub(crate) writer: Option<JoinHandle<()>>,
    /// What the open found and did.
    pub(crate) recovery: Recovery,
    /// Buffers for `scan_from` to read ahead into, kept between calls (fresh ones cost
    /// their page faults every time).
    pub(crate) scan_buffers: Mutex<Vec<Vec<u8>>>,
    /// Compresses sealed segments ([`Options::compress_after`]); stopped when dropped.
    pub(crate) _compactor: Option<Compactor>,
    /// The data directory's lock, held while open; `None` when read-only.
    pub(crate) _lock: Option<Box<dyn FsLock>>,
}

/// How appends reach the writer.
pub(crate) enum Writing {
    /// Queued for the writer thread, which groups them, or written by a lone appender itself.
    Thread(Arc<Lane>),
    /// Committed on the appender's task, one at a time ([`Options::deterministic`]).
    Inline(Box<Mutex<Inline>>),
}

/// The writer of the deterministic mode, with its buffer.
pub(crate) struct Inline {
    writer: Writer,
    buf: Vec<u8>,
}

impl Inline {
    /// The deterministic mode's writer, around `writer`.
    pub fn new(writer: Writer) -> Inline {
        Inline {
            writer,
            buf: Vec::new(),
        }
    }

    /// Commits `request` now, answering it (also on a failure, which poisons the store).
    pub fn commit(&mut self, request: AppendRequest) {
        // A failure is sent to the appender (and later ones see the poison).
        self.writer.commit(request, &mut self.buf);
    }
}

/// What work on the log's files needs, shared with the blocking threads doing it.
pub(crate) struct Files {
    pub fs: Arc<dyn Fs>,
    pub dir: PathBuf,
    pub options: Options,
    pub shared: Arc<Shared>,
    /// Held while a blob is checked for and written: two puts of one blob at once would
    /// share its temp file.
    pub blob_writes: Mutex<()>,
    /// Held while the controls file is read and rewritten.
    pub control_writes: Mutex<()>,
}

impl FileLog {
    /// Opens `dir` for writing on the real file system, creating it if needed.
    ///
    /// # Errors
    ///
    /// [`StoreError::Locked`] when another process holds the data directory;
    /// [`StoreError::Corrupted`] naming file, offset and reason when the log holds damage a crash
    /// cannot leave, or evidence that committed data is missing (nothing is changed: see
    /// [`repair`](crate::repair)); [`StoreError::Io`] when the directory cannot be created or read.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<FileLog, StoreError> {
        FileLog::open_with(Arc::new(RealFs), dir, options)
    }

    /// Opens `dir` for writing as [`FileLog::open`] does, for a process that serves the data
    /// dir at `listen`: the lock file records the address (see [`LockHolder`]), so that
    /// other processes refused the lock know where to send their requests.
    ///
    /// # Errors
    ///
    /// As [`FileLog::open`].
    pub fn open_serving(
        dir: impl AsRef<Path>,
        options: Options,
        listen: &str,
    ) -> Result<FileLog, StoreError> {
        let holder = LockHolder::this_process(Some(listen.to_owned()));
        crate::open::open_writing(Arc::new(RealFs), dir.as_ref(), options, &holder)
    }

    /// Opens `dir` read-only on the real file system, without the lock.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupted`] as [`FileLog::open`] finds it (a torn tail is not an error: reads
    /// stop before it); [`StoreError::Io`] when the directory cannot be read. Damage found
    /// while a `gc` manifest is there is looked at again for half a second (a swap's
    /// renames met half done), then reported as [`StoreError::GcInProgress`] if the manifest
    /// is still there.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<FileLog, StoreError> {
        FileLog::open_read_only_with(Arc::new(RealFs), dir)
    }

    /// Opens `dir` for writing on `fs`: takes the lock, recovers, starts the writer thread.
    ///
    /// # Errors
    ///
    /// As [`FileLog::open`], for the errors `fs` returns.
    pub fn open_with(
        fs: Arc<dyn Fs>,
        dir: impl AsRef<Path>,
        options: Options,
    ) -> Result<FileLog, StoreError> {
        let holder = LockHolder::this_process(None);
        crate::open::open_writing(fs, dir.as_ref(), options, &holder)
    }

    /// Opens `dir` read-only on `fs`: no lock, no repair; reads stop at the last committed
    /// batch, so a log being written by another process can be read safely.
    ///
    /// # Errors
    ///
    /// As [`FileLog::open_read_only`].
    pub fn open_read_only_with(
        fs: Arc<dyn Fs>,
        dir: impl AsRef<Path>,
    ) -> Result<FileLog, StoreError> {
        crate::open::open_read_only(fs, dir.as_ref())
    }

    /// What the open found and repaired.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// Hands every event in the log to one of `visitors`, each called on a thread of its
    /// own (in turn on this one in [`Options::deterministic`] mode), borrowed: all the events of a run go to the same visitor, in id order. For folding
    /// every run on every core (one visitor per core); appends wait until it returns.
    ///
    /// # Errors
    ///
    /// [`StoreError::Poisoned`] after a durability failure; [`StoreError::Io`] or
    /// [`StoreError::Corrupted`] when a segment cannot be read or fails its check.
    pub fn scan_runs<V>(&self, visitors: &mut [V]) -> Result<(), StoreError>
    where
        V: FnMut(&EventRef<'_>) + Send,
    {
        self.files.shared.check_poison()?;
        let index = self.files.index();
        if self.files.options.deterministic {
            index.scan_runs_in_turn(visitors)
        } else {
            index.scan_runs(visitors)
        }
    }

    /// The buffers kept for a scan to read ahead into (none at first).
    pub(crate) fn scan_buffers(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.scan_buffers.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Keeps a scan's buffers for the next one (two at most: a scan has at most one chunk
    /// decoding and one being read; concurrent scans make their own).
    pub(crate) fn keep_scan_buffers(&self, mut buffers: Vec<Vec<u8>>) {
        buffers.truncate(2);
        *self.scan_buffers.lock().unwrap_or_else(|p| p.into_inner()) = buffers;
    }

    /// Whether appends are accepted now: fails with `ReadOnly` on a read-only open and with
    /// `Poisoned` once a durability failure stopped the store (a server's readiness).
    ///
    /// # Errors
    ///
    /// [`StoreError::ReadOnly`] or [`StoreError::Poisoned`], as said above.
    pub fn check_writable(&self) -> Result<(), StoreError> {
        self.writable().map(|_| ())
    }

    /// Every run of the archive files, with its last seq and event id, by run id (runs the
    /// live log also holds included: see `archive`).
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupted`] naming an archive file and offset; [`StoreError::Io`];
    /// [`StoreError::Poisoned`].
    pub async fn archived_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.files.shared.check_poison()?;
        self.blocking(|files| crate::archive::runs(files.fs.as_ref(), &files.dir))
            .await
    }

    /// Whether the live log holds `run_id` (a run `gc` moved out of it does not): a lookup in
    /// the index, no read.
    pub fn holds_live(&self, run_id: &RunId) -> bool {
        self.files.live(run_id, |_| ()).is_some()
    }

    /// Compresses now, on the calling thread, every sealed segment older than the newest
    /// `keep` sealed ones that is not compressed yet (what [`crate::Options::compress_after`]
    /// does in the background); reads go on meanwhile and appends are not held up. Returns
    /// what it compressed.
    ///
    /// # Errors
    ///
    /// [`StoreError::ReadOnly`] on a read-only open, [`StoreError::Poisoned`] once the store
    /// stopped; [`StoreError::Corrupted`] naming a segment that does not scan cleanly (it is
    /// left plain) and [`StoreError::Io`] when a file cannot be read, written, synced or
    /// renamed (the segment is then whole, plain or compressed).
    pub fn compress_cold(&self, keep: usize) -> Result<Vec<Compressed>, StoreError> {
        self.writable()?;
        let files = &self.files;
        let never = &|| false;
        crate::cold::compress_sealed(files.fs.as_ref(), &files.dir, &files.shared, keep, never)
    }

    /// Writes the runs `runs` (each once, in run id order, with all their events) to a new
    /// archive file after the newest, whole or not at all, and returns what it wrote. The
    /// runs stay in the live log: moving them out of it is [`FileLog::collect`]'s swap. Each
    /// run is read under the index's lock alone, so appends go on meanwhile, and the file
    /// holds each run as it was when read (`gc` archives finished runs only).
    ///
    /// # Errors
    ///
    /// [`StoreError::ReadOnly`] on a read-only open, [`StoreError::Poisoned`];
    /// [`StoreError::NotFound`] for a run the log does not hold; [`StoreError::Io`] when the
    /// file cannot be written (nothing is renamed then: the archive is as it was).
    pub fn write_archive(&self, runs: &[RunId]) -> Result<Written, StoreError> {
        self.writable()?;
        crate::archive::write_archive(&self.files, runs)
    }

    /// Moves the runs `runs` out of the live segments into a new archive file: after it, the
    /// live log no longer holds them, reads of them (`read_run`, `read_event`) answer from
    /// the archive byte for byte as before, and they take no more events. Appenders go on
    /// meanwhile; only the swap at the end holds back acknowledgements, for
    /// [`Collected::pause`]. A crash at any point leaves the old state or the new one, never
    /// a mix: the next writing open finishes or forgets the swap.
    ///
    /// The store cannot tell a finished run from one still running: the caller chooses
    /// finished runs (`apollo11 gc` takes those its retention policy lets go, never a running
    /// or paused one). Appends to the runs are refused from the start of the call, so a run
    /// that was not finished gets an error on its next append rather than losing events.
    /// Runs with an event in the live (unsealed) segment are left (in [`Collected::left`]):
    /// only sealed segments are rewritten.
    ///
    /// # Errors
    ///
    /// [`StoreError::ReadOnly`], [`StoreError::Poisoned`]; [`StoreError::NotFound`] for a run
    /// the live log does not hold (nothing is changed then); [`StoreError::Corrupted`] when a
    /// segment to rewrite does not scan cleanly (the old state is kept: the runs stay live,
    /// the archive file written is removed);
    /// [`StoreError::Io`] naming the file. A failure from the manifest's write on poisons the
    /// store: the next writing open finishes the swap (or forgets it, when the manifest never
    /// reached the disk).
    pub fn collect(&self, runs: &[RunId]) -> Result<Collected, StoreError> {
        self.writable()?;
        self.files.collect(runs)
    }

    /// The failure that poisoned the store, its first, as the writer met it (a full disk,
    /// another IO error with its source, a panic, a `gc` stopped half way); `None` while the
    /// store is not poisoned. [`StoreError::Poisoned`] carries its message.
    pub fn poison_cause(&self) -> Option<Arc<WriteError>> {
        self.files.shared.poison.get().cloned()
    }

    pub(crate) fn writable(&self) -> Result<&Writing, StoreError> {
        self.files.shared.check_poison()?;
        self.writing.as_ref().ok_or(StoreError::ReadOnly)
    }
}

impl Files {
    /// The index, for reading.
    pub fn index(&self) -> RwLockReadGuard<'_, Index> {
        self.shared.index.read().unwrap_or_else(|p| p.into_inner())
    }

    /// A failed write or sync of a snapshot or blob stops the store like one of the log's
    /// own: after an fsync error nothing about the file's state can be trusted.
    pub fn poison_on_io<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        match result {
            Err(StoreError::Io { context, source }) => {
                Err(self.shared.stop(WriteError::of(context, source)))
            }
            other => other,
        }
    }
}

impl Drop for FileLog {
    fn drop(&mut self) {
        // Closing the queue lets the writer finish what is queued and exit.
        match self.writing.take() {
            Some(Writing::Inline(inline)) => {
                let mut inline = (*inline).into_inner().unwrap_or_else(|p| p.into_inner());
                inline.writer.index_on_close();
            }
            Some(Writing::Thread(lane)) => lane
                .queue()
                .close(StoreError::unavailable("the log is closed")),
            None => {}
        }
        if let Some(handle) = self.writer.take() {
            let _ = handle.join();
        }
    }
}
