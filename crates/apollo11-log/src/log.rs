//! `FileLog`: opening a data directory (with recovery), and the store traits on top of the
//! index, the writer thread, snapshot files and blob files.

use crate::files::{keep_torn, sync_dir_of, write_atomically};
use crate::fs::{Fs, FsLock, Mode, RealFs};
use crate::index::Index;
use crate::recover::{load, Inspected, Verdict};
use crate::segment::{file_name, HEADER_BYTES};
use crate::writer::{create_segment, preallocation, AppendRequest, Shared, Tail, Writer};
use crate::{snapshot, Options};
use apollo11_core::{limits, BlobRef, Event, EventId, EventRef, RunId, Seq};
use apollo11_store::{
    sha256_hex, validate, BlobStore, EventStore, NewEvent, RunSummary, Snapshot, SnapshotStore,
    StoreError, Subscription, Visitor,
};
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLockReadGuard};
use std::thread::JoinHandle;
use tokio::sync::{mpsc, oneshot};

/// What a writing open found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Segments opened.
    pub segments: usize,
    /// Committed events found.
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
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    options: Options,
    shared: Arc<Shared>,
    sender: Option<mpsc::Sender<AppendRequest>>,
    writer: Option<JoinHandle<()>>,
    recovery: Recovery,
    _lock: Option<Box<dyn FsLock>>,
}

impl FileLog {
    /// Opens `dir` for writing on the real file system, creating it if needed.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<FileLog, StoreError> {
        FileLog::open_with(Arc::new(RealFs), dir, options)
    }

    /// Opens `dir` read-only on the real file system, without the lock.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<FileLog, StoreError> {
        FileLog::open_read_only_with(Arc::new(RealFs), dir)
    }

    /// Opens `dir` for writing on `fs`: takes the lock, recovers, starts the writer thread.
    pub fn open_with(
        fs: Arc<dyn Fs>,
        dir: impl AsRef<Path>,
        options: Options,
    ) -> Result<FileLog, StoreError> {
        options.validate()?;
        let dir = dir.as_ref().to_path_buf();
        let mkdir = |path: &Path| {
            fs.create_dir_all(path)
                .map_err(|e| StoreError::io(format!("creating {}", path.display()), e))
        };
        mkdir(&dir)?;
        // The lock comes first: a refused second writer must not create or change anything.
        let lock = take_lock(fs.as_ref(), &dir)?;
        for sub in ["segments", "snapshots", "blobs"] {
            mkdir(&dir.join(sub))?;
        }
        let (index, tail, recovery) = recover(fs.as_ref(), &dir, &options, lock.as_ref())?;
        snapshot::remove_past(fs.as_ref(), &dir.join("snapshots"), index.last_event_id)?;
        let shared = Arc::new(Shared::new(index));
        let (sender, receiver) = mpsc::channel(limits::QUEUE_DEPTH_MAX as usize);
        let writer = Writer {
            fs: fs.clone(),
            segments_dir: dir.join("segments"),
            options: options.clone(),
            shared: shared.clone(),
            tail,
            group_at: 0,
        };
        let handle = std::thread::Builder::new()
            .name("apollo11-log-writer".into())
            .spawn(move || writer.run(receiver))
            .map_err(|e| StoreError::io("starting the log writer thread", e))?;
        Ok(FileLog {
            fs,
            dir,
            options,
            shared,
            sender: Some(sender),
            writer: Some(handle),
            recovery,
            _lock: Some(lock),
        })
    }

    /// Opens `dir` read-only on `fs`: no lock, no repair; reads stop at the last committed
    /// batch, so a log being written by another process can be read safely.
    pub fn open_read_only_with(
        fs: Arc<dyn Fs>,
        dir: impl AsRef<Path>,
    ) -> Result<FileLog, StoreError> {
        let dir = dir.as_ref().to_path_buf();
        let loaded = load(fs.as_ref(), &dir, Mode::Read)?;
        let index = loaded.index;
        let recovery = Recovery {
            segments: loaded.segments,
            events: index.last_event_id,
            torn: None,
        };
        let shared = Arc::new(Shared::new(index));
        Ok(FileLog {
            fs,
            dir,
            options: Options::default(),
            shared,
            sender: None,
            writer: None,
            recovery,
            _lock: None,
        })
    }

    /// What the open found and repaired.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// Hands every event in the log to one of `visitors`, each called on a thread of its
    /// own, borrowed: all the events of a run go to the same visitor, in id order. For folding
    /// every run on every core (one visitor per core); appends wait until it returns.
    pub fn scan_runs<V>(&self, visitors: &mut [V]) -> Result<(), StoreError>
    where
        V: FnMut(&EventRef<'_>) + Send,
    {
        self.shared.check_poison()?;
        self.index().scan_runs(visitors)
    }

    fn index(&self) -> RwLockReadGuard<'_, Index> {
        self.shared.index.read().unwrap_or_else(|p| p.into_inner())
    }

    fn writable(&self) -> Result<&mpsc::Sender<AppendRequest>, StoreError> {
        self.shared.check_poison()?;
        self.sender.as_ref().ok_or(StoreError::ReadOnly)
    }

    /// A failed write or sync of a snapshot or blob stops the store like one of the log's
    /// own: after an fsync error nothing about the file's state can be trusted.
    fn poison_on_io<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
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
        // Closing the channel lets the writer finish what is queued and exit.
        self.sender.take();
        if let Some(handle) = self.writer.take() {
            let _ = handle.join();
        }
    }
}

/// Takes the data directory's lock, changing nothing: the caller claims it
/// ([`FsLock::claim`]) once it is sure to write.
pub(crate) fn take_lock(fs: &dyn Fs, dir: &Path) -> Result<Box<dyn FsLock>, StoreError> {
    let path = dir.join("LOCK");
    let holder = format!("pid {}", std::process::id());
    match fs.try_lock(&path, &holder) {
        Ok(Some(lock)) => Ok(lock),
        Ok(None) => {
            let holder = fs.open(&path, Mode::Read).and_then(|f| f.read_all()).ok();
            let holder = holder
                .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
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
) -> Result<(Index, Tail, Recovery), StoreError> {
    let loaded = load(fs, dir, Mode::Write)?;
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
        if crate::idx::remove(fs, &path) {
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
        if let Some(scanned) = &last.scanned {
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
    Ok((index, tail, recovery))
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

#[async_trait]
impl EventStore for FileLog {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        validate(run_id, &events)?;
        let sender = self.writable()?;
        let (reply, answer) = oneshot::channel();
        let request = AppendRequest {
            run_id: run_id.clone(),
            expected_seq,
            events,
            reply,
        };
        let stopped = || StoreError::Poisoned {
            cause: self
                .shared
                .poison
                .get()
                .cloned()
                .unwrap_or_else(|| "the writer stopped".into()),
        };
        sender.send(request).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    async fn read_run(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError> {
        self.shared.check_poison()?;
        self.index().read_run(run_id, from_seq)
    }

    async fn read_event(&self, run_id: &RunId, seq: Seq) -> Result<Option<Event>, StoreError> {
        self.shared.check_poison()?;
        self.index().read_event(run_id, seq)
    }

    async fn read_from(&self, from: EventId, max_events: u32) -> Result<Vec<Event>, StoreError> {
        self.shared.check_poison()?;
        self.index().read_from(from, max_events)
    }

    async fn scan_from(
        &self,
        from: EventId,
        max: u32,
        visit: &mut Visitor<'_>,
    ) -> Result<Option<EventId>, StoreError> {
        self.shared.check_poison()?;
        self.index().scan_from(from, max, visit)
    }

    /// Pushed by the writer after each batch's sync. A read-only log is a fixed view of
    /// the log as it was opened: its subscriptions deliver what it holds, then wait.
    async fn subscribe<'s>(&'s self, after: EventId) -> Result<Subscription<'s>, StoreError> {
        self.shared.check_poison()?;
        let index = self.index();
        let live = self.shared.feed.subscribe();
        let visible = EventId(index.last_event_id);
        drop(index);
        // A poisoning told to subscribers before this one existed is seen here instead.
        self.shared.check_poison()?;
        Ok(Subscription::pushed(self, after, visible, live))
    }

    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.shared.check_poison()?;
        Ok(self.index().list_runs())
    }

    async fn last_event_id(&self) -> Result<EventId, StoreError> {
        self.shared.check_poison()?;
        Ok(EventId(self.index().last_event_id))
    }
}

#[async_trait]
impl SnapshotStore for FileLog {
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.writable()?;
        let last = self.index().last_event_id;
        if snapshot.watermark.0 > last {
            return Err(snapshot::beyond_log(snapshot.watermark.0, last));
        }
        let record_crc = match snapshot.watermark.0 {
            0 => 0,
            w => self.index().record_crc(w)?,
        };
        let result = self.write_snapshot(&snapshot, record_crc);
        self.poison_on_io(result)
    }

    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        self.shared.check_poison()?;
        let last = self.index().last_event_id;
        for name in self.snapshot_names()?.iter().rev() {
            let path = self.dir.join("snapshots").join(name);
            let Ok(bytes) = self.fs.open(&path, Mode::Read).and_then(|f| f.read_all()) else {
                continue;
            };
            // A damaged snapshot, one past the log's end, or one from another log is
            // skipped for an older one.
            let Ok(file) = snapshot::decode(&bytes) else {
                continue;
            };
            let watermark = file.snapshot.watermark.0;
            if watermark > last {
                continue;
            }
            let record_crc = match watermark {
                0 => 0,
                w => self.index().record_crc(w)?,
            };
            if snapshot::foreign(&file, record_crc).is_none() {
                return Ok(Some(file.snapshot));
            }
        }
        Ok(None)
    }
}

impl FileLog {
    fn write_snapshot(&self, snapshot: &Snapshot, record_crc: u32) -> Result<(), StoreError> {
        let dir = self.dir.join("snapshots");
        let path = dir.join(snapshot::file_name(snapshot.watermark.0));
        let bytes = snapshot::encode(snapshot, self.options.durability, record_crc);
        write_atomically(self.fs.as_ref(), &path, &bytes)?;
        let names = self.snapshot_names()?;
        for old in names.iter().rev().skip(self.options.snapshots_kept) {
            let path = dir.join(old);
            self.fs
                .remove(&path)
                .map_err(|e| StoreError::io(format!("removing {}", path.display()), e))?;
        }
        self.fs
            .sync_dir(&dir)
            .map_err(|e| StoreError::io(format!("syncing {}", dir.display()), e))
    }

    fn snapshot_names(&self) -> Result<Vec<String>, StoreError> {
        let dir = self.dir.join("snapshots");
        let names = self
            .fs
            .list(&dir)
            .map_err(|e| StoreError::io(format!("listing {}", dir.display()), e))?;
        Ok(names
            .into_iter()
            .filter(|n| snapshot::is_snapshot(n))
            .collect())
    }
}

#[async_trait]
impl BlobStore for FileLog {
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
        self.writable()?;
        let blob = BlobRef {
            sha256: sha256_hex(&bytes),
            bytes: bytes.len() as u64,
        };
        let path = self.dir.join("blobs").join(&blob.sha256);
        if self.get_blob(&blob).await.is_err() {
            let written = write_atomically(self.fs.as_ref(), &path, &bytes);
            self.poison_on_io(written)?;
        }
        Ok(blob)
    }

    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
        self.shared.check_poison()?;
        let valid_name =
            blob.sha256.len() == 64 && blob.sha256.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid_name {
            return Err(StoreError::Invalid {
                what: "blob reference".into(),
                reason: format!("`{}` is not a SHA-256", blob.sha256),
            });
        }
        let path = self.dir.join("blobs").join(&blob.sha256);
        let bytes = match self.fs.open(&path, Mode::Read).and_then(|f| f.read_all()) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound {
                    what: format!("blob {}", blob.sha256),
                })
            }
            Err(e) => return Err(StoreError::io(format!("reading {}", path.display()), e)),
        };
        apollo11_store::check_blob(blob, &bytes, &format!("blobs/{}", blob.sha256))?;
        Ok(bytes)
    }
}
