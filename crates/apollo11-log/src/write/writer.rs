//! The single writer and what it shares with readers: group commit. It takes the appends
//! queued, checks each one's expected seq, encodes them into one buffer closed by a commit
//! record and writes it as one batch; once a sync covers the batch it publishes the events to
//! readers (the index, and the change feed's subscribers) and acknowledges the appenders.
//! On its thread (`pipeline.rs`) the next batch is written while the sync thread
//! (`syncer.rs`) syncs the previous one; in deterministic mode each append is one batch,
//! written and synced on the appender's task. A write or sync error poisons the store:
//! nothing more is written or acknowledged. The writer never waits for a subscriber.

use crate::file_system::{Fs, FsFile, Mode};
use crate::format::codec::encode_event;
use crate::format::index_file;
use crate::format::record::{append_commit, append_record, KIND_EVENT};
use crate::format::segment::{file_name, header, HEADER_BYTES};
use crate::metrics;
use crate::run_index::{Index, SegmentIndex};
use crate::write::{sealing, WriteError};
use crate::{Durability, Options};
use apollo11_core::{limits, Event, EventId, RunId, Seq};
use apollo11_store::feed::Published;
use apollo11_store::{NewEvent, StoreError};
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use tokio::sync::{broadcast, oneshot};

/// Runs whose last seq the writer keeps past their batch's visibility (saving a run id's
/// allocation on most appends) before it drops those the index knows.
const SEQS_KEPT_MAX: usize = 4_096;

/// What readers and appenders share with the writer.
pub struct Shared {
    /// The index of durable events.
    pub index: RwLock<Index>,
    /// Set once, by the writer, when a write or sync failed: the first failure.
    pub poison: OnceLock<Arc<WriteError>>,
    /// The change feed: durable events, sent while the index's write lock is held, so a
    /// subscription registered under its read lock knows which events it will be sent.
    pub feed: broadcast::Sender<Published>,
    /// Where the archived runs are, by their ids' hashes (a writing open's; `None` on a
    /// read-only open): a read of a run the live log lacks opens the one archive file named
    /// there, and an append to such a run whose id hashes to one of them is checked against it.
    pub archived: RwLock<Option<crate::archive::Generations>>,
    /// The runs a `gc` is moving to an archive: appends to them are refused meanwhile.
    pub collecting: RwLock<HashSet<RunId>>,
    /// The runs a `gc` moved out of the live log (added under the index's write lock, with
    /// its generation raised): the writer forgets their last seqs, so that an append to one
    /// is checked against the archive.
    pub moved: Mutex<Vec<RunId>>,
    /// The id of the last event the writer has taken into a batch (published or not).
    pub assigned: AtomicU64,
}

impl Shared {
    /// Shared state around `index`, not poisoned, with no subscriber.
    pub fn new(index: Index) -> Shared {
        Shared {
            index: RwLock::new(index),
            poison: OnceLock::new(),
            feed: broadcast::channel(limits::CHANGE_FEED_EVENTS_MAX as usize).0,
            archived: RwLock::default(),
            collecting: RwLock::default(),
            moved: Mutex::default(),
            assigned: AtomicU64::new(0),
        }
    }

    /// Where to look for `run_id` in the archive, as [`Shared::archived`] knows it.
    pub fn archived_at(&self, run_id: &RunId) -> crate::archive::Place {
        let archived = self.archived.read().unwrap_or_else(|p| p.into_inner());
        (archived.as_ref()).map_or(crate::archive::Place::Anywhere, |g| g.place(run_id))
    }

    /// Records why the store stopped (the first cause only) and tells subscribers. Returns
    /// the error every later call gets.
    pub fn stop(&self, cause: WriteError) -> StoreError {
        let _ = self.poison.set(Arc::new(cause));
        metrics::poisoned();
        let error = self.poisoned().expect("the poison was just set");
        // No subscriber is no error: there is nobody to tell.
        let _ = self.feed.send(Err(error.clone()));
        error
    }

    /// Fails if the store is poisoned.
    pub fn check_poison(&self) -> Result<(), StoreError> {
        self.poisoned().map_or(Ok(()), Err)
    }

    /// The error of a poisoned store, naming its first cause; `None` when it is not.
    fn poisoned(&self) -> Option<StoreError> {
        (self.poison.get()).map(|cause| StoreError::Poisoned {
            cause: cause.to_string(),
        })
    }
}

/// One append waiting for the writer.
pub struct AppendRequest {
    pub run_id: RunId,
    pub expected_seq: Seq,
    pub events: Vec<NewEvent>,
    pub reply: oneshot::Sender<Result<Vec<EventId>, StoreError>>,
}

/// An accepted append inside a batch.
pub struct Accepted {
    run_id: RunId,
    reply: oneshot::Sender<Result<Vec<EventId>, StoreError>>,
    /// Event ids with their record offsets relative to the batch's start.
    events: Vec<(u64, u32)>,
    /// The events themselves, for the change feed (moved here once encoded, not copied).
    published: Vec<Event>,
}

/// A batch written, waiting for a sync that covers it.
pub struct Batch {
    /// Its number, counted from the writer's start (as the sync thread counts them).
    pub number: u64,
    /// Where it starts in the tail segment.
    at: u64,
    events: usize,
    accepted: Vec<Accepted>,
}

/// The segment being appended to.
pub struct Tail {
    pub name: String,
    pub file: Arc<dyn FsFile>,
    /// Where the next batch is written.
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
    /// Told each time a segment is sealed, when sealed segments are compressed.
    pub sealed: Option<Arc<crate::cold::Signal>>,
    /// The id the next accepted event gets.
    next_id: u64,
    /// Batches written so far.
    batches: u64,
    /// The last seq of runs this writer appended to, and the number of the batch that
    /// holds it: the index does not know the seqs of batches not yet visible. Entries of
    /// visible batches are dropped once there are `SEQS_KEPT_MAX`.
    seqs: HashMap<RunId, (u32, u64)>,
    /// The index's generation when the writer last forgot the runs a `gc` moved.
    generation: u64,
    /// The thread saving the last sealed segment's index file, if one is.
    saving: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    /// The writer of the log `shared` holds, appending to `tail`.
    pub fn new(
        fs: Arc<dyn Fs>,
        segments_dir: PathBuf,
        options: Options,
        shared: Arc<Shared>,
        tail: Tail,
        sealed: Option<Arc<crate::cold::Signal>>,
    ) -> Writer {
        let next_id = shared
            .index
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .last_event_id
            + 1;
        shared.assigned.store(next_id - 1, Ordering::Release);
        Writer {
            fs,
            segments_dir,
            options,
            shared,
            tail,
            sealed,
            next_id,
            batches: 0,
            seqs: HashMap::new(),
            generation: 0,
            saving: None,
        }
    }

    /// Commits `request` as one batch, written and synced here, and answers it; on a failure
    /// poisons the store and answers it with the error. A panic (a bug) poisons it like an
    /// IO error. The reply is held outside what may panic, so that it is never dropped
    /// unanswered by the unwinding.
    pub fn commit(&mut self, request: AppendRequest, buf: &mut Vec<u8>) {
        let mut gathered = Vec::new();
        let mut written = None;
        let committed = guarded(|| {
            self.gather(&mut VecDeque::from([request]), buf, &mut gathered);
            if gathered.is_empty() {
                return Ok(());
            }
            self.close_batch(&gathered, buf);
            if self.needs_roll(buf.len()) {
                self.roll(self.first_id(&gathered))?;
            }
            written = Some(self.write(buf)?);
            if self.options.durability == Durability::Fsync {
                let started = std::time::Instant::now();
                let name = &self.tail.name;
                let synced = self.tail.file.sync_data();
                synced.map_err(|e| WriteError::io(format!("syncing {name}"), e))?;
                metrics::synced(started.elapsed().as_secs_f64());
            }
            Ok(())
        });
        match (committed, written) {
            (Ok(()), Some(at)) => {
                let batch = self.batch(at, gathered);
                self.complete(batch);
            }
            (Ok(()), None) => {}
            (Err(cause), _) => fail(gathered, &self.shared.stop(cause)),
        }
    }

    /// At a clean close: syncs the last segment and saves its index file, so the next open
    /// reads no segment at all.
    pub fn index_on_close(&mut self) {
        self.finish_saving();
        // A poisoned store syncs nothing more: its files are for recovery to judge.
        if self.shared.check_poison().is_err() || self.tail.file.sync_data().is_err() {
            return;
        }
        let index = self.shared.index.read().unwrap_or_else(|p| p.into_inner());
        let last = index.scanned(index.segments.len() - 1, self.tail.write_at);
        let path = self.path_of(&self.tail);
        index_file::save(
            self.fs.as_ref(),
            &path,
            self.tail.file.as_ref(),
            &last,
            index_file::Kind::Closed,
        );
    }

    /// Waits for the thread saving a sealed segment's index file, if one is.
    fn finish_saving(&mut self) {
        if let Some(saving) = self.saving.take() {
            // A panic there only leaves the file unsaved: the next open scans the segment.
            let _ = saving.join();
        }
    }

    fn path_of(&self, tail: &Tail) -> PathBuf {
        self.segments_dir
            .join(tail.name.trim_start_matches("segments/"))
    }

    /// Encodes requests from the front of `pending` into `buf` (cleared first) until it
    /// holds the group byte limit, moving those accepted to `accepted`. Appends whose seq
    /// does not follow the run's last seq (in the index, or in a batch not yet visible) are
    /// answered with a conflict at once. Returns how many requests it took.
    pub fn gather(
        &mut self,
        pending: &mut VecDeque<AppendRequest>,
        buf: &mut Vec<u8>,
        accepted: &mut Vec<Accepted>,
    ) -> usize {
        buf.clear();
        let number = self.batches + 1;
        let index = self.shared.index.read().unwrap_or_else(|p| p.into_inner());
        if index.generation != self.generation {
            self.generation = index.generation;
            forget_moved(&self.shared, &mut self.seqs);
        }
        let mut taken = 0;
        while buf.len() < limits::GROUP_COMMIT_BYTES_MAX as usize {
            let Some(r) = pending.pop_front() else { break };
            taken += 1;
            let last = match self.seqs.get(&r.run_id) {
                Some(&(seq, _)) => seq,
                None => index.last_seq(r.run_id.as_str()),
            };
            if let Some(refused) = self.refusal(&r, last) {
                let _ = r.reply.send(Err(refused));
                continue;
            }
            let count = r.events.len() as u32;
            let mut events = Vec::with_capacity(r.events.len());
            let mut published = Vec::with_capacity(r.events.len());
            for (i, new) in r.events.into_iter().enumerate() {
                let event = new.into_event(
                    EventId(self.next_id),
                    r.run_id.clone(),
                    Seq(r.expected_seq.0 + i as u32),
                );
                events.push((self.next_id, buf.len() as u32));
                append_record(buf, KIND_EVENT, |b| {
                    encode_event(&event, b).expect("validated events always encode");
                });
                published.push(event);
                self.next_id += 1;
            }
            match self.seqs.get_mut(&r.run_id) {
                Some(entry) => *entry = (last + count, number),
                None => {
                    self.seqs.insert(r.run_id.clone(), (last + count, number));
                }
            }
            accepted.push(Accepted {
                run_id: r.run_id,
                reply: r.reply,
                events,
                published,
            });
        }
        // Stored under the index's read lock: a gc marking runs under its write lock then
        // knows every batch that could hold them.
        self.shared
            .assigned
            .store(self.next_id - 1, Ordering::Release);
        taken
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
        let collecting = self.shared.collecting.read();
        if (collecting.unwrap_or_else(|p| p.into_inner())).contains(&r.run_id) {
            return Some(StoreError::Invalid {
                what: format!("run `{}`", r.run_id),
                reason: "gc is moving it to an archive: an archived run takes no more events"
                    .into(),
            });
        }
        if last > 0 {
            return (r.expected_seq.0 != last + 1).then(|| conflict(last));
        }
        let dir = self
            .segments_dir
            .parent()
            .expect("segments live in the data dir");
        let place = self.shared.archived_at(&r.run_id);
        let found = crate::archive::find_run(self.fs.as_ref(), dir, place, &r.run_id, Seq(1));
        let archived = match found {
            Ok(events) => events.map(|e| e.len() as u32),
            Err(error) => return Some(error),
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

    /// Closes the batch gathered in `buf` with its commit record.
    pub fn close_batch(&self, accepted: &[Accepted], buf: &mut Vec<u8>) {
        let batch_bytes = buf.len() as u32;
        append_commit(buf, batch_events(accepted) as u32, batch_bytes);
    }

    /// Whether a batch of `bytes` must go to a new segment.
    pub fn needs_roll(&self, bytes: usize) -> bool {
        self.tail.write_at > HEADER_BYTES as u64
            && self.tail.write_at + bytes as u64 > self.options.segment_bytes_max
    }

    /// The id of the first event of the batch just gathered.
    pub fn first_id(&self, accepted: &[Accepted]) -> u64 {
        self.next_id - batch_events(accepted) as u64
    }

    /// Writes the closed batch in `buf` at the end of the tail segment (growing its
    /// preallocation first when it would pass it) and returns where it starts. A sync must
    /// cover it before it is completed.
    pub fn write(&mut self, buf: &[u8]) -> Result<u64, WriteError> {
        let at = self.tail.write_at;
        let context = |what: &str, e: std::io::Error| {
            WriteError::io(format!("{what} {} at offset {at}", self.tail.name), e)
        };
        let end = at + buf.len() as u64;
        if self.options.preallocate && end > self.tail.allocated {
            // The size change is made durable by the data sync that covers the batch.
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
        self.tail.write_at = end;
        Ok(at)
    }

    /// The batch of `accepted` just written at `at`, numbered.
    pub fn batch(&mut self, at: u64, accepted: Vec<Accepted>) -> Batch {
        self.batches += 1;
        Batch {
            number: self.batches,
            at,
            events: batch_events(&accepted),
            accepted,
        }
    }

    /// Makes a batch a sync covered visible to readers and subscribers, then answers its
    /// appenders; how many it answered.
    pub fn complete(&mut self, mut batch: Batch) -> usize {
        self.make_visible(&mut batch);
        if self.seqs.len() > SEQS_KEPT_MAX {
            // The index holds the seqs of every batch up to this one.
            self.seqs.retain(|_, &mut (_, n)| n > batch.number);
        }
        metrics::batch_durable(batch.events);
        let answered = batch.accepted.len();
        acknowledge(batch.accepted);
        answered
    }

    /// Makes a durable batch visible to readers and subscribers.
    fn make_visible(&self, batch: &mut Batch) {
        let mut index = self.shared.index.write().unwrap_or_else(|p| p.into_inner());
        for a in &batch.accepted {
            for &(id, offset) in &a.events {
                index.push(a.run_id.as_str(), id, (batch.at + u64::from(offset)) as u32);
            }
        }
        if self.shared.feed.receiver_count() > 0 {
            for a in &mut batch.accepted {
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
    pub fn roll(&mut self, base: u64) -> Result<(), WriteError> {
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
        synced.map_err(|e| WriteError::io(format!("sealing {}", old.name), e))?;
        let name = file_name(base);
        let path = self.segments_dir.join(&name);
        let file = create_segment(self.fs.as_ref(), &path, base, &self.options)
            .map_err(|e| WriteError::io(format!("creating segment {}", path.display()), e))?;
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
        let last = index
            .segments
            .last()
            .expect("the log has a segment to seal");
        let (old_base, events) = (last.base, last.offsets.len());
        index
            .segments
            .push(SegmentIndex::new(base, self.tail.name.clone(), file));
        drop(index);
        let sealed = sealing::Sealed {
            base: old_base,
            path: self.path_of(&old),
            name: old.name,
            file: old.file,
            end: old.write_at,
            events,
        };
        self.finish_saving();
        let (fs, shared) = (self.fs.clone(), self.shared.clone());
        self.saving = sealing::save(fs, shared, sealed, self.sealed.clone());
        Ok(())
    }
}

/// Events in a batch's appends.
fn batch_events(accepted: &[Accepted]) -> usize {
    accepted.iter().map(|a| a.events.len()).sum()
}

/// Answers the appenders of a batch that failed, or that was written before a failure was
/// known, with `error`.
pub fn fail(accepted: Vec<Accepted>, error: &StoreError) {
    for a in accepted {
        let _ = a.reply.send(Err(error.clone()));
    }
}

impl Batch {
    /// Answers its appenders with `error`.
    pub fn fail(self, error: &StoreError) {
        fail(self.accepted, error);
    }
}

/// Forgets the last seqs of the runs a `gc` moved out of the live log: an append to one
/// must find it gone from the index and be checked against the archive.
fn forget_moved(shared: &Shared, seqs: &mut HashMap<RunId, (u32, u64)>) {
    let mut moved = shared.moved.lock().unwrap_or_else(|p| p.into_inner());
    for run in moved.drain(..) {
        seqs.remove(&run);
    }
}

/// Answers the appenders of a batch made visible.
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
pub fn guarded<T>(work: impl FnOnce() -> Result<T, WriteError>) -> Result<T, WriteError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(result) => result,
        Err(panic) => {
            let message = (panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            Err(WriteError::Panicked { message })
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
    index_file::remove(fs, path).map_err(std::io::Error::other)?;
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
