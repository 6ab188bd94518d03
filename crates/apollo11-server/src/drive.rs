//! Driving runs: starting a run of a registered workflow, driving an existing run again with
//! the definition it pinned (after an operator's action, or at start for the runs a crash
//! left interrupted), and logging how each drive ended.

use crate::idempotent;
use crate::server::{AppState, Backend};
use crate::ApiError;
use apollo11_author::AuthorError;
use apollo11_core::{check_name, NameKind, Value, WorkflowSpec};
use apollo11_runtime::inspect::RunFilter;
use apollo11_runtime::{EngineError, RunHandle, RunId, RunStatus};
use apollo11_shell::run_folder::{self, default_run_id};
use apollo11_shell::shell;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Runs `work` (a start, or an action and the drive after it) on a task of its own and waits
/// for it. A request's future is dropped when its connection goes (a client that gave up
/// waiting): dropped between its append and the drive that follows, it would leave the run
/// with nothing driving it until the server restarts. A task runs to its end whoever waits.
///
/// # Errors
///
/// What `work` returns; a panic in it as a 500.
pub async fn detached<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, ApiError>> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::spawn(work)
        .await
        .map_err(|e| ApiError::Internal(format!("the request's work failed: {e}")))?
}

/// A start asked for: the workflow, the run id (else a new one), the digest of the
/// definition the client means, the values of its parameters.
pub struct Start<'a> {
    /// The registered workflow's name.
    pub name: &'a str,
    /// The run's id; `None`: a new default id.
    pub run_id: Option<String>,
    /// The digest of the declared definition the client means.
    pub digest: Option<&'a str>,
    /// Values of the workflow's parameters.
    pub params: &'a BTreeMap<String, Value>,
    /// The digest of a request made under an `Idempotency-Key`, pinned with the run.
    pub request: Option<String>,
    /// More definition attributes pinned with the run (what started it: a schedule's fire).
    pub attributes: BTreeMap<String, String>,
}

/// Starts a run of a registered workflow, instantiated with the values given, driven until
/// it ends; with a digest, only when the registered definition has it. Bad values are a 400
/// naming the parameter, before anything is created. Answers the run and whether it was
/// created: a keyed request whose run exists answers with that run (see `idempotent`).
pub async fn start(
    state: &AppState,
    asked: Start<'_>,
) -> Result<(RunId, Option<Rested>), ApiError> {
    let Start {
        name,
        run_id,
        digest,
        params,
        request,
        attributes,
    } = asked;
    let registry = state.registry();
    let registered = registry
        .get(name)
        .ok_or_else(|| ApiError::NotFound(format!("no workflow `{name}` is registered")))?;
    if let Some(sent) = digest {
        registered.check_digest(sent)?;
    }
    let mut spec = instantiated(&registered.spec, params)?;
    spec.attributes.extend(attributes);
    if let Some(request) = &request {
        (spec.attributes).insert(idempotent::ATTRIBUTE.to_owned(), request.clone());
    }
    let workflow = Arc::new(
        shell::workflow_on(&spec, &state.data_dir, Some(&state.workers))
            .map_err(|e| ApiError::Invalid(format!("workflow `{name}`: {e}")))?,
    );
    let handle = match run_id {
        Some(id) => {
            check_name(NameKind::Run, &id)
                .map_err(|e| ApiError::Invalid(format!("run_id: {e}")))?;
            run_folder_answered(&state.data_dir, &id, &spec)?;
            match (
                state.engine.start(&workflow, RunId(id.clone())).await,
                &request,
            ) {
                (Err(EngineError::RunExists { .. }), Some(request)) => {
                    let run_id = idempotent::replay(state, &RunId(id), request).await?;
                    return Ok((run_id, None));
                }
                (started, _) => started?,
            }
        }
        None => {
            let now_ms = apollo11_runtime::Clock::system().now_ms();
            let mut n = 1;
            loop {
                let id = default_run_id(name, now_ms, n);
                run_folder_answered(&state.data_dir, &id, &spec)?;
                match state.engine.start(&workflow, RunId(id)).await {
                    Err(EngineError::RunExists { .. }) if n < DEFAULT_ID_TRIES => n += 1,
                    other => break other?,
                }
            }
        }
    };
    let run_id = handle.run_id().clone();
    Ok((run_id, Some(watch(handle))))
}

/// The definition a run of `declared` pins when started with the values `given`: 400 naming
/// the parameter (the error object's `param`) when a value is undeclared, missing, of
/// another type, too large or a secret's; 400 naming the declaration when the items of a
/// `for_each` cannot make its steps.
fn instantiated(
    declared: &WorkflowSpec,
    given: &BTreeMap<String, Value>,
) -> Result<WorkflowSpec, ApiError> {
    apollo11_author::instantiate(declared, given).map_err(|e| {
        let message = format!("workflow `{}`: {e}", declared.name);
        match e {
            AuthorError::Param(p) => ApiError::InvalidParam(p.name().to_owned(), message),
            _ => ApiError::Invalid(message),
        }
    })
}

/// Drives a run again with the definition it pinned, as `apollo11 resume` does; a run this
/// server drives already is left to its driver (which an action wakes), and so is one
/// another instance holds the lease of.
pub async fn drive(state: &AppState, run_id: &RunId) -> Result<(), ApiError> {
    let spec = state.inspector.definition(run_id).await?;
    let workflow = shell::workflow_on(&spec, &state.data_dir, Some(&state.workers))
        .map_err(|e| ApiError::Damaged(format!("run `{run_id}`: its pinned definition: {e}")))?;
    match state
        .engine
        .resume(&Arc::new(workflow), run_id.clone())
        .await
    {
        Ok(handle) => drop(watch(handle)),
        Err(EngineError::AlreadyRunning { .. } | EngineError::Leased { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// Drives every run left `running` (a crash interrupted it); paused runs stay paused.
/// Returns how many it resumed.
pub async fn resume_interrupted(state: &AppState) -> Result<usize, EngineError> {
    let filter = RunFilter::all().state(RunStatus::Running);
    let list = state.inspector.runs(&filter).await?;
    for unreadable in &list.unreadable {
        tracing::warn!(run = %unreadable.run_id, error = %unreadable.error, "run not resumed");
    }
    for row in &list.runs {
        if let Err(e) = drive(state, &row.run_id).await {
            tracing::warn!(run = %row.run_id, error = %e.message(), "run not resumed");
        }
    }
    Ok(list.runs.len())
}

/// With a shared store: every tenth of the lease ttl, says this instance is alive and
/// claims its share of the runs that need a driver (new runs no instance took, runs whose
/// lease expired), and drives each. A round that fails (the database out of reach) makes
/// the server unready until one succeeds; rounds are retried at 100 ms, doubling up to the
/// period. Runs until aborted.
pub async fn claim_rounds(state: Arc<AppState>) {
    let Backend::Shared { claims: ready } = &state.backend else {
        return;
    };
    // A tenth of the ttl: an expired lease is claimed within ttl + ttl/10 of its last renewal.
    let period = state.engine.lease_ttl().unwrap_or_default() / 10;
    let mut failures = 0u32;
    loop {
        let delay = match state.engine.claim().await {
            Ok(runs) => {
                failures = 0;
                *ready.write().unwrap_or_else(|p| p.into_inner()) = Ok(());
                for run_id in runs {
                    if let Err(e) = drive(&state, &run_id).await {
                        tracing::warn!(run = %run_id, error = %e.message(), "claimed run not driven");
                    }
                }
                period
            }
            Err(e) => {
                failures += 1;
                tracing::warn!(error = %e, failures, "claim round failed; unready");
                *ready.write().unwrap_or_else(|p| p.into_inner()) = Err(e.to_string());
                retry_delay(failures).min(period)
            }
        };
        tokio::time::sleep(delay).await;
    }
}

/// The pause after the `failures`-th failed claim round in a row: 100 ms, doubling.
fn retry_delay(failures: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << failures.saturating_sub(1).min(16)))
}

/// Whether a run started here came to rest (its driver returned a status, not an error):
/// unset while it is driven.
pub type Rested = Arc<std::sync::OnceLock<bool>>;

/// Logs how a drive ends, and says it in the answer.
fn watch(handle: RunHandle) -> Rested {
    let rested = Rested::default();
    let said = rested.clone();
    tokio::spawn(async move {
        let run_id = handle.run_id().clone();
        let outcome = handle.outcome().await;
        match &outcome {
            Ok(status) => tracing::info!(run = %run_id, %status, "run ended"),
            Err(e) => tracing::warn!(run = %run_id, error = %e, "run stopped"),
        }
        let _ = said.set(outcome.is_ok());
    });
    rested
}

/// How many suffixed ids a new run tries before giving up.
const DEFAULT_ID_TRIES: u32 = 100;

/// [`run_folder::create`] for an API answer: the folder's path goes to the server's log only.
fn run_folder_answered(data_dir: &Path, run_id: &str, spec: &WorkflowSpec) -> Result<(), ApiError> {
    run_folder::create(data_dir, run_id, spec).map_err(|e| {
        tracing::warn!(error = %e, "run not started");
        ApiError::Invalid(format!(
            "{}: cannot create its folder in the data dir: {}",
            e.whose(),
            e.source
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_claim_rounds_back_off_doubling() {
        let delays: Vec<u64> = (1..=5).map(|n| retry_delay(n).as_millis() as u64).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1_600]);
        assert!(retry_delay(u32::MAX) >= Duration::from_secs(60));
    }
}
