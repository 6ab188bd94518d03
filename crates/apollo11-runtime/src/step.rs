//! What a step is to the engine: an async `run`, an optional `compensate`, and the context
//! both receive.

use apollo11_core::{RunId, StepName};
use async_trait::async_trait;
use std::fmt;
use tokio::sync::watch;

/// One step of a workflow, written in Rust.
///
/// `run` must be safe to call again for the same run and step, as its idempotency class
/// promises: the engine reruns steps that were interrupted by a crash. A step with a
/// compensation overrides `compensate` and returns true from `has_compensation`.
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
}

/// What a step attempt (or compensation) gets from the engine.
#[derive(Clone, Debug)]
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
}

impl StepError {
    /// A failure worth retrying.
    pub fn retryable(message: impl Into<String>) -> StepError {
        StepError {
            message: message.into(),
            retryable: true,
            payload: None,
        }
    }

    /// A failure no retry can fix.
    pub fn fatal(message: impl Into<String>) -> StepError {
        StepError {
            message: message.into(),
            retryable: false,
            payload: None,
        }
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
