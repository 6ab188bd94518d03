//! `FileLog`: opening a data directory (with recovery: torn tails cut, damage refused),
//! the writer's life (its thread, or inline in deterministic mode), and what the store traits (`access.rs`) work on.

use crate::archive::Generations;
use crate::cold::Compactor;
use crate::files::{keep_torn, sync_dir_of};
use crate::fs::{Fs, FsLock, Mode, RealFs};
use crate::index::Index;
use crate::queue::Queue;
use crate::recover::{load, Inspected, Verdict};
use crate::segment::{file_name, HEADER_BYTES};
use crate::writer::{create_segment, preallocation, AppendRequest, Shared, Tail, Writer};
use crate::{snapshot, LockHolder, Options};
use apollo11_core::EventRef;
use apollo11_store::StoreError;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLockReadGuard};
use std::thread::JoinHandle;

/// What a writing open found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Segments opened.
    pub segments: usize,
    /// Committed events found: the log's last event id (more than their count once `gc`
    /// moved runs out, whose ids compacted segments skip).
    pub events: u64,
    /// A torn tail cut from the last segment: `(file, offset, bytes, kept in, reason)`.
    pub torn: Option<TornTail>,
}

/// A torn tail removed at open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// The segment it was cut from.
    pub file: String,
    /// Where the committed data ends.
    pub offset: u64,
    /// Bytes removed.
    pub bytes: u64,
    /// Where those bytes were kept.
    pub kept_in: String,
    /// What was found at the cut.
    pub reason: String,
}

/// The file backend: one data directory, one writer process.
pub struct FileLog {
    pub(crate) files: Arc<Files>,
    /// How appends reach the writer; `None` when read-only.
    pub(crate) writing: Option<Writing>,
    writer: Option<JoinHandle<()>>,
    recovery: Recovery,
    /// Buffers for `scan_from` to read ahead into, kept between calls (fresh ones cost
    /// their page faults every time).
    scan_buffers: Mutex<Vec<Vec<u8>>>,
    /// Compresses sealed segments ([`Options::compress_after`]); stopped when dropped.
    _compactor: Option<Compactor>,
    _lock: Option<Box<dyn FsLock>>,
}

/// How appends reach the writer.
pub(crate) enum Writing {
    /// Queued for the writer thread, which groups them.
    Thread(Arc<Queue>),
    /// Committed on the appender's task, one at a time ([`Options::deterministic`]).
    Inline(Box<Mutex<Inline>>),
}

/// The writer of the deterministic mode, with its buffer.
pub(crate) struct Inline {
    writer: Writer,
    buf: Vec<u8>,
}

impl Inline {
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
        FileLog::open_as(Arc::new(RealFs), dir.as_ref(), options, &holder)
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
        FileLog::open_as(fs, dir.as_ref(), options, &holder)
    }

    fn open_as(
        fs: Arc<dyn Fs>,
        dir: &Path,
        options: Options,
        holder: &LockHolder,
    ) -> Result<FileLog, StoreError> {
        options.validate()?;
        let started = std::time::Instant::now();
        let dir = dir.to_path_buf();
        let mkdir = |path: &Path| {
            fs.create_dir_all(path)
                .map_err(|e| StoreError::io(format!("creating {}", path.display()), e))
        };
        mkdir(&dir)?;
        // The lock comes first: a refused second writer must not create or change anything.
        let lock = take_lock(fs.as_ref(), &dir, holder)?;
        for sub in ["segments", "snapshots", "blobs"] {
            mkdir(&dir.join(sub))?;
        }
        // A `gc` swap a crash interrupted is finished (or forgotten) first: the segments are
        // read as they are once it is done.
        crate::gc::finish_at_open(fs.as_ref(), &dir)?;
        let (index, tail, recovery, archived) =
            recover(fs.as_ref(), &dir, &options, lock.as_ref())?;
        snapshot::remove_past(fs.as_ref(), &dir.join("snapshots"), index.last_event_id)?;
        let shared = Arc::new(Shared::new(index));
        let compactor = match options.compress_after {
            Some(keep) if !options.deterministic => Some(Compactor::start(
                fs.clone(),
                dir.clone(),
                shared.clone(),
                keep,
            )?),
            _ => None,
        };
        *shared.archived.write().unwrap_or_else(|p| p.into_inner()) = Some(archived);
        let writer = Writer::new(
            fs.clone(),
            dir.join("segments"),
            options.clone(),
            shared.clone(),
            tail,
            compactor.as_ref().map(Compactor::signal),
        );
        let (writing, handle) = if options.deterministic {
            let inline = Inline {
                writer,
                buf: Vec::new(),
            };
            (Writing::Inline(Box::new(Mutex::new(inline))), None)
        } else {
            let queue = Arc::new(Queue::new());
            let taking = queue.clone();
            let handle = std::thread::Builder::new()
                .name("apollo11-log-writer".into())
                .spawn(move || crate::pipeline::run(writer, taking))
                .map_err(|e| StoreError::io("starting the log writer thread", e))?;
            (Writing::Thread(queue), Some(handle))
        };
        crate::metrics::opened(started.elapsed().as_secs_f64());
        Ok(FileLog {
            files: Arc::new(Files {
                fs,
                dir,
                options,
                shared,
                blob_writes: Mutex::default(),
            }),
            writing: Some(writing),
            writer: handle,
            recovery,
            scan_buffers: Mutex::default(),
            _compactor: compactor,
            _lock: Some(lock),
        })
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
        let dir = dir.as_ref().to_path_buf();
        let damaged = |r: &Result<_, _>| matches!(r, Err(StoreError::Corrupted { .. }));
        let look = || load(fs.as_ref(), &dir, Mode::Read);
        let loaded = crate::gc::look_beside_swaps(fs.as_ref(), &dir, damaged, look)?;
        let index = loaded.index;
        let recovery = Recovery {
            segments: loaded.segments,
            events: index.last_event_id,
            torn: None,
        };
        let shared = Arc::new(Shared::new(index));
        Ok(FileLog {
            files: Arc::new(Files {
                fs,
                dir,
                options: Options::default(),
                shared,
                blob_writes: Mutex::default(),
            }),
            writing: None,
            writer: None,
            recovery,
            scan_buffers: Mutex::default(),
            _compactor: None,
            _lock: None,
        })
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
                Err(self.shared.stop(format!("{context}: {source}")))
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
                let inline = (*inline).into_inner().unwrap_or_else(|p| p.into_inner());
                inline.writer.index_on_close();
            }
            Some(Writing::Thread(queue)) => queue.close(StoreError::Unavailable {
                message: "the log is closed".into(),
                sqlstate: None,
            }),
            None => {}
        }
        if let Some(handle) = self.writer.take() {
            let _ = handle.join();
        }
    }
}

/// Takes the data directory's lock, changing nothing: the caller claims it
/// ([`FsLock::claim`]) once it is sure to write.
pub(crate) fn take_lock(
    fs: &dyn Fs,
    dir: &Path,
    holder: &LockHolder,
) -> Result<Box<dyn FsLock>, StoreError> {
    let path = dir.join("LOCK");
    let mut tries = 0;
    loop {
        match fs.try_lock(&path, &holder.to_text()) {
            Ok(None) if tries < SAME_PROCESS_TRIES && held_by_this_process(fs, &path) => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            taken => return locked(fs, &path, taken),
        }
    }
}

/// How many times an open tries again, 10 ms apart, when the `LOCK` file names this very
/// process: a child forked by another thread shares the lock's open file until it execs, so a
/// lock this process has just released can look held for a moment. A lock another open of
/// this process really holds is still refused, 200 ms later.
const SAME_PROCESS_TRIES: u32 = 20;

/// Whether the `LOCK` file at `path` names this process as its holder.
fn held_by_this_process(fs: &dyn Fs, path: &Path) -> bool {
    let text = fs.open(path, Mode::Read).and_then(|f| f.read_all());
    text.is_ok_and(|t| {
        LockHolder::parse(&String::from_utf8_lossy(&t)).pid == Some(std::process::id())
    })
}

/// The lock taken, or the error naming its holder.
fn locked(
    fs: &dyn Fs,
    path: &Path,
    taken: std::io::Result<Option<Box<dyn FsLock>>>,
) -> Result<Box<dyn FsLock>, StoreError> {
    match taken {
        Ok(Some(lock)) => Ok(lock),
        Ok(None) => {
            let holder = fs.open(path, Mode::Read).and_then(|f| f.read_all()).ok();
            // One line (`pid N; listen ADDR`): it goes into an error message.
            let holder = holder
                .map(|b| {
                    let text = String::from_utf8_lossy(&b);
                    let lines: Vec<&str> = text.lines().map(str::trim).collect();
                    lines
                        .into_iter()
                        .filter(|l| !l.is_empty())
                        .collect::<Vec<_>>()
                        .join("; ")
                })
                .filter(|h| !h.is_empty());
            Err(StoreError::Locked {
                path: path.display().to_string(),
                holder,
            })
        }
        Err(e) => Err(StoreError::io(format!("locking {}", path.display()), e)),
    }
}

/// Loads every segment and checks it all (refusing, with nothing changed, on damage or on
/// evidence of missing committed data); only then claims the lock file, cuts a torn tail off
/// the last segment, makes what was found durable, indexes the sealed segments scanned, and
/// decides where to write next.
fn recover(
    fs: &dyn Fs,
    dir: &Path,
    options: &Options,
    lock: &dyn FsLock,
) -> Result<(Index, Tail, Recovery, Generations), StoreError> {
    let loaded = load(fs, dir, Mode::Write)?;
    // Before anything changes: no archived id may be given again. Then the copies a `gc`
    // stopped before its swap left (its runs all still live) go.
    let archives = crate::archive::files(fs, dir)?;
    let archived = crate::archive::against(fs, &archives, &loaded.index)?;
    if let Some(damage) = archived.damage(loaded.index.last_event_id) {
        return Err(damage.into_error());
    }
    crate::archive::remove_leftovers(fs, &archived.leftovers)?;
    let lock_path = dir.join("LOCK");
    lock.claim()
        .map_err(|e| StoreError::io(format!("writing {}", lock_path.display()), e))?;
    let mut index = loaded.index;
    let mut recovery = Recovery {
        segments: loaded.segments,
        events: index.last_event_id,
        torn: None,
    };
    let mut tail = None;
    if let Some(last) = &loaded.last {
        let path = dir.join(&last.name);
        // The last segment is about to grow: its index file (from a clean close) must be
        // gone for good before anything is appended, or a crash could leave it looking
        // valid over data it does not describe.
        if crate::idx::remove(fs, &path)? {
            sync_dir_of(fs, &path)?;
        }
        if let Verdict::Torn {
            offset,
            bytes,
            reason,
        } = &last.verdict
        {
            recovery.torn = Some(cut_torn_tail(fs, dir, last, *offset, *bytes, reason)?);
        }
        // A compressed or compacted last segment (the ones after it cut by `repair`) is
        // sealed: appends go to a new segment after it.
        if let Some(scanned) =
            (last.scanned.as_ref()).filter(|s| last.stored_bytes.is_none() && s.covers_to.is_none())
        {
            // What this open found must be durable before anything vouches for it: a
            // snapshot saved in fsync durability, or an index file saying a later segment
            // exists. After a process crash in buffered mode it may be in the page cache only.
            let io = |e| StoreError::io(format!("syncing {}", path.display()), e);
            last.file.sync_data().map_err(io)?;
            tail = Some(Tail {
                name: last.name.clone(),
                file: last.file.clone(),
                write_at: scanned.end,
                allocated: last
                    .file
                    .size()
                    .map_err(|e| StoreError::io(format!("sizing {}", last.name), e))?,
            });
        }
    }
    let tail = match tail {
        Some(tail) => tail,
        None => new_tail(fs, dir, &mut index, options)?,
    };
    let segments = dir.join("segments");
    fs.sync_dir(&segments)
        .map_err(|e| StoreError::io(format!("syncing {}", segments.display()), e))?;
    // Every segment listed before the tail now has a durable successor.
    for (position, path, end) in &loaded.unindexed {
        let sealed = index.scanned(*position, *end);
        let file = index.segments[*position].file.clone();
        crate::idx::save(fs, path, file.as_ref(), &sealed, crate::idx::Kind::Sealed);
    }
    Ok((index, tail, recovery, archived.generations))
}

/// Creates the first segment, or one replacing a last segment cut whole.
fn new_tail(
    fs: &dyn Fs,
    dir: &Path,
    index: &mut Index,
    options: &Options,
) -> Result<Tail, StoreError> {
    let base = index.last_event_id + 1;
    let name = format!("segments/{}", file_name(base));
    let path = dir.join(&name);
    let file = create_segment(fs, &path, base, options)
        .map_err(|e| StoreError::io(format!("creating {}", path.display()), e))?;
    index.segments.push(crate::index::SegmentIndex::new(
        base,
        name.clone(),
        file.clone(),
    ));
    Ok(Tail {
        name,
        file,
        write_at: HEADER_BYTES as u64,
        allocated: preallocation(HEADER_BYTES as u64, options),
    })
}

/// Moves a torn tail's bytes to a `.torn` file and zeroes them in the segment. A segment
/// whose header itself is torn is moved aside whole.
fn cut_torn_tail(
    fs: &dyn Fs,
    dir: &Path,
    inspected: &Inspected,
    offset: u64,
    bytes: u64,
    reason: &str,
) -> Result<TornTail, StoreError> {
    let path = dir.join(&inspected.name);
    let io = |what: &str, e| StoreError::io(format!("{what} {}", path.display()), e);
    let mut cut = vec![0u8; bytes as usize];
    inspected
        .file
        .read_exact_at(&mut cut, offset)
        .map_err(|e| io("reading the torn tail of", e))?;
    let kept_in = keep_torn(fs, &path, offset, &cut)?;
    if inspected.scanned.is_none() {
        fs.remove(&path).map_err(|e| io("removing", e))?;
        sync_dir_of(fs, &path)?;
    } else {
        inspected
            .file
            .set_len(offset)
            .map_err(|e| io("truncating", e))?;
        inspected.file.sync_data().map_err(|e| io("syncing", e))?;
    }
    Ok(TornTail {
        file: inspected.name.clone(),
        offset,
        bytes,
        kept_in,
        reason: reason.to_owned(),
    })
}
