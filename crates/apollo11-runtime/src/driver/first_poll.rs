//! A try's first poll, on the driver's own task: a try that finishes there (an in-process
//! step with nothing to wait for) costs no task of its own, no trip through the runtime's
//! scheduler and no wake-up of another worker thread to steal it; one that has to wait goes
//! on in a task of its own, as every try did before.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// A try's work, boxed so that it can move into a task after its first poll.
pub(super) type Work<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What a first poll came to.
pub(super) enum Polled<T> {
    /// The try finished.
    Done(T),
    /// The try waits: to be spawned, and polled again there.
    Waits(Work<T>),
    /// The try panicked, with this message.
    Panicked(String),
}

/// Polls `work` once. Whatever it registered to be woken by is registered with a waker that
/// does nothing; a future registers the waker of each poll, so the task that takes it on
/// polls it at once and is woken from then on.
pub(super) fn poll_once<T>(mut work: Work<T>) -> Polled<T> {
    let mut cx = Context::from_waker(Waker::noop());
    match catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(&mut cx))) {
        Ok(Poll::Ready(done)) => Polled::Done(done),
        Ok(Poll::Pending) => Polled::Waits(work),
        Err(panic) => Polled::Panicked(panic_message(&*panic)),
    }
}

/// The message a panic carried, as a panic's hook prints it.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(message), _) => (*message).to_owned(),
        (_, Some(message)) => message.clone(),
        _ => "a panic without a message".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_poll_finishes_waits_or_catches_a_panic() {
        assert!(matches!(poll_once(Box::pin(async { 7 })), Polled::Done(7)));
        let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
        let Polled::Waits(mut work) = poll_once(Box::pin(async move { rx.await.unwrap() })) else {
            panic!("a future waiting on a channel finished");
        };
        tx.send(3).unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(work.as_mut().poll(&mut cx), Poll::Ready(3));
        let Polled::Panicked(message) = poll_once(Box::pin(async { panic!("step {} broke", 4) }))
        else {
            panic!("a panic was not caught");
        };
        assert_eq!(message, "step 4 broke");
        let Polled::Panicked(message) = poll_once(Box::pin(async { panic!("plain") })) else {
            panic!("a panic was not caught");
        };
        assert_eq!(message, "plain");
    }
}
