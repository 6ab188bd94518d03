//! The single writer, on a thread of its own (or, in deterministic mode, called on each
//! appender's task, one append a group): group commit. It takes every append queued, checks each one's
//! expected seq, encodes them into one buffer closed by a commit record, writes it, syncs
//! once, and only then publishes the events to readers (the index, and the change feed's
//! subscribers) and acknowledges the appenders. A write or sync error poisons the store:
//! nothing more is written or acknowledged. The writer never waits for a subscriber.

use crate::codec::encode_event;
use crate::fs::{Fs, FsFile, Mode};
use crate::idx;
use crate::index::{Index, SegmentIndex};
use crate::metrics;
use crate::record::{append_commit, append_record, KIND_EVENT};
use crate::segment::{file_name, header, HEADER_BYTES};
use crate::{Durability, Options};
use apollo11_core::{limits, Event, EventId, RunId, Seq};
use apollo11_store::feed::Published;
use apollo11_store::{NewEvent, StoreError};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, RwLock};
use tokio::sync::{broadcast, mpsc, oneshot};

/// What readers and appenders share with the writer.
pub struct Shared {
    /// The index of durable events.
    pub index: RwLock<Index>,
    /// Set once, by the writer, when a write or sync failed.
    pub poison: OnceLock<String>,
    /// The change feed: durable events, sent while the index's write lock is held, so a
    /// subscription registered under its read lock knows which events it will be sent.
    pub feed: broadcast::Sender<Published>,
    /// Hashes of the archived runs' ids ([`crate::archive::id_hash`]): an append to a run the
    /// live log lacks whose id hashes to one of them is checked against the archive files.
    pub archived: RwLock<HashSet<u64>>,
}

impl Shared {
    /// Shared state around `index`, not poisoned, with no subscriber.
    pub fn new(index: Index) -> Shared {
        Shared {
            index: RwLock::new(index),
            poison: OnceLock::new(),
            feed: broadcast::channel(limits::CHANGE_FEED_EVENTS_MAX as usize).0,
            archived: RwLock::default(),
        }
    }

    /// Records why the store stopped (the first cause only) and tells subscribers. Returns
    /// the error every later call gets.
    pub fn stop(&self, cause: String) -> StoreError {
        let _ = self.poison.set(cause);
        metrics::poisoned();
        let error = StoreError::Poisoned {
            cause: self.poison.get().cloned().unwrap_or_default(),
        };
        // No subscriber is no error: there is nobody to tell.
        let _ = self.feed.send(Err(error.clone()));
        error
    }

    /// Fails if the store is poisoned.
    pub fn check_poison(&self) -> Result<(), StoreError> {
        match self.poison.get() {
            Some(cause) => Err(StoreError::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// One append waiting for the writer.
pub struct AppendRequest {
    pub run_id: RunId,
    pub expected_seq: Seq,
    pub events: Vec<NewEvent>,
    pub reply: oneshot::Sender<Result<Vec<EventId>, StoreError>>,
}

/// An accepted append inside the group being committed.
struct Accepted {
    run_id: RunId,
    reply: oneshot::Sender<Result<Vec<EventId>, StoreError>>,
    /// Event ids with their record offsets relative to the group's buffer.
    events: Vec<(u64, u32)>,
    /// The events themselves, for the change feed (moved here once encoded, not copied).
    published: Vec<Event>,
}

/// The segment being appended to.
pub struct Tail {
    pub name: String,
    pub file: Arc<dyn FsFile>,
    /// Where the next group is written.
    pub write_at: u64,
    /// When preallocating, the file's size (zeros past `write_at`).
    pub allocated: u64,
}

pub struct Writer {
    pub fs: Arc<dyn Fs>,
    pub segments_dir: PathBuf,
    pub options: Options,
    pub shared: Arc<Shared>,
    pub tail: Tail,
    /// Offset of the last group written.
    pub group_at: u64,
    /// Told each time a segment is sealed, when sealed segments are compressed.
    pub sealed: Option<Arc<crate::cold::Signal>>,
}

impl Writer {
    /// Runs until every sender is dropped, or until a failure poisons the store.
    pub fn run(mut self, mut requests: mpsc::Receiver<AppendRequest>) {
        let mut buf = Vec::with_capacity(1 << 20);
        let mut next = requests.blocking_recv();
        while let Some(first) = next.take() {
            if let Err(error) = self.commit(first, &mut || requests.try_recv().ok(), &mut buf) {
                requests.close();
                while let Some(r) = requests.blocking_recv() {
                    let _ = r.reply.send(Err(error.clone()));
                }
                return;
            }
            next = requests.blocking_recv();
        }
        self.index_on_close();
    }

    /// Commits `first` with what `more` yields (up to the group byte limit) as one group and
    /// answers its appenders; on a failure poisons the store, answers them with the error
    /// and returns it. A panic (a bug) poisons it like an IO error. Their replies are held
    /// outside what may panic, so that none is dropped unanswered by the unwinding.
    pub fn commit(
        &mut self,
        first: AppendRequest,
        more: &mut dyn FnMut() -> Option<AppendRequest>,
        buf: &mut Vec<u8>,
    ) -> Result<(), StoreError> {
        let mut accepted = Vec::new();
        let committed = guarded(|| {
            self.gather(first, more, buf, &mut accepted);
            if accepted.is_empty() {
                return Ok(());
            }
            self.write_group(&accepted, buf)?;
            self.make_visible(&mut accepted);
            Ok(())
        });
        match committed {
            Ok(()) => {
                acknowledge(accepted);
                Ok(())
            }
            Err(cause) => {
                let error = self.shared.stop(cause);
                for a in accepted {
                    let _ = a.reply.send(Err(error.clone()));
                }
                Err(error)
            }
        }
    }

    /// At a clean close: syncs the last segment and saves its index file, so the next open
    /// reads no segment at all.
    pub fn index_on_close(&self) {
        // A poisoned store syncs nothing more: its files are for recovery to judge.
        if self.shared.check_poison().is_err() || self.tail.file.sync_data().is_err() {
            return;
        }
        let index = self.shared.index.read().unwrap_or_else(|p| p.into_inner());
        let last = index.scanned(index.segments.len() - 1, self.tail.write_at);
        let path = self.path_of(&self.tail);
        idx::save(
            self.fs.as_ref(),
            &path,
            self.tail.file.as_ref(),
            &last,
            idx::Kind::Closed,
        );
    }

    fn path_of(&self, tail: &Tail) -> PathBuf {
        self.segments_dir
            .join(tail.name.trim_start_matches("segments/"))
    }

    /// Encodes `first` and whatever else is queued, up to the group byte limit. Appends whose
    /// seq does not follow the run's last seq are answered with a conflict at once.
    fn gather(
        &self,
        first: AppendRequest,
        more: &mut dyn FnMut() -> Option<AppendRequest>,
        buf: &mut Vec<u8>,
        accepted: &mut Vec<Accepted>,
    ) {
        buf.clear();
        let index = self.shared.index.read().unwrap_or_else(|p| p.into_inner());
        let mut next_id = index.last_event_id + 1;
        let mut last_seqs: HashMap<RunId, u32> = HashMap::new();
        let mut request = Some(first);
        while let Some(r) = request.take() {
            let last = last_seqs
                .get(&r.run_id)
                .copied()
                .unwrap_or_else(|| index.last_seq(r.run_id.as_str()));
            if let Some(refused) = self.refusal(&r, last) {
                let _ = r.reply.send(Err(refused));
            } else {
                let count = r.events.len() as u32;
                let mut events = Vec::with_capacity(r.events.len());
                let mut published = Vec::with_capacity(r.events.len());
                for (i, new) in r.events.into_iter().enumerate() {
                    let event = new.into_event(
                        EventId(next_id),
                        r.run_id.clone(),
                        Seq(r.expected_seq.0 + i as u32),
                    );
                    events.push((next_id, buf.len() as u32));
                    append_record(buf, KIND_EVENT, |b| {
                        encode_event(&event, b).expect("validated events always encode");
                    });
                    published.push(event);
                    next_id += 1;
                }
                last_seqs.insert(r.run_id.clone(), last + count);
                accepted.push(Accepted {
                    run_id: r.run_id,
                    reply: r.reply,
                    events,
                    published,
                });
            }
            if buf.len() < limits::GROUP_COMMIT_BYTES_MAX as usize {
                request = more();
            }
        }
    }

    /// Why the append `r` to a run whose last live seq is `last` is refused, if it is: its
    /// seq does not follow, or the run is archived (an archived run takes no more events, and
    /// its id no new run).
    fn refusal(&self, r: &AppendRequest, last: u32) -> Option<StoreError> {
        let conflict = |actual: u32| StoreError::Conflict {
            run_id: r.run_id.clone(),
            expected: r.expected_seq,
            actual: Seq(actual),
        };
        if last > 0 {
            return (r.expected_seq.0 != last + 1).then(|| conflict(last));
        }
        let hash = crate::archive::id_hash(r.run_id.as_str());
        let hashed = (self
            .shared
            .archived
            .read()
            .unwrap_or_else(|p| p.into_inner()))
        .contains(&hash);
        let dir = self
            .segments_dir
            .parent()
            .expect("segments live in the data dir");
        let archived = if hashed {
            match crate::archive::read_run(self.fs.as_ref(), dir, &r.run_id, Seq(1)) {
                Ok(events) => events.map(|e| e.len() as u32),
                Err(error) => return Some(error),
            }
        } else {
            None
        };
        match archived {
            None => (r.expected_seq.0 != 1).then(|| conflict(0)),
            Some(archived) if r.expected_seq.0 != archived + 1 => Some(conflict(archived)),
            Some(_) => Some(StoreError::Invalid {
                what: format!("run `{}`", r.run_id),
                reason: "it is archived: an archived run takes no more events".into(),
            }),
        }
    }

    /// Writes the group with its commit record and syncs it; on success the group's record
    /// offsets are relative to `self.group_at`.
    fn write_group(&mut self, accepted: &[Accepted], buf: &mut Vec<u8>) -> Result<(), String> {
        let count: usize = accepted.iter().map(|a| a.events.len()).sum();
        let batch_bytes = buf.len() as u32;
        append_commit(buf, count as u32, batch_bytes);
        let first_id = accepted[0].events[0].0;
        if self.tail.write_at > HEADER_BYTES as u64
            && self.tail.write_at + buf.len() as u64 > self.options.segment_bytes_max
        {
            self.roll(first_id)?;
        }
        let at = self.tail.write_at;
        let context = |what: &str, e: std::io::Error| {
            format!("{what} {} at offset {at}: {e}", self.tail.name)
        };
        let end = at + buf.len() as u64;
        if self.options.preallocate && end > self.tail.allocated {
            // The size change is made durable by the data sync below.
            let grown = preallocation(end, &self.options);
            self.tail
                .file
                .set_len(grown)
                .map_err(|e| context("preallocating", e))?;
            self.tail.allocated = grown;
        }
        self.tail
            .file
            .write_all_at(buf, at)
            .map_err(|e| context("writing", e))?;
        let mut sync_seconds = None;
        if self.options.durability == Durability::Fsync {
            let started = std::time::Instant::now();
            self.tail
                .file
                .sync_data()
                .map_err(|e| context("syncing", e))?;
            sync_seconds = Some(started.elapsed().as_secs_f64());
        }
        metrics::group_committed(count, sync_seconds);
        self.group_at = at;
        self.tail.write_at += buf.len() as u64;
        Ok(())
    }

    /// Makes a durable group visible to readers and subscribers.
    fn make_visible(&mut self, accepted: &mut [Accepted]) {
        let mut index = self.shared.index.write().unwrap_or_else(|p| p.into_inner());
        for a in accepted.iter() {
            for &(id, offset) in &a.events {
                index.push(
                    a.run_id.as_str(),
                    id,
                    (self.group_at + u64::from(offset)) as u32,
                );
            }
        }
        if self.shared.feed.receiver_count() > 0 {
            for a in accepted.iter_mut() {
                for event in a.published.drain(..) {
                    // A full channel drops its oldest event and tells its laggards: the
                    // writer never waits.
                    let _ = self.shared.feed.send(Ok(Arc::new(event)));
                }
            }
        }
    }

    /// Starts a new segment whose first event is `base`: trim the old segment's unused
    /// preallocation and sync it, create the new one (header synced, directory synced), then
    /// save the old one's index file, which thereby proves the new one exists.
    fn roll(&mut self, base: u64) -> Result<(), String> {
        // Gives the unused preallocation back (zeros would read as the end anyway) and makes
        // the sealed data durable in any mode before a later segment exists: a segment
        // followed by another is never cut as a torn tail. A failed sync is never ignored:
        // after one, nothing about the file can be trusted.
        let old = &self.tail;
        let trimmed = if self.options.preallocate {
            old.file.set_len(old.write_at)
        } else {
            Ok(())
        };
        let synced = trimmed.and_then(|()| old.file.sync_data());
        synced.map_err(|e| format!("sealing {}: {e}", old.name))?;
        let name = file_name(base);
        let path = self.segments_dir.join(&name);
        let file = create_segment(self.fs.as_ref(), &path, base, &self.options)
            .map_err(|e| format!("creating segment {}: {e}", path.display()))?;
        let old = std::mem::replace(
            &mut self.tail,
            Tail {
                name: format!("segments/{name}"),
                file: file.clone(),
                write_at: HEADER_BYTES as u64,
                allocated: preallocation(HEADER_BYTES as u64, &self.options),
            },
        );
        let mut index = self.shared.index.write().unwrap_or_else(|p| p.into_inner());
        let sealed = index.scanned(index.segments.len() - 1, old.write_at);
        let old_path = self.path_of(&old);
        idx::save(
            self.fs.as_ref(),
            &old_path,
            old.file.as_ref(),
            &sealed,
            idx::Kind::Sealed,
        );
        index
            .segments
            .push(SegmentIndex::new(base, self.tail.name.clone(), file));
        if let Some(sealed) = &self.sealed {
            sealed.sealed();
        }
        Ok(())
    }
}

/// Answers the appenders of a group made visible.
fn acknowledge(accepted: Vec<Accepted>) {
    let mut unsent = Vec::with_capacity(accepted.len());
    for a in accepted {
        let ids = a.events.iter().map(|&(id, _)| EventId(id)).collect();
        let _ = a.reply.send(Ok(ids));
        unsent.push(a.published);
    }
    // Events nobody subscribed to are freed once every appender has its answer.
    drop(unsent);
}

/// Runs `work`, turning a panic into a failure that stops the store, with the panic's
/// message as its cause.
fn guarded(work: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(result) => result,
        Err(panic) => {
            let message = (panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            Err(format!("the log writer panicked: {message}"))
        }
    }
}

/// Creates a segment file with its header, preallocated, synced, with its directory synced.
pub fn create_segment(
    fs: &dyn Fs,
    path: &std::path::Path,
    base: u64,
    options: &Options,
) -> std::io::Result<Arc<dyn FsFile>> {
    // An index file left under this name (by a segment cut away by `repair`) is not ours.
    idx::remove(fs, path);
    let file: Arc<dyn FsFile> = fs.open(path, Mode::CreateNew)?.into();
    file.write_all_at(&header(base), 0)?;
    if options.preallocate {
        file.set_len(preallocation(HEADER_BYTES as u64, options))?;
    }
    file.sync_data()?;
    fs.sync_dir(path.parent().expect("segments live in a directory"))?;
    Ok(file)
}

/// The size a segment is given when its data reaches `end`: a step ahead when preallocating.
pub fn preallocation(end: u64, options: &Options) -> u64 {
    if !options.preallocate {
        return end;
    }
    (end + limits::SEGMENT_PREALLOCATE_BYTES)
        .min(options.segment_bytes_max)
        .max(end)
}
