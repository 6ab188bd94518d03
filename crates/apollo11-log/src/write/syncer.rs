//! The sync thread of the pipelined writer: it syncs the segment while the writer thread
//! writes the next batch. A sync covers every batch written before it started. When a sync
//! returns while appends wait to be written, the next one waits for the writer's turn (for
//! `Options::sync_waits_for_writer` at most), so that it covers them too: started at once,
//! it would cover only the batch written during the last, and those appends would wait for
//! the sync after it (about 2.5 syncs from arrival to answer instead of 1.5). The writer
//! acknowledges a batch only once a sync that covers it has returned, and it writes a batch
//! only while at most one other is unsynced, so a crash leaves at most two batches torn
//! (the one being synced and the next). A failed sync is never retried: it stops this
//! thread, and the writer fails every batch it has written since the last good sync.

use crate::file_system::FsFile;
use crate::metrics;
use crate::write::WriteError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the writer and the sync thread share.
pub struct Syncs {
    state: Mutex<State>,
    work: Condvar,
    /// Set by the writer while it holds requests taken and not yet written (and just before
    /// it takes them, when it may not write them yet).
    backlog: AtomicBool,
    /// How long a sync waits for the writer's turn, at most (`Options::sync_waits_for_writer`).
    wait: Duration,
}

/// The segment to sync, with its name for errors.
#[derive(Clone)]
pub struct Target {
    pub name: String,
    pub file: Arc<dyn FsFile>,
}

#[derive(Default)]
struct State {
    /// Batches written, counted from the writer's start.
    written: u64,
    /// Batches covered by a sync that returned.
    synced: u64,
    /// The segment the written batches are in (the writer rolls only once all are synced).
    target: Option<Target>,
    /// Why a sync failed; set once, and the thread stops.
    failed: Option<WriteError>,
    /// Set by the writer when it stops: the thread ends (after the sync under way).
    closing: bool,
    /// Set when a sync returned with appends waiting to be written: the next sync waits
    /// for the writer's turn (a write, or [`Syncs::go`] after the writer saw it return).
    holding: bool,
}

/// What the writer learns from the sync thread.
pub struct Progress {
    pub synced: u64,
    pub failed: Option<WriteError>,
}

impl Syncs {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the sync thread; `wake` is called after each sync (and on a failure),
    /// `queued` says whether appends are queued for the writer, and a sync waits for the
    /// writer's turn `wait` at most.
    ///
    /// # Errors
    ///
    /// The operating system's, when the thread cannot start.
    pub fn start(
        wake: impl Fn() + Send + 'static,
        queued: impl Fn() -> bool + Send + 'static,
        wait: Duration,
    ) -> std::io::Result<(Arc<Syncs>, JoinHandle<()>)> {
        let syncs = Arc::new(Syncs {
            state: Mutex::default(),
            work: Condvar::new(),
            backlog: AtomicBool::new(false),
            wait,
        });
        let running = syncs.clone();
        let handle = std::thread::Builder::new()
            .name("apollo11-log-sync".into())
            .spawn(move || running.run(&wake, &queued))?;
        Ok((syncs, handle))
    }

    /// Counts one more batch written to `target`, which the next sync will cover, and lets
    /// a sync held for the writer's turn start.
    pub fn written(&self, target: &Target) {
        let mut state = self.state();
        state.written += 1;
        state.target = Some(target.clone());
        state.holding = false;
        drop(state);
        self.work.notify_one();
    }

    /// Lets a sync held for the writer's turn start, when the writer, having seen `synced`
    /// batches synced, had nothing to write. A hold set by a sync that returned after the
    /// writer looked stays: that sync's wake-up gives the writer another turn.
    pub fn go(&self, synced: u64) {
        let mut state = self.state();
        if state.holding && state.synced <= synced {
            state.holding = false;
            drop(state);
            self.work.notify_one();
        }
    }

    /// Says whether the writer holds requests taken (or about to be) and not yet written.
    pub fn backlog(&self, waiting: bool) {
        self.backlog.store(waiting, Ordering::SeqCst);
    }

    /// How far the syncs got.
    pub fn progress(&self) -> Progress {
        let state = self.state();
        Progress {
            synced: state.synced,
            failed: state.failed.clone(),
        }
    }

    /// Ends the thread once the sync under way, if any, returns.
    pub fn close(&self) {
        self.state().closing = true;
        self.work.notify_one();
    }

    /// Syncs one more batch written to `target` on the calling thread, when no batch waits
    /// for this thread: the writer's way when nothing else is queued to write, which spares
    /// the hand-off here and back.
    ///
    /// # Errors
    ///
    /// The sync's failure, which the caller must treat as this thread's own.
    pub fn sync_here(&self, target: &Target) -> Result<(), WriteError> {
        sync(target)?;
        let mut state = self.state();
        debug_assert_eq!(state.written, state.synced, "a sync is under way");
        state.written += 1;
        state.synced = state.written;
        Ok(())
    }

    fn run(&self, wake: &dyn Fn(), queued: &dyn Fn() -> bool) {
        while let Some((covers, target)) = self.next() {
            let outcome = crate::write::writer::guarded(|| sync(&target));
            // The queue first: the writer says it has a backlog before it empties the queue.
            let waiting = !self.wait.is_zero() && (queued() || self.backlog.load(Ordering::SeqCst));
            let mut state = self.state();
            match outcome {
                Ok(()) => {
                    state.synced = covers;
                    state.holding = waiting;
                }
                Err(cause) => state.failed = Some(cause),
            }
            drop(state);
            wake();
        }
    }

    /// Waits for batches to sync: how many batches a sync started now covers, and where.
    /// `None` once closing, or after a failure.
    fn next(&self) -> Option<(u64, Target)> {
        let mut state = self.state();
        loop {
            // The writer closes once everything is synced, or after a failure: either way
            // no sync is wanted any more.
            if state.failed.is_some() || state.closing {
                return None;
            }
            if state.written > state.synced && !state.holding {
                let target = state.target.clone().expect("a batch was written somewhere");
                return Some((state.written, target));
            }
            if state.written > state.synced {
                let (held, waited) = (self.work)
                    .wait_timeout(state, self.wait)
                    .unwrap_or_else(|p| p.into_inner());
                state = held;
                state.holding &= !waited.timed_out();
                continue;
            }
            state = self.work.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Syncs `target`'s data, and counts the sync's time.
fn sync(target: &Target) -> Result<(), WriteError> {
    let started = std::time::Instant::now();
    target
        .file
        .sync_data()
        .map_err(|e| WriteError::io(format!("syncing {}", target.name), e))?;
    metrics::synced(started.elapsed().as_secs_f64());
    Ok(())
}
