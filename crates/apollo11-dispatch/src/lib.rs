//! The queue between an engine and its workers.
//!
//! A step placed by labels [`Dispatcher::submit`]s its try and holds the [`Ticket`]: it
//! learns through it that a worker took the try, that the try started there (answered once
//! the engine recorded the place), and how it ended, or that its worker was lost. Workers
//! [`Dispatcher::take`] tries whose labels they carry (a long poll), [`Dispatcher::heartbeat`]
//! with the tries they hold, and report [`Dispatcher::started`] and [`Dispatcher::finish`].
//!
//! Every report carries the try's token; a report for a try that is no longer wanted (its
//! ticket dropped: timed out, cancelled, its worker declared lost) is refused and never
//! reaches the step; a report repeated after it was taken is accepted once. A worker that
//! holds a try the dispatcher does not know (the engine restarted) keeps it for
//! [`Config::adopt_grace`], long enough for the engine's driver to [`Dispatcher::adopt`] it
//! from the place its log recorded; after that it is told to stop it.

mod inbox;
pub mod metrics;
mod state;
mod view;

pub use state::Refusal;
pub use view::{QueuedView, WorkerView};

use serde::{Deserialize, Serialize};
use state::State;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{oneshot, watch, Notify};
use tokio::time::Instant;

/// Labels: what a worker carries, what a try needs (`role=db`, `host=host-07`).
pub type Labels = BTreeMap<String, String>;

/// How the dispatcher judges workers.
#[derive(Clone, Debug)]
pub struct Config {
    /// A worker silent this long is lost, with its tries.
    pub heartbeat_timeout: Duration,
    /// How long a try a worker holds and nobody has adopted is kept before the worker is
    /// told to stop it (after an engine's restart, its drivers adopt what they find).
    pub adopt_grace: Duration,
    /// What tries' tokens derive from; `None` (the default): the clock and a
    /// process-random hash, so that tokens differ across engines and restarts. A
    /// simulation that replays byte for byte gives one per dispatcher.
    pub token_seed: Option<u64>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            heartbeat_timeout: Duration::from_secs(15),
            adopt_grace: Duration::from_secs(60),
            token_seed: None,
        }
    }
}

/// A worker, as it says in each call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Its name, unique among the workers of a server.
    pub name: String,
    /// The labels it carries.
    pub labels: Labels,
    /// How many tries it runs at once.
    pub slots: u32,
    /// Its version.
    pub version: String,
}

/// Which try a task is: for the routes that file its log and for the views.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TryRef {
    /// The run.
    pub run_id: String,
    /// The step.
    pub step: String,
    /// The attempt.
    pub attempt: u32,
    /// A try of the step's compensation.
    pub compensation: bool,
}

/// A try offered to a worker.
#[derive(Clone, Debug)]
pub struct Offer {
    /// The try's token: every report about it names it.
    pub token: String,
    /// Which try.
    pub what: TryRef,
    /// What to run, in the submitter's format.
    pub job: Arc<[u8]>,
}

/// What happens to a submitted try, in order: `Taken`, `Started`, then `Finished`; or
/// `Lost` at any point after `Taken`.
#[derive(Debug)]
pub enum TaskEvent {
    /// A worker took it.
    Taken {
        /// The worker.
        worker: String,
    },
    /// Its process started on the worker, gated: answer once its place is recorded (`Ok`)
    /// or why it must not run (`Err`); the worker starts the work only on `Ok`.
    Started {
        /// The worker's host.
        host: String,
        /// What finds the process there.
        handle: String,
        /// The answer.
        ack: oneshot::Sender<Result<(), String>>,
    },
    /// It ended; the outcome in the worker's format. The worker keeps it until the
    /// [`Recorder`] says it is durable (dropped unsaid: the worker reports it again).
    Finished {
        /// The outcome.
        outcome: Vec<u8>,
        /// Tells the worker that the engine recorded it.
        recorder: Recorder,
    },
    /// Its worker was silent past the heartbeat timeout: the try may still run there.
    Lost {
        /// Why, naming the worker.
        reason: String,
    },
}

/// The engine's side of a finished try's result.
#[derive(Debug)]
pub struct Recorder(watch::Sender<bool>);

impl Recorder {
    /// The result is durable in the engine's log: the worker may forget it.
    pub fn recorded(self) {
        let _ = self.0.send(true);
    }
}

/// A submitted or adopted try, as its step holds it. Dropping it withdraws the try: a
/// queued one leaves the queue, a taken one is cancelled at its worker's next heartbeat.
pub struct Ticket {
    token: String,
    events: inbox::Receiver,
    dispatcher: Weak<Shared>,
}

impl Ticket {
    /// The try's token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The next thing that happened to the try; `Lost` when the dispatcher is gone.
    pub async fn next(&mut self) -> TaskEvent {
        self.events.recv().await.unwrap_or_else(|| TaskEvent::Lost {
            reason: "the dispatcher let the try go (stopped, or shutting down)".to_owned(),
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(shared) = self.dispatcher.upgrade() {
            shared.lock().withdraw(&self.token);
        }
    }
}

struct Shared {
    config: Config,
    state: Mutex<State>,
    /// Woken when a try is queued.
    arrived: Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is left consistent between statements: a panic elsewhere does not
        // make it unusable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The queue; clones share it.
#[derive(Clone)]
pub struct Dispatcher(Arc<Shared>);

impl Dispatcher {
    /// A dispatcher; its reaper (lost workers, orphans past their grace) runs on the
    /// current tokio runtime until the last clone is dropped.
    pub fn new(config: Config) -> Dispatcher {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(config.token_seed)),
            arrived: Notify::new(),
            config,
        });
        metrics::started();
        let weak = Arc::downgrade(&shared);
        let every = shared.config.heartbeat_timeout / 4;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(shared) = weak.upgrade() else { return };
                let config = shared.config.clone();
                shared.lock().reap(Instant::now(), &config);
            }
        });
        Dispatcher(shared)
    }

    /// Queues a try needing `needs` until a worker carrying them takes it.
    pub fn submit(&self, needs: Labels, what: TryRef, job: Vec<u8>) -> Ticket {
        let (tx, events) = inbox::inbox();
        let token = self
            .0
            .lock()
            .submit(needs, what, job.into(), tx, Instant::now());
        self.0.arrived.notify_waiters();
        Ticket {
            token,
            events,
            dispatcher: Arc::downgrade(&self.0),
        }
    }

    /// Takes over a try a previous engine placed on `worker` under `token` (its log's
    /// `Placed` says so): its worker's reports reach the ticket; a worker that does not
    /// report within the heartbeat timeout is lost, with the try.
    pub fn adopt(&self, token: &str, worker: &str, what: TryRef) -> Ticket {
        let (tx, events) = inbox::inbox();
        self.0.lock().adopt(token, worker, what, tx, Instant::now());
        Ticket {
            token: token.to_owned(),
            events,
            dispatcher: Arc::downgrade(&self.0),
        }
    }

    /// Up to `free` tries whose needs `hello`'s labels meet, oldest first; waits up to
    /// `wait` for one when none is queued. Its start counts as a heartbeat; a worker
    /// declared lost while it waits gets nothing from it (the answer may never reach it).
    pub async fn take(&self, hello: &Hello, free: u32, wait: Duration) -> Vec<Offer> {
        let deadline = Instant::now() + wait;
        let life = self.0.lock().seen(hello, Instant::now());
        loop {
            // Registered before looking, so a try queued in between wakes this poll.
            let arrived = self.0.arrived.notified();
            let offers = self.0.lock().take(hello, life, free);
            if !offers.is_empty() || free == 0 {
                return offers;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return Vec::new();
            }
        }
    }

    /// `hello` is alive and holds `running`; answers the tokens it must stop (tries
    /// withdrawn, given to another, or unknown past the adoption grace).
    pub fn heartbeat(&self, hello: &Hello, running: &[String]) -> Vec<String> {
        let grace = self.0.config.adopt_grace;
        self.0
            .lock()
            .heartbeat(hello, running, Instant::now(), grace)
    }

    /// The try `token` started on `worker` at `host`/`handle`; answers once its place is
    /// recorded, or why it must not run.
    pub async fn started(
        &self,
        worker: &str,
        token: &str,
        host: String,
        handle: String,
    ) -> Result<(), Refusal> {
        let (ack, answer) = oneshot::channel();
        let event = TaskEvent::Started { host, handle, ack };
        self.0.lock().report(worker, token, event, None)?;
        match answer.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(Refusal::Decided(reason)),
            Err(_) => Err(Refusal::Decided(
                "the engine withdrew the try before recording its place".to_owned(),
            )),
        }
    }

    /// The try `token` ended on `worker` with `outcome`; answers once the engine recorded
    /// it durably, or [`Refusal::NotRecorded`] when it did not within the heartbeat timeout
    /// (or stopped first): the worker keeps the result and reports it again. A report
    /// repeated once passed on is not passed on again; it waits for the same record. A
    /// refusal is counted by its name.
    pub async fn finish(&self, worker: &str, token: &str, outcome: Vec<u8>) -> Result<(), Refusal> {
        let (sender, recorded) = watch::channel(false);
        let recorder = Recorder(sender);
        let event = TaskEvent::Finished { outcome, recorder };
        let taken = (self.0.lock()).report(worker, token, event, Some(recorded));
        let answer = match taken {
            Ok(recorded) => {
                let mut recorded = recorded.expect("a final report answers its record");
                let wait = self.0.config.heartbeat_timeout;
                let waited = tokio::time::timeout(wait, recorded.wait_for(|done| *done))
                    .await
                    .map(|r| r.is_ok());
                match waited {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(Refusal::NotRecorded(
                        "the engine let the result go unrecorded (stopping, or the try was decided otherwise)".to_owned(),
                    )),
                    Err(_) => Err(Refusal::NotRecorded(format!(
                        "not recorded within {} s",
                        wait.as_secs_f64()
                    ))),
                }
            }
            Err(refusal) => Err(refusal),
        };
        if let Err(refusal) = &answer {
            metrics::refused(refusal.name());
        }
        answer
    }

    /// Stops the try `token` on `worker` (whether or not this dispatcher knew it) and waits
    /// until the worker's heartbeat no longer holds it. Answers the outcome the worker
    /// reported for the try once it had killed it, if it did (refused: it is not the try's
    /// result, but it says what the try used).
    ///
    /// # Errors
    ///
    /// Why it may still run: the worker is not connected, or was lost or stayed silent past
    /// the heartbeat timeout while it was waited for.
    pub async fn stop(&self, worker: &str, token: &str) -> Result<Option<Vec<u8>>, String> {
        self.0.lock().stop(worker, token);
        let deadline = Instant::now() + self.0.config.heartbeat_timeout;
        loop {
            if let Some(done) = self.0.lock().stopped(worker, token) {
                return done;
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "worker `{worker}` still held the try after the heartbeat timeout"
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Which try `token` is, while it is wanted.
    pub fn what(&self, worker: &str, token: &str) -> Option<TryRef> {
        self.0.lock().what(worker, token)
    }

    /// The workers heard from within the heartbeat timeout, by name.
    pub fn workers(&self) -> Vec<WorkerView> {
        self.0.lock().workers_view(Instant::now())
    }

    /// The tries waiting for a worker, by the labels they need.
    pub fn queued(&self) -> Vec<QueuedView> {
        self.0.lock().queued_view(Instant::now())
    }

    /// Workers declared lost since the dispatcher started.
    pub fn lost_workers(&self) -> u64 {
        self.0.lock().lost_workers
    }
}

#[cfg(test)]
mod tests;
