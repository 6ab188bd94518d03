//! Opening a data directory: the lock, recovery (torn tails cut, damage refused, what was
//! found made durable before anything vouches for it) and the writer's start (its thread,
//! or inline in deterministic mode).

use crate::archive::Generations;
use crate::cold::Compactor;
use crate::durable_files::{keep_torn, sync_dir_of};
use crate::file_log::{FileLog, Files, Inline, Writing};
use crate::file_system::{Fs, FsLock, Mode};
use crate::format::segment::{file_name, HEADER_BYTES};
use crate::load::{load, Inspected, Verdict};
use crate::run_index::Index;
use crate::write::pipeline::Lane;
use crate::write::queue::Queue;
use crate::write::writer::{create_segment, preallocation, Shared, Tail, Writer};
use crate::{snapshot, LockHolder, Options};
use apollo11_store::StoreError;
use std::path::Path;
use std::sync::{Arc, Mutex};

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

/// Opens `dir` for writing on `fs`, its lock held by `holder`: takes the lock, recovers,
/// starts the writer.
pub(crate) fn open_writing(
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
    let (index, tail, recovery, archived) = recover(fs.as_ref(), &dir, &options, lock.as_ref())?;
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
        let inline = Inline::new(writer);
        (Writing::Inline(Box::new(Mutex::new(inline))), None)
    } else {
        let lane = Lane::new(writer, Arc::new(Queue::new()))
            .map_err(|e| StoreError::io("starting the log's sync thread", e))?;
        let lane = Arc::new(lane);
        let taking = lane.clone();
        let handle = std::thread::Builder::new()
            .name("apollo11-log-writer".into())
            .spawn(move || crate::write::pipeline::run(taking))
            .map_err(|e| StoreError::io("starting the log writer thread", e))?;
        lane.queue().attach(handle.thread().clone());
        (Writing::Thread(lane), Some(handle))
    };
    crate::metrics::opened(started.elapsed().as_secs_f64());
    Ok(FileLog {
        files: Arc::new(Files {
            fs,
            dir,
            options,
            shared,
            blob_writes: Mutex::default(),
            control_writes: Mutex::default(),
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
pub(crate) fn open_read_only(fs: Arc<dyn Fs>, dir: &Path) -> Result<FileLog, StoreError> {
    let dir = dir.to_path_buf();
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
            control_writes: Mutex::default(),
        }),
        writing: None,
        writer: None,
        recovery,
        scan_buffers: Mutex::default(),
        _compactor: None,
        _lock: None,
    })
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
        if crate::format::index_file::remove(fs, &path)? {
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
        crate::format::index_file::save(
            fs,
            path,
            file.as_ref(),
            &sealed,
            crate::format::index_file::Kind::Sealed,
        );
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
    index.segments.push(crate::run_index::SegmentIndex::new(
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
