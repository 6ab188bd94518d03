//! Shell steps placed on workers: a step's `on` labels (and its compensation's,
//! `compensate_on`, `on` by default) rendered for each try; the try's [`Job`] queued on the
//! engine's [`Dispatcher`] until a worker carrying the labels takes it (or `queue_timeout`
//! passes: class `no_worker`); its place recorded before the worker lets it act; its result
//! taken once. A worker lost with the try fails it with class `worker_lost`, as one that may
//! still run. A try a dead engine left on a worker is adopted from its place; one the
//! engine no longer wants is stopped at the worker's next heartbeat, and settling waits
//! until the worker says it is gone.

use super::command::render;
use super::job::{Job, Outcome};
use apollo11_author::{Mode, Scope};
use apollo11_core::{limits, FailureClass, StepSpec};
use apollo11_dispatch::{Dispatcher, Labels, TaskEvent, Ticket, TryRef};
use apollo11_runtime::{Leftover, Output, Place, Settled, StepContext, StepError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Step attribute: the labels a worker must carry to run the step, a JSON object of label
/// names to (templated) values.
pub const ON: &str = "on";
/// Step attribute: the labels for the step's compensation (the step's `on` when absent).
pub const COMPENSATE_ON: &str = "compensate_on";
/// Step attribute: how long a placed try may wait for a worker, in milliseconds.
pub const QUEUE_TIMEOUT: &str = "queue_timeout_ms";
/// How long a placed try waits for a worker when its step does not say.
pub const QUEUE_TIMEOUT_DEFAULT_MS: u64 = 10 * 60 * 1000;

/// Where a step's tries run, as its definition says.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    on: Option<BTreeMap<String, String>>,
    compensate_on: Option<BTreeMap<String, String>>,
    queue_timeout_ms: u64,
}

/// The place a try on a worker records: its `Placed` handle.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteHandle {
    /// The worker's name.
    pub worker: String,
    /// The try's token at the dispatcher.
    pub token: String,
    /// The process group on the worker, in the local executor's format.
    pub group: serde_json::Value,
}

impl RemoteHandle {
    /// The handle of a place, when it names a worker.
    pub fn of(place: &Place) -> Option<RemoteHandle> {
        serde_json::from_str(&place.handle).ok()
    }
}

impl Placement {
    /// The placement of `step`.
    pub fn of(step: &StepSpec) -> Placement {
        Placement::of_attributes(&step.attributes)
    }

    /// The placement a step's attributes say.
    pub(super) fn of_attributes(attributes: &BTreeMap<String, String>) -> Placement {
        let labels = |key| (attributes.get(key)).and_then(|t| serde_json::from_str(t).ok());
        Placement {
            on: labels(ON),
            compensate_on: labels(COMPENSATE_ON),
            queue_timeout_ms: (attributes.get(QUEUE_TIMEOUT))
                .and_then(|t| t.parse().ok())
                .unwrap_or(QUEUE_TIMEOUT_DEFAULT_MS),
        }
    }

    /// The labels a try needs, as written (templates); `None`: it runs in the engine.
    pub(super) fn written(&self, compensation: bool) -> Option<&BTreeMap<String, String>> {
        match compensation {
            true => self.compensate_on.as_ref().or(self.on.as_ref()),
            false => self.on.as_ref(),
        }
    }

    /// The labels a try needs, rendered for it; `None`: it runs in the engine.
    ///
    /// # Errors
    ///
    /// A fatal [`StepError`] naming a label whose template has no value, or that is empty
    /// or too long once rendered.
    pub fn needs(&self, compensation: bool, scope: &Scope) -> Result<Option<Labels>, StepError> {
        let Some(written) = self.written(compensation) else {
            return Ok(None);
        };
        let mut needs = Labels::new();
        for (name, text) in written {
            let value = render(text, scope, Mode::Plain)
                .map_err(|e| StepError::fatal(format!("label `{name}` = `{text}`: {e}")))?;
            if value.is_empty() || value.len() > limits::LABEL_BYTES_MAX as usize {
                return Err(StepError::fatal(format!(
                    "label `{name}` = `{text}` renders to {} bytes; a label's value is 1 to {} bytes",
                    value.len(),
                    limits::LABEL_BYTES_MAX
                )));
            }
            needs.insert(name.clone(), value);
        }
        Ok(Some(needs))
    }

    /// Runs `job` on a worker carrying `needs`, recording its place through `ctx`.
    ///
    /// # Errors
    ///
    /// The try's failure as the worker reported it; `no_worker` past the queue timeout;
    /// `worker_lost` (a try that may still run) when its worker stopped answering.
    ///
    /// # Panics
    ///
    /// Never: a job serializes.
    pub async fn dispatch(
        &self,
        dispatcher: &Dispatcher,
        needs: Labels,
        job: &Job,
        ctx: &StepContext,
    ) -> Result<Output, StepError> {
        let what = TryRef {
            run_id: job.run_id.clone(),
            step: job.step.clone(),
            attempt: job.attempt,
            compensation: job.compensation,
        };
        let body = serde_json::to_vec(job).expect("a job serializes");
        let mut ticket = dispatcher.submit(needs.clone(), what, body);
        let timeout = Duration::from_millis(self.queue_timeout_ms);
        let worker = match tokio::time::timeout(timeout, ticket.next()).await {
            Ok(TaskEvent::Taken { worker }) => worker,
            Ok(other) => return Err(unexpected(&other)),
            Err(_) => {
                let message = format!(
                    "no_worker: no worker with {} took the try within {}",
                    words(&needs),
                    humantime::format_duration(timeout)
                );
                return Err(StepError::retryable(message).with_class(FailureClass::NoWorker));
            }
        };
        watch(ticket, &worker, ctx, Some(job)).await
    }
}

/// Watches a try a dead engine left on a worker to its end.
///
/// # Errors
///
/// As [`Placement::dispatch`].
pub async fn adopt(
    dispatcher: &Dispatcher,
    ctx: &StepContext,
    leftover: &Leftover,
) -> Result<Output, StepError> {
    let handle = leftover
        .place
        .as_ref()
        .and_then(RemoteHandle::of)
        .ok_or_else(|| StepError::lost("the try's place names no worker"))?;
    let what = TryRef {
        run_id: leftover.run_id.to_string(),
        step: leftover.step.to_string(),
        attempt: leftover.attempt,
        compensation: leftover.kind.is_compensation(),
    };
    let ticket = dispatcher.adopt(&handle.token, &handle.worker, what);
    watch(ticket, &handle.worker, ctx, None).await
}

/// Stops a try on a worker the engine is about to record as failed, and waits until the
/// worker says it is gone, with what it used when the worker measured it as it killed it:
/// unreachable when the worker does not answer.
pub async fn settle(dispatcher: &Dispatcher, place: &Place) -> Settled {
    let Some(handle) = RemoteHandle::of(place) else {
        return Settled::Unreachable {
            reason: "its place names no worker this engine knows".to_owned(),
        };
    };
    match dispatcher.stop(&handle.worker, &handle.token).await {
        Ok(outcome) => Settled::Stopped {
            marker: None,
            used: (outcome.as_deref())
                .and_then(|bytes| serde_json::from_slice::<Outcome>(bytes).ok())
                .and_then(|outcome| outcome.usage),
        },
        Err(reason) => Settled::Unreachable { reason },
    }
}

/// Follows a taken try to its end; `placing`: the job whose place `ctx` records when it
/// starts (an adopted try started long ago). The worker keeps the result until `ctx`'s
/// engine has recorded it.
async fn watch(
    mut ticket: Ticket,
    worker: &str,
    ctx: &StepContext,
    placing: Option<&Job>,
) -> Result<Output, StepError> {
    loop {
        match ticket.next().await {
            TaskEvent::Started { host, handle, ack } => {
                let recorded = match placing {
                    Some(job) => place(ctx, job, worker, ticket.token(), &host, &handle).await,
                    None => Err(StepError::fatal("an adopted try cannot start again")),
                };
                let answer = recorded.as_ref().map(|_| ()).map_err(|e| e.message.clone());
                let _ = ack.send(answer);
                recorded?;
            }
            TaskEvent::Finished { outcome, recorder } => {
                ctx.when_recorded(move || recorder.recorded());
                let mut outcome: Outcome = serde_json::from_slice(&outcome).map_err(|e| {
                    StepError::retryable(format!(
                        "worker `{worker}` sent a result that does not parse: {e}"
                    ))
                })?;
                if let Some(usage) = outcome.usage.take() {
                    ctx.used(usage);
                }
                return outcome.result();
            }
            TaskEvent::Lost { reason } => {
                return Err(StepError::lost(format!("worker_lost: {reason}")))
            }
            other @ TaskEvent::Taken { .. } => return Err(unexpected(&other)),
        }
    }
}

/// Records the place of a try that started on `worker`.
async fn place(
    ctx: &StepContext,
    job: &Job,
    worker: &str,
    token: &str,
    host: &str,
    group: &str,
) -> Result<(), StepError> {
    let group = serde_json::from_str(group).map_err(|e| {
        StepError::retryable(format!(
            "worker `{worker}` sent a process handle that does not parse: {e}"
        ))
    })?;
    let handle = RemoteHandle {
        worker: worker.to_owned(),
        token: token.to_owned(),
        group,
    };
    let handle = serde_json::to_string(&handle).expect("a handle serializes");
    ctx.placed_with(host, &handle, job.detail()).await
}

fn unexpected(event: &TaskEvent) -> StepError {
    StepError::retryable(format!("the dispatcher sent {event:?} out of order"))
}

/// Labels in words: `role=db, zone=a`.
pub fn words(labels: &Labels) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(", ")
}
