//! The writer thread: it gathers what is queued into a batch and writes it while the sync
//! thread syncs the batch before, and completes (publishes and acknowledges) each batch once
//! a sync that covers it has returned. A batch written with nothing queued behind it, nothing
//! unsynced before it, and every appender the last sync answered back in it (a lone
//! appender's, say) is synced by the thread that wrote it: nothing is left to overlap with
//! its sync, which is spared the hand-off to the sync thread and back. An appender that finds
//! the pipeline so idle writes and syncs its append itself ([`Lane::commit_alone`]), sparing
//! the hand-off to this thread and back too. It writes a batch only while at
//! most one other is unsynced, so a crash can tear the last two batches at most (recovery
//! relies on it, see docs/log-format.md). It rolls to a new segment only once every batch
//! written is synced. Any failure, its own or a sync's, poisons the store and fails every
//! append not yet acknowledged: those of the batch a failed sync covered, of the batch
//! written after it, of the batch being gathered, and every one queued or pushed later.

use crate::write::queue::Queue;
use crate::write::syncer::{Syncs, Target};
use crate::write::writer::{fail, guarded, Accepted, AppendRequest, Batch, Writer};
use crate::write::WriteError;
use crate::Durability;
use apollo11_store::StoreError;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Batches written and not yet synced, at most, when a new one is written.
const UNSYNCED_MAX: usize = 1;

/// The writer's state, shared by the writer thread and the appenders: the thread holds it
/// for a turn, an appender only when it finds it free and idle.
pub struct Lane {
    queue: Arc<Queue>,
    pipeline: Mutex<Pipeline>,
    /// Appends made and not yet answered.
    appending: AtomicUsize,
}

/// One append in flight, counted by its lane until dropped.
pub struct Appending<'a>(&'a AtomicUsize);

impl Drop for Appending<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The writer's state.
struct Pipeline {
    writer: Writer,
    queue: Arc<Queue>,
    /// The sync thread (none in buffered durability: a batch is complete once written).
    syncs: Option<(Arc<Syncs>, JoinHandle<()>)>,
    /// Requests taken from the queue, not yet in a batch.
    pending: VecDeque<AppendRequest>,
    /// Batches covered by a returned sync, as last read (some may not be completed yet).
    synced: u64,
    /// The appends of the batch being gathered and written.
    gathered: Vec<Accepted>,
    /// Batches written, oldest first, waiting for a sync that covers them.
    unsynced: VecDeque<Batch>,
    /// The appends the last completed batches answered: appenders that may be about to append
    /// again, whose next batch the sync thread should take while more of them come.
    answered: usize,
    buf: Vec<u8>,
}

/// What the writer thread does after a turn.
enum Turn {
    /// Turns again at once.
    Again,
    /// Sleeps until woken: by a push (when it may write), a sync's end, or the queue's close.
    Sleep,
    /// Stops: the queue is closed and everything is answered.
    Stop,
}

impl Lane {
    /// The writer's state around `writer`, with its sync thread started (in fsync
    /// durability); requests reach it through `queue` or [`Lane::commit_alone`].
    ///
    /// # Errors
    ///
    /// The operating system's, when the sync thread cannot start.
    pub fn new(writer: Writer, queue: Arc<Queue>) -> std::io::Result<Lane> {
        let syncs = match writer.options.durability {
            Durability::Fsync => {
                let (waking, queued) = (queue.clone(), queue.clone());
                let wait = writer.options.sync_waits_for_writer;
                Some(Syncs::start(
                    move || waking.wake(),
                    move || !queued.is_empty(),
                    wait,
                )?)
            }
            Durability::Buffered => None,
        };
        let pipeline = Pipeline {
            writer,
            queue: queue.clone(),
            syncs,
            pending: VecDeque::new(),
            synced: 0,
            gathered: Vec::new(),
            unsynced: VecDeque::new(),
            answered: 0,
            buf: Vec::with_capacity(1 << 20),
        };
        Ok(Lane {
            queue,
            pipeline: Mutex::new(pipeline),
            appending: AtomicUsize::new(0),
        })
    }

    /// Where appenders queue their requests for the writer thread.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Counts an append in flight until the value returned is dropped: hold it until the
    /// append is answered.
    pub fn appending(&self) -> Appending<'_> {
        self.appending.fetch_add(1, Ordering::SeqCst);
        Appending(&self.appending)
    }

    fn lock(&self) -> MutexGuard<'_, Pipeline> {
        self.pipeline.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes and syncs `request` on the calling thread, answering it (a failure too, which
    /// poisons the store), when it is the only append in flight (counted by
    /// [`Lane::appending`], which the caller holds), the writer thread is not at work and
    /// nothing else waits: nothing queued, gathered or unsynced, and no more than one
    /// appender answered by the last sync. A lone appender (a chain of steps) would
    /// otherwise wait for two thread wake-ups around its sync, each of tens of µs on a
    /// virtual machine. Else hands `request` back, to be queued. The caller is blocked for
    /// one write and one sync; one appender at a time at most, since the others find the
    /// writer's state held.
    pub fn commit_alone(&self, request: AppendRequest) -> Option<AppendRequest> {
        if self.appending.load(Ordering::SeqCst) > 1 {
            return Some(request);
        }
        let Ok(mut pipeline) = self.pipeline.try_lock() else {
            return Some(request);
        };
        if !pipeline.idle() {
            return Some(request);
        }
        pipeline.pending.push_back(request);
        if let Err(cause) = guarded(|| pipeline.write_next()) {
            pipeline.fail_all(cause);
        }
        None
    }
}

/// Runs the writer until the queue is closed and everything queued is answered, or until a
/// failure poisons the store; then stops the sync thread and, after a clean run, indexes
/// the last segment.
pub fn run(lane: Arc<Lane>) {
    // Asleep until a push, a sync's end or the close wakes it (the queue starts wanting):
    // until then a lone appender finds the writer's state free.
    std::thread::park();
    loop {
        let mut pipeline = lane.lock();
        match guarded(|| pipeline.turn()) {
            Ok(Turn::Again) => continue,
            // A wake-up sent since the turn's checks makes this return at once.
            Ok(Turn::Sleep) => {
                drop(pipeline);
                std::thread::park();
            }
            Ok(Turn::Stop) => break,
            Err(cause) => {
                pipeline.fail_all(cause);
                break;
            }
        }
    }
    let mut pipeline = lane.lock();
    if let Some((syncs, handle)) = pipeline.syncs.take() {
        syncs.close();
        let _ = handle.join();
    }
    pipeline.writer.index_on_close();
}

/// Answers every request in `pending` and in the (closed) queue with `error`.
fn fail_requests(queue: &Queue, pending: &mut VecDeque<AppendRequest>, error: &StoreError) {
    queue.take(pending);
    for r in pending.drain(..) {
        let _ = r.reply.send(Err(error.clone()));
    }
}

impl Pipeline {
    /// One turn: writes a batch when requests wait and it may, lets the next sync start
    /// (it waits for this turn when appends waited as the last returned), then completes
    /// the batches synced, or else says to sleep until woken. While a sync waits for the
    /// turn, the write comes before the completions, which would otherwise delay it; with
    /// nothing unsynced, the completions come first.
    fn turn(&mut self) -> Result<Turn, WriteError> {
        self.read_synced()?;
        if self.unsynced_count() == 0 {
            // No sync waits for this turn: acknowledge what is durable first, before a write
            // that may be synced here, alone, and that counts the appenders answered.
            self.complete_synced()?;
        }
        let may_write = self.unsynced_count() <= UNSYNCED_MAX;
        if may_write && self.pending.is_empty() {
            // Pushes from now on wake this thread: none is missed between the take below
            // and the park.
            self.queue.want();
        }
        if let (false, Some((syncs, _))) = (may_write, &self.syncs) {
            // Said before the take, which empties the queue the sync thread looks at first:
            // a sync returning meanwhile sees the requests in one place or the other.
            syncs.backlog(true);
        }
        let closed = self.queue.take(&mut self.pending);
        let wrote = may_write && !self.pending.is_empty();
        if wrote {
            self.write_next()?;
        }
        if let Some((syncs, _)) = &self.syncs {
            syncs.go(self.synced);
            syncs.backlog(!wrote && !self.pending.is_empty());
        }
        self.complete_synced()?;
        if wrote {
            return Ok(Turn::Again);
        }
        if closed && self.pending.is_empty() && self.unsynced.is_empty() {
            return Ok(Turn::Stop);
        }
        Ok(Turn::Sleep)
    }

    /// Reads how many batches returned syncs covered; fails, after completing those, if a
    /// sync failed.
    fn read_synced(&mut self) -> Result<(), WriteError> {
        let Some((syncs, _)) = &self.syncs else {
            return Ok(());
        };
        let progress = syncs.progress();
        if progress.failed.is_some() {
            return self.complete_synced();
        }
        self.synced = progress.synced;
        Ok(())
    }

    /// Batches written and not covered by a returned sync, as last read.
    fn unsynced_count(&self) -> usize {
        let synced = self.synced;
        self.unsynced.iter().filter(|b| b.number > synced).count()
    }

    /// Whether a lone append may be written and synced at once by whoever holds the state:
    /// nothing waits or is in flight, and the last sync answered one appender at most.
    fn idle(&self) -> bool {
        self.pending.is_empty()
            && self.gathered.is_empty()
            && self.unsynced.is_empty()
            && self.answered <= 1
            && self.queue.is_idle()
    }

    /// Gathers a batch from the requests pending and writes it; rolls first, once every
    /// batch written is synced, when it does not fit in the tail segment.
    fn write_next(&mut self) -> Result<(), WriteError> {
        let taken = (self.writer).gather(&mut self.pending, &mut self.buf, &mut self.gathered);
        self.queue.release(taken);
        if self.gathered.is_empty() {
            return Ok(());
        }
        self.writer.close_batch(&self.gathered, &mut self.buf);
        let appends = self.gathered.len();
        if self.writer.needs_roll(self.buf.len()) {
            self.drain()?;
            self.writer.roll(self.writer.first_id(&self.gathered))?;
        }
        let at = self.writer.write(&self.buf)?;
        let batch = self.writer.batch(at, std::mem::take(&mut self.gathered));
        let Some((syncs, _)) = &self.syncs else {
            self.writer.complete(batch);
            return Ok(());
        };
        let alone = self.unsynced.is_empty() && self.pending.is_empty() && self.queue.is_empty();
        let target = Target {
            name: self.writer.tail.name.clone(),
            file: self.writer.tail.file.clone(),
        };
        self.unsynced.push_back(batch);
        if alone && appends >= self.answered {
            syncs.sync_here(&target)?;
            return self.complete_synced();
        }
        syncs.written(&target);
        Ok(())
    }

    /// Completes, oldest first, every batch a returned sync covered; fails if a sync failed.
    fn complete_synced(&mut self) -> Result<(), WriteError> {
        let Some((syncs, _)) = &self.syncs else {
            return Ok(());
        };
        let progress = syncs.progress();
        self.synced = progress.synced;
        let mut answered = 0;
        while let Some(batch) = self.unsynced.pop_front() {
            if batch.number > progress.synced {
                self.unsynced.push_front(batch);
                break;
            }
            answered += self.writer.complete(batch);
        }
        if answered > 0 {
            self.answered = answered;
        }
        progress.failed.map_or(Ok(()), Err)
    }

    /// Waits until every batch written is synced, and completes them. Only the writer
    /// thread ever waits here: an appender writes only when nothing is unsynced.
    fn drain(&mut self) -> Result<(), WriteError> {
        loop {
            self.complete_synced()?;
            if self.unsynced.is_empty() {
                return Ok(());
            }
            if let Some((syncs, _)) = &self.syncs {
                syncs.go(self.synced);
            }
            std::thread::park();
        }
    }

    /// Poisons the store with `cause` and answers every append not acknowledged with it,
    /// once the batches a returned sync covered are acknowledged: they are durable (a write
    /// may fail after a sync returned and before its batch was completed).
    fn fail_all(&mut self, cause: WriteError) {
        // Its error, if any, is a sync's failure or a panic: the batches after the last good
        // sync fail below, with `cause`.
        let _ = guarded(|| self.complete_synced());
        let error = self.writer.shared.stop(cause);
        self.queue.close(error.clone());
        fail(std::mem::take(&mut self.gathered), &error);
        for batch in self.unsynced.drain(..) {
            batch.fail(&error);
        }
        fail_requests(&self.queue, &mut self.pending, &error);
    }
}
