//! Steps placed on simulated workers, the engine's side: the dispatcher of the generation
//! running now (it dies with the generation, as a server's does with its process), a
//! placed attempt submitted to it and watched to its end, a try a dead generation left
//! adopted or settled through it.

use crate::scenario::Behaviour;
use apollo11_dispatch::{Config, Dispatcher, Labels, TaskEvent, Ticket, TryRef};
use apollo11_runtime::{Leftover, Output, Place, Settled, StepContext, StepError};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// A worker silent this long is lost, with its tries.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_millis(50);
/// How often a worker says it is alive.
pub const HEARTBEAT_EVERY: Duration = Duration::from_millis(10);

/// The dispatcher of the generation running now, if one runs: what steps submit to and
/// workers reach, as the server that holds it.
#[derive(Clone, Default)]
pub struct Post(Arc<watch::Sender<Option<Dispatcher>>>);

impl Post {
    /// Generation `g`'s dispatcher, knowing nothing of the last one's; its tokens derive
    /// from `g`, so that a seed replays byte for byte.
    pub fn open(&self, g: usize) {
        let config = Config {
            heartbeat_timeout: HEARTBEAT_TIMEOUT,
            adopt_grace: 5 * HEARTBEAT_TIMEOUT,
            token_seed: Some(g as u64 + 1),
        };
        self.0.send_replace(Some(Dispatcher::new(config)));
    }

    /// The generation's end: its dispatcher goes with it.
    pub fn close(&self) {
        self.0.send_replace(None);
    }

    /// The dispatcher up now.
    pub fn now(&self) -> Option<Dispatcher> {
        self.0.borrow().clone()
    }

    /// The dispatcher up now, or the next one once it is.
    pub async fn up(&self) -> Dispatcher {
        let mut changes = self.0.subscribe();
        loop {
            if let Some(dispatcher) = changes.borrow_and_update().clone() {
                return dispatcher;
            }
            // The sender lives as long as `self`.
            let _ = changes.changed().await;
        }
    }
}

/// What every simulated worker carries and every placed step needs.
pub fn labels() -> Labels {
    Labels::from([("pool".to_owned(), "sim".to_owned())])
}

/// What a worker is sent: what the attempt does, and its output if it succeeds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// What the attempt does.
    pub behaviour: Behaviour,
    /// Its output on success.
    pub output: Vec<u8>,
}

impl Job {
    /// `kind ms output`, the kind a letter.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, ms) = match self.behaviour {
            Behaviour::Succeed(ms) => ('s', ms),
            Behaviour::Slow(ms) => ('w', ms),
            Behaviour::Retryable(ms) => ('r', ms),
            Behaviour::Fatal(ms) => ('f', ms),
            Behaviour::Hang => ('h', 0),
        };
        let mut bytes = format!("{kind} {ms} ").into_bytes();
        bytes.extend_from_slice(&self.output);
        bytes
    }

    /// The job [`Job::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Option<Job> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut parts = text.splitn(3, ' ');
        let kind = parts.next()?;
        let ms: u64 = parts.next()?.parse().ok()?;
        let behaviour = match kind {
            "s" => Behaviour::Succeed(ms),
            "w" => Behaviour::Slow(ms),
            "r" => Behaviour::Retryable(ms),
            "f" => Behaviour::Fatal(ms),
            "h" => Behaviour::Hang,
            _ => return None,
        };
        let output = parts.next()?.as_bytes().to_vec();
        Some(Job { behaviour, output })
    }
}

/// How a try ended on its worker, as reported: `ok OUTPUT`, `retryable`, `fatal`.
pub fn outcome(result: &Result<Vec<u8>, bool>) -> Vec<u8> {
    match result {
        Ok(output) => [b"ok ".as_slice(), output].concat(),
        Err(true) => b"retryable".to_vec(),
        Err(false) => b"fatal".to_vec(),
    }
}

fn result(outcome: &[u8]) -> Result<Output, StepError> {
    match outcome {
        [b'o', b'k', b' ', output @ ..] => Ok(Output(output.to_vec())),
        b"retryable" => Err(StepError::retryable(
            "simulated retryable failure on a worker",
        )),
        b"fatal" => Err(StepError::fatal("simulated fatal failure on a worker")),
        _ => Err(StepError::fatal("a worker's outcome does not parse")),
    }
}

/// The worker and token a place names: `WORKER TOKEN`.
fn handle(place: &Place) -> Option<(&str, &str)> {
    place.handle.split_once(' ')
}

fn try_of(ctx: &StepContext) -> TryRef {
    TryRef {
        run_id: ctx.run_id.as_str().to_owned(),
        step: ctx.step.as_str().to_owned(),
        attempt: ctx.attempt,
        compensation: false,
    }
}

/// Runs `job` on a worker of this generation's dispatcher, recording its place.
///
/// # Errors
///
/// The try's failure as its worker reported it; `worker_lost` when its worker went silent.
pub async fn dispatch(post: &Post, ctx: &StepContext, job: &Job) -> Result<Output, StepError> {
    let dispatcher = (post.now()).ok_or_else(|| StepError::retryable("no dispatcher is up"))?;
    let mut ticket = dispatcher.submit(labels(), try_of(ctx), job.encode());
    let worker = match ticket.next().await {
        TaskEvent::Taken { worker } => worker,
        other => return Err(out_of_order(&other)),
    };
    watch(ticket, &worker, ctx, true).await
}

/// Watches a try a dead generation left on a worker to its end.
///
/// # Errors
///
/// As [`dispatch`].
pub async fn adopt(
    post: &Post,
    ctx: &StepContext,
    leftover: &Leftover,
) -> Result<Output, StepError> {
    let (worker, token) = (leftover.place.as_ref())
        .and_then(handle)
        .ok_or_else(|| StepError::lost("the try's place names no worker"))?;
    let dispatcher = (post.now()).ok_or_else(|| StepError::lost("no dispatcher is up"))?;
    let ticket = dispatcher.adopt(token, worker, try_of(ctx));
    watch(ticket, worker, ctx, false).await
}

/// Whether `leftover` ran on a worker.
pub fn on_worker(leftover: &Leftover) -> bool {
    leftover.place.as_ref().and_then(handle).is_some()
}

/// Stops a try on a worker and waits until the worker lets it go.
pub async fn settle(post: &Post, leftover: &Leftover) -> Settled {
    let place = leftover.place.as_ref().and_then(handle);
    let stopped = match (place, post.now()) {
        (Some((worker, token)), Some(dispatcher)) => dispatcher.stop(worker, token).await,
        _ => Err("no dispatcher knows its worker".to_owned()),
    };
    match stopped {
        Ok(_) => Settled::Stopped {
            marker: None,
            used: None,
        },
        Err(reason) => Settled::Unreachable { reason },
    }
}

/// Follows a taken try to its end; `placing`: whether its place is still to be recorded
/// (an adopted try started long ago).
async fn watch(
    mut ticket: Ticket,
    worker: &str,
    ctx: &StepContext,
    placing: bool,
) -> Result<Output, StepError> {
    loop {
        match ticket.next().await {
            TaskEvent::Started { host, ack, .. } => {
                let recorded = if placing {
                    let handle = format!("{worker} {}", ticket.token());
                    ctx.placed(&host, &handle).await
                } else {
                    Err(StepError::fatal("an adopted try cannot start again"))
                };
                let _ = ack.send(recorded.as_ref().map(|_| ()).map_err(|e| e.message.clone()));
                recorded?;
            }
            TaskEvent::Finished { outcome, recorder } => {
                ctx.when_recorded(move || recorder.recorded());
                return result(&outcome);
            }
            TaskEvent::Lost { reason } => {
                return Err(StepError::lost(format!("worker_lost: {reason}")))
            }
            other @ TaskEvent::Taken { .. } => return Err(out_of_order(&other)),
        }
    }
}

fn out_of_order(event: &TaskEvent) -> StepError {
    StepError::retryable(format!("the dispatcher sent {event:?} out of order"))
}
