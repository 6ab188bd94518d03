//! What a step is to the engine: an async `run`, an optional `compensate`, and the context
//! both receive.

use crate::{Try, TryKind};
use apollo11_author::Scope;
use apollo11_core::{fingerprint, limits, FailureClass, RunId, StepName, Usage, Value};
pub use apollo11_machine::Place;
use async_trait::async_trait;
use std::fmt;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot, watch};

/// One step of a workflow, written in Rust.
///
/// `run` must be safe to call again for the same run and step, as its idempotency class
/// promises: the engine reruns steps that were interrupted by a crash. A step with a
/// compensation overrides `compensate` and returns true from `has_compensation`.
///
/// A try's code (`run`, `compensate`, `adopt`) runs on its run's driver until it first
/// waits (an `.await` on something not ready yet), and on in a task of its own from there:
/// a step that finishes without waiting costs no task. As in any async code, long
/// computation or blocking calls belong in `tokio::task::spawn_blocking`; before a try's
/// first wait they would also hold up its run's driver (`tokio::task::yield_now().await`
/// first moves the rest of the try into its own task).
#[async_trait]
pub trait Step: Send + Sync + 'static {
    /// Does the step's work.
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError>;

    /// Undoes the step's effects. Must be idempotent: it may run more than once.
    async fn compensate(&self, ctx: &StepContext) -> Result<(), StepError> {
        let _ = ctx;
        Err(StepError::fatal("this step has no compensation"))
    }

    /// Whether `compensate` is implemented.
    fn has_compensation(&self) -> bool {
        false
    }

    /// Settles a try the engine is about to record as failed though it may not have ended:
    /// one a dead engine left running (found on resume) or one past its timeout. Stop what
    /// may still run of it (the place it recorded with [`StepContext::placed`], if it did)
    /// and return its last marker, which the failure records for the next attempt; or say
    /// the place cannot be reached, and the run is paused for a person rather than run the
    /// step again (or compensate it) while the old try may still be at work. The default
    /// has nothing to stop and no marker: a step that starts nothing outside its own future
    /// is stopped when the engine drops it.
    async fn settle(&self, leftover: &Leftover) -> Settled {
        let _ = leftover;
        Settled::Stopped {
            marker: None,
            used: None,
        }
    }

    /// Whether the step can watch the try a dead engine left at `leftover.place` to its end
    /// ([`Step::adopt`]) rather than have it settled: true for a try on a worker that still
    /// reports. The default: no.
    fn can_adopt(&self, leftover: &Leftover) -> bool {
        let _ = leftover;
        false
    }

    /// Watches a try a dead engine left running to its end, as `run` (or for a
    /// compensation, `compensate`: its output is then ignored) would have; called on resume
    /// for each try [`Step::can_adopt`] accepts. The try is not started again.
    async fn adopt(&self, ctx: &StepContext, leftover: &Leftover) -> Result<Output, StepError> {
        let _ = (ctx, leftover);
        Err(StepError::lost("this step cannot adopt a try"))
    }
}

/// A try that the engine no longer watches and is about to record as failed.
#[derive(Clone, Debug)]
pub struct Leftover {
    /// The run.
    pub run_id: RunId,
    /// The step.
    pub step: StepName,
    /// The attempt.
    pub attempt: u32,
    /// A run of the step or a try of its compensation.
    pub kind: TryKind,
    /// Where it runs, if it recorded that before the engine lost it.
    pub place: Option<Place>,
    /// When it started, as its run's log says (ms since the Unix epoch).
    pub started_ms: u64,
}

/// What [`Step::settle`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settled {
    /// Nothing of the try runs any more; what it last left for its next attempt, if
    /// anything (ignored for a compensation).
    Stopped {
        /// The marker (for a `checkpoint` step, where to resume from).
        marker: Option<Vec<u8>>,
        /// What the try used, when what held it still knows (a cgroup a dead engine left):
        /// recorded as its `AttemptUsage`.
        used: Option<Usage>,
    },
    /// The try may still run where it cannot be stopped from here (another host, a
    /// service that does not answer): the engine records the failure with no marker and
    /// pauses the run with this reason, for a person to make sure it stopped.
    Unreachable {
        /// Why, naming the place.
        reason: String,
    },
}

/// A step's request to record where its try runs, answered once the `Placed` event is
/// durable (or with why it was not recorded).
pub(crate) struct PlaceRequest {
    pub tried: Try,
    pub place: Place,
    /// What runs there, in the step's own words: the `Placed` event's payload.
    pub detail: Vec<u8>,
    pub ack: oneshot::Sender<Result<(), String>>,
}

/// How a try reaches its driver to record its place.
#[derive(Clone, Debug)]
pub(crate) struct Placer {
    pub requests: mpsc::Sender<PlaceRequest>,
    pub kind: TryKind,
}

/// Called once a try's outcome is durable in the log (see [`StepContext::when_recorded`]).
pub(crate) type RecordedHook = Box<dyn FnOnce() + Send + Sync>;

/// What a step attempt (or compensation) gets from the engine.
#[derive(Clone)]
pub struct StepContext {
    /// The run.
    pub run_id: RunId,
    /// The step.
    pub step: StepName,
    /// The attempt (1 for the first).
    pub attempt: u32,
    /// `run_id/step`: stable across attempts and crashes, for steps that dedupe.
    pub idempotency_key: String,
    /// The payload the previous attempt recorded (its output, or the marker it left when
    /// failing): what a `checkpoint` step resumes from.
    pub previous_payload: Option<Vec<u8>>,
    /// For a compensation: the output the step recorded when it succeeded.
    pub output: Option<Vec<u8>>,
    /// Fires when the attempt is cancelled (timeout, shutdown).
    pub cancel: Cancel,
    /// The driver that records where the try runs.
    pub(crate) placer: Option<Placer>,
    /// What templates and conditions of the attempt read.
    pub(crate) scope: Scope,
    /// Where [`StepContext::when_recorded`] leaves its hook for the driver.
    pub(crate) recorded: Arc<Mutex<Option<RecordedHook>>>,
    /// The memory limit this attempt runs with in place of the step's own, in bytes: set
    /// when a retry after an `oom` grew it (the class's `memory_factor_pct`); `None` for
    /// the step's own, and for a compensation.
    pub memory_limit: Option<u64>,
    /// Where [`StepContext::used`] leaves what the try used, for its outcome's events.
    pub(crate) usage: Arc<Meter>,
}

/// What a try used, as its step records it, shared by its context and its driver: the
/// driver that stops a try whose step promised to measure it even then
/// ([`StepContext::measures_when_stopped`]) waits for the record.
#[derive(Default)]
pub(crate) struct Meter {
    usage: Mutex<Option<Usage>>,
    promised: std::sync::atomic::AtomicBool,
    recorded: tokio::sync::Notify,
}

impl Meter {
    /// What the try recorded so far.
    pub fn usage(&self) -> Option<Usage> {
        (self.usage.lock())
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn record(&self, usage: Usage) {
        let mut slot = (self.usage.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Some(usage);
        self.recorded.notify_one();
    }

    /// Whether the try's step promised to record its usage once stopped.
    pub fn promised(&self) -> bool {
        self.promised.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Waits until the try records its usage, then answers it.
    pub async fn recorded(&self) -> Usage {
        loop {
            if let Some(usage) = self.usage() {
                return usage;
            }
            // A record made after the check left a permit: this returns at once.
            self.recorded.notified().await;
        }
    }
}

impl fmt::Debug for StepContext {
    /// Everything but the secrets' values, which never go into a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secrets: Vec<&String> = self.scope.secrets.keys().collect();
        f.debug_struct("StepContext")
            .field("run_id", &self.run_id)
            .field("step", &self.step)
            .field("attempt", &self.attempt)
            .field("idempotency_key", &self.idempotency_key)
            .field("previous_payload", &self.previous_payload)
            .field("output", &self.output)
            .field("arguments", &self.scope.arguments)
            .field("secrets", &secrets)
            .field("inputs", &self.scope.outputs.keys().collect::<Vec<_>>())
            .field("item", &self.scope.item)
            .field("wave", &self.scope.wave)
            .finish_non_exhaustive()
    }
}

impl StepContext {
    /// The value of the run's parameter `name` (given at start, or its default); `None`
    /// for a parameter the workflow does not declare and for a secret, whose value is in
    /// [`StepContext::scope`] only.
    pub fn param(&self, name: &str) -> Option<&Value> {
        self.scope.arguments.get(name)
    }

    /// The output `step` recorded when it succeeded, read from the store (its blob fetched
    /// and checked) before the attempt started; `None` when it recorded none or is not one
    /// this step may read: a step it depends on, by name, and, for a step a `for_each`
    /// made, the step made from the same item of a declaration it depends on, by the
    /// declaration's name (`input("drain")` in `upgrade[host-01]` reads `drain[host-01]`).
    pub fn input(&self, step: &str) -> Option<&[u8]> {
        self.scope.outputs.get(step).map(Vec::as_slice)
    }

    /// The item of a step a `for_each` made; `None` for any other step.
    pub fn item(&self) -> Option<&Value> {
        self.scope.item.as_ref()
    }

    /// Everything templates and conditions of this attempt read: the run's arguments, the
    /// secrets (read from their sources for this attempt), the run's id, the outputs and
    /// statuses of the steps this one may read, its item and its wave.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Records where this try runs (`host`, and a `handle` in the step's own format that
    /// finds the work there), and returns once the record is durable. A step whose work can
    /// outlive the engine (a child process, a remote job) calls it after starting the work
    /// and before letting it act, so that a later engine can find it with
    /// [`Step::settle`]. An error means nothing was recorded (the try is no longer
    /// current, the engine stopped, or the text is too long): the work must not act.
    ///
    /// # Errors
    ///
    /// A fatal [`StepError`] saying which of the reasons above it was.
    pub async fn placed(&self, host: &str, handle: &str) -> Result<(), StepError> {
        self.placed_with(host, handle, Vec::new()).await
    }

    /// Calls `hook` once the outcome this try returns is durable in the log, so that a
    /// place that keeps the result until then (a worker) may forget it. The hook is dropped
    /// uncalled when the outcome is never recorded: the engine stopped first, or the try was
    /// decided otherwise. A later call replaces an earlier hook.
    pub fn when_recorded(&self, hook: impl FnOnce() + Send + Sync + 'static) {
        let mut slot = (self.recorded.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Some(Box::new(hook));
    }

    /// Records what this try used, appended as an `AttemptUsage` event just before its
    /// outcome. A later call replaces an earlier one.
    pub fn used(&self, usage: Usage) {
        self.usage.record(usage);
    }

    /// Promises that this try records what it used ([`StepContext::used`]) even when the
    /// engine stops it before its end (its timeout): it then stops its work on
    /// [`StepContext::cancel`] at once, measures it, and records that. The engine, which
    /// otherwise drops a stopped try at once, waits a short while for that record and
    /// appends it with the try's end. A step calls it once its work runs.
    pub fn measures_when_stopped(&self) {
        (self.usage.promised).store(true, std::sync::atomic::Ordering::Release);
    }

    /// The hook [`StepContext::when_recorded`] left, taken.
    pub(crate) fn take_recorded(&self) -> Option<RecordedHook> {
        let mut slot = (self.recorded.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.take()
    }

    /// [`StepContext::placed`], with what the try runs there in the step's own words
    /// (`detail`: for a shell step, its command as rendered and its folder), recorded as the
    /// `Placed` event's payload for front ends to show; one over the inline limit goes to
    /// the blob store. It must hold nothing secret: the log keeps it.
    ///
    /// # Errors
    ///
    /// As [`StepContext::placed`].
    pub async fn placed_with(
        &self,
        host: &str,
        handle: &str,
        detail: Vec<u8>,
    ) -> Result<(), StepError> {
        let max = limits::LABEL_BYTES_MAX as usize;
        for (what, text) in [("host", host), ("place handle", handle)] {
            if text.len() > max {
                return Err(StepError::fatal(format!(
                    "the {what} of step `{}` is {} bytes, over the limit of {max}",
                    self.step,
                    text.len()
                )));
            }
        }
        let placer = self.placer.as_ref().ok_or_else(|| {
            StepError::fatal("this context was not made by an engine: nowhere to record a place")
        })?;
        let stopped =
            || StepError::retryable("the engine stopped before recording where the step runs");
        let (ack, answer) = oneshot::channel();
        let request = PlaceRequest {
            tried: Try::of(&self.step, self.attempt, placer.kind),
            place: Place {
                host: host.to_owned(),
                handle: handle.to_owned(),
            },
            detail,
            ack,
        };
        // Waits for room when the driver has `PLACE_REQUESTS_MAX` requests to answer.
        placer.requests.send(request).await.map_err(|_| stopped())?;
        answer
            .await
            .map_err(|_| stopped())?
            .map_err(StepError::retryable)
    }
}

/// A cancellation signal.
#[derive(Clone, Debug)]
pub struct Cancel(watch::Receiver<bool>);

impl Cancel {
    pub(crate) fn new() -> (watch::Sender<bool>, Cancel) {
        let (tx, rx) = watch::channel(false);
        (tx, Cancel(rx))
    }

    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes when cancelled.
    pub async fn cancelled(&mut self) {
        // An error means the engine dropped the attempt: that is a cancellation too.
        let _ = self.0.wait_for(|c| *c).await;
    }
}

/// What a successful attempt records: bytes (JSON when the step has structure to report).
/// Payloads over the inline limit go to the blob store; nothing is truncated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output(pub Vec<u8>);

impl Output {
    /// No output.
    pub fn empty() -> Output {
        Output(Vec::new())
    }

    /// Output as text.
    pub fn text(s: impl Into<String>) -> Output {
        Output(s.into().into_bytes())
    }
}

/// Why an attempt failed, and whether trying again may help.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepError {
    /// What went wrong.
    pub message: String,
    /// False when a retry cannot help.
    pub retryable: bool,
    /// Recorded with the failure: a `checkpoint` step's marker for its next attempt.
    pub payload: Option<Vec<u8>>,
    /// The try may still be at work where the step lost sight of it (a worker that stopped
    /// answering): a step of class `compensate` is then paused for a person instead of
    /// being compensated and run again.
    pub may_still_run: bool,
    /// The failure's class; `None` is `error`, a failure of no more precise class. The
    /// step's retry policy may differ by class.
    pub class: Option<FailureClass>,
    /// The failure's fingerprint ([`apollo11_core::fingerprint`]); 0 for none. The same
    /// class and fingerprint on consecutive attempts is a deterministic failure: the
    /// retries stop.
    pub fingerprint: u64,
    /// The delay before the next attempt the step asks for, in milliseconds: honoured up
    /// to its retry policy's `max_ms` (of the failure's class), recorded on the failure.
    pub retry_after_ms: Option<u64>,
}

impl StepError {
    /// A failure worth retrying.
    pub fn retryable(message: impl Into<String>) -> StepError {
        StepError {
            message: message.into(),
            retryable: true,
            payload: None,
            may_still_run: false,
            class: None,
            fingerprint: 0,
            retry_after_ms: None,
        }
    }

    /// A failure no retry can fix.
    pub fn fatal(message: impl Into<String>) -> StepError {
        StepError {
            retryable: false,
            ..StepError::retryable(message)
        }
    }

    /// A try the step lost sight of, which may still be at work: retryable, and a step of
    /// class `compensate` pauses its run for a person (see [`StepError::may_still_run`]).
    pub fn lost(message: impl Into<String>) -> StepError {
        StepError {
            may_still_run: true,
            class: Some(FailureClass::WorkerLost),
            ..StepError::retryable(message)
        }
    }

    /// The failure, of class `class`.
    pub fn with_class(mut self, class: FailureClass) -> StepError {
        self.class = Some(class);
        self
    }

    /// The failure, with the fingerprint of `lines` (the last lines of what it printed) and
    /// its class: see [`apollo11_core::fingerprint`].
    pub fn with_fingerprint(mut self, lines: &str) -> StepError {
        self.fingerprint = fingerprint(&self.class(), lines);
        self
    }

    /// The failure, asking for its next attempt `delay` after it (within the retry
    /// policy's `max_ms`) instead of the backoff's delay.
    pub fn with_retry_after(mut self, delay: std::time::Duration) -> StepError {
        self.retry_after_ms = Some(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// The failure's class (`error` when none was given).
    pub fn class(&self) -> FailureClass {
        self.class.clone().unwrap_or(FailureClass::Error)
    }

    /// Attaches a marker for the next attempt (for `checkpoint` steps).
    pub fn with_payload(mut self, payload: Vec<u8>) -> StepError {
        self.payload = Some(payload);
        self
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StepError {}
