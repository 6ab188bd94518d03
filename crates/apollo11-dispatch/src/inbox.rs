//! A try's events, from the dispatcher to the step that holds its ticket: a short queue and
//! a wake-up. A try gets at most three events (taken, started, its end); a channel's first
//! block holds 32 and would be most of a queued try's memory.

use crate::TaskEvent;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

struct Inbox {
    events: Mutex<VecDeque<TaskEvent>>,
    arrived: Notify,
    /// The sending side is gone: no event will come.
    closed: AtomicBool,
}

/// The dispatcher's side.
pub(crate) struct Sender(Arc<Inbox>);

/// The ticket's side.
pub(crate) struct Receiver(Arc<Inbox>);

/// A connected pair.
pub(crate) fn inbox() -> (Sender, Receiver) {
    let inbox = Arc::new(Inbox {
        events: Mutex::new(VecDeque::new()),
        arrived: Notify::new(),
        closed: AtomicBool::new(false),
    });
    (Sender(inbox.clone()), Receiver(inbox))
}

impl Sender {
    /// Queues `event`; gives it back when the ticket is gone.
    pub fn send(&self, event: TaskEvent) -> Result<(), TaskEvent> {
        if Arc::strong_count(&self.0) == 1 {
            return Err(event);
        }
        (self.0.events.lock().unwrap_or_else(|p| p.into_inner())).push_back(event);
        self.0.arrived.notify_one();
        Ok(())
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
        self.0.arrived.notify_one();
    }
}

impl Receiver {
    /// The next event; `None` once the sender is gone and every event was taken.
    pub async fn recv(&mut self) -> Option<TaskEvent> {
        loop {
            let arrived = self.0.arrived.notified();
            if let Some(event) =
                (self.0.events.lock().unwrap_or_else(|p| p.into_inner())).pop_front()
            {
                return Some(event);
            }
            if self.0.closed.load(Ordering::Acquire) {
                return None;
            }
            arrived.await;
        }
    }
}
