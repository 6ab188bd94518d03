//! Extractors that answer every malformed request with the API's error object: JSON bodies
//! (capped at [`BODY_BYTES_MAX`], a start's at [`START_BODY_BYTES_MAX`], unknown fields
//! refused) and the path's run and step,
//! each checked against the names rule (the query string's are `query.rs`'s).

use crate::ApiError;
use apollo11_core::{check_name, NameKind};
use apollo11_runtime::RunId;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::header;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// Largest request body accepted (413 above it).
pub const BODY_BYTES_MAX: usize = 64 * 1024;

/// Largest body of a start: room for its parameters' values, each up to
/// [`apollo11_core::limits::PARAM_VALUE_BYTES_MAX`], so that one too large is a 400 naming
/// it.
pub const START_BODY_BYTES_MAX: usize = 1024 * 1024;

/// A JSON body of type `T`, of at most `MAX` bytes.
pub struct Body<T, const MAX: usize = BODY_BYTES_MAX>(pub T);

impl<S: Send + Sync, T: DeserializeOwned, const MAX: usize> FromRequest<S> for Body<T, MAX> {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, ApiError> {
        let too_large = || ApiError::TooLarge(format!("the request body is over {MAX} bytes"));
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX as u64) {
            return Err(too_large());
        }
        let bytes = axum::body::to_bytes(request.into_body(), MAX)
            .await
            .map_err(|_| too_large())?;
        serde_json::from_slice(&bytes)
            .map(Body)
            .map_err(|e| ApiError::Invalid(format!("body: {e}")))
    }
}

#[derive(Deserialize)]
struct RunParams {
    id: String,
}

#[derive(Deserialize)]
struct StepParams {
    id: String,
    step: String,
}

/// `{id}` of the path: a run's id, checked against the names rule.
pub struct RunPath(pub RunId);

/// `{id}` and `{step}` of the path: a run's id and one of its steps, each checked against
/// the names rule.
pub struct StepPath {
    /// The run.
    pub run_id: RunId,
    /// The step's name.
    pub step: String,
}

/// `{workflow}` and `{name}` of the path: a schedule, the workflow's name checked against
/// the names rule (the schedule's is looked up as given).
pub struct SchedulePath {
    /// The workflow.
    pub workflow: String,
    /// The schedule's name.
    pub name: String,
}

#[derive(Deserialize)]
struct ScheduleParams {
    workflow: String,
    name: String,
}

impl<S: Send + Sync> FromRequestParts<S> for SchedulePath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let ScheduleParams { workflow, name } = params(parts, state).await?;
        Ok(SchedulePath {
            workflow: named("workflow", NameKind::Workflow, workflow)?,
            name,
        })
    }
}

/// The path's parameters as `T`; 400 when they do not decode.
async fn params<T: DeserializeOwned + Send, S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
) -> Result<T, ApiError> {
    let Path(params) = Path::<T>::from_request_parts(parts, state)
        .await
        .map_err(|e| ApiError::Invalid(format!("path: {e}")))?;
    Ok(params)
}

/// `value` if it is a name of `kind`; 400 naming the parameter `key` otherwise.
fn named(key: &str, kind: NameKind, value: String) -> Result<String, ApiError> {
    check_name(kind, &value).map_err(|e| ApiError::Invalid(format!("{key}: {e}")))?;
    Ok(value)
}

impl<S: Send + Sync> FromRequestParts<S> for RunPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let RunParams { id } = params(parts, state).await?;
        Ok(RunPath(RunId(named("id", NameKind::Run, id)?)))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for StepPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let StepParams { id, step } = params(parts, state).await?;
        Ok(StepPath {
            run_id: RunId(named("id", NameKind::Run, id)?),
            step: named("step", NameKind::Step, step)?,
        })
    }
}
