//! The hand-off from appenders to the writer thread. An appender pushes its request under a
//! lock held for one `Vec::push`, and wakes the writer only if it sleeps waiting for
//! requests (not while it waits for a sync: that wakes it); the writer takes everything
//! queued at once, one lock per batch.
//! At most `limits::QUEUE_DEPTH_MAX` requests wait (queued, or taken but not yet in a
//! batch): an appender waits, asynchronously, for room.

use crate::write::writer::AppendRequest;
use apollo11_core::limits;
use apollo11_store::StoreError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread::Thread;
use tokio::sync::Semaphore;

/// Requests waiting for the writer.
pub struct Queue {
    state: Mutex<State>,
    /// One permit per request that may still wait; the writer returns them once it has put
    /// requests into a batch.
    room: Semaphore,
    /// The writer's thread, once it runs.
    writer: OnceLock<Thread>,
    /// Set by the writer before it sleeps for want of requests (and at first, when it starts
    /// asleep): the next push wakes it.
    wanted: AtomicBool,
}

struct State {
    requests: Vec<AppendRequest>,
    /// Set when the writer stops taking requests: what every later push is answered.
    closed: Option<StoreError>,
}

impl Queue {
    /// An empty, open queue.
    pub fn new() -> Queue {
        Queue {
            state: Mutex::new(State {
                requests: Vec::new(),
                closed: None,
            }),
            room: Semaphore::new(limits::QUEUE_DEPTH_MAX as usize),
            writer: OnceLock::new(),
            // The writer starts asleep, woken by the first push.
            wanted: AtomicBool::new(true),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `request` once there is room, and wakes the writer.
    ///
    /// # Errors
    ///
    /// The error the queue was closed with, when the writer no longer takes requests.
    pub async fn push(&self, request: AppendRequest) -> Result<(), StoreError> {
        if let Ok(permit) = self.room.acquire().await {
            permit.forget();
        }
        let mut state = self.state();
        if let Some(error) = &state.closed {
            return Err(error.clone());
        }
        state.requests.push(request);
        drop(state);
        if self.wanted.swap(false, Ordering::SeqCst) {
            self.wake();
        }
        Ok(())
    }

    /// Names the writer thread, the one pushes wake: call it before any push.
    pub fn attach(&self, writer: Thread) {
        let _ = self.writer.set(writer);
    }

    /// Wakes the writer (for a reason of its own: a sync ended, the queue closed).
    pub fn wake(&self) {
        if let Some(writer) = self.writer.get() {
            writer.unpark();
        }
    }

    /// Says the writer is about to sleep for want of requests, so that the next push wakes
    /// it; call it before the last `take` that finds nothing.
    pub fn want(&self) {
        self.wanted.store(true, Ordering::SeqCst);
    }

    /// Moves every queued request to the end of `into`; whether the queue is closed.
    pub fn take(&self, into: &mut std::collections::VecDeque<AppendRequest>) -> bool {
        let mut state = self.state();
        into.extend(state.requests.drain(..));
        state.closed.is_some()
    }

    /// Whether no request is queued.
    pub fn is_empty(&self) -> bool {
        self.state().requests.is_empty()
    }

    /// Whether no request is queued and the queue is open: an append may go past it.
    pub fn is_idle(&self) -> bool {
        let state = self.state();
        state.requests.is_empty() && state.closed.is_none()
    }

    /// Gives back the room of `n` requests the writer has put into a batch.
    pub fn release(&self, n: usize) {
        if n > 0 {
            self.room.add_permits(n);
        }
    }

    /// Stops taking requests: every later push fails with `error`, and appenders waiting
    /// for room are let through to see it. What is queued stays for the writer to take.
    pub fn close(&self, error: StoreError) {
        self.state().closed.get_or_insert(error);
        self.room.close();
        self.wake();
    }
}
