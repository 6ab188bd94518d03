//! `Idempotency-Key` on `POST /api/v1/runs`: a sender that retries a start (a webhook whose
//! answer was lost) never starts two runs. The key names the run when the body names none,
//! so the store refuses a second run of it: on this instance or another sharing the
//! database, before or after a restart. The request's digest is pinned with the run: a
//! retry of the same request under the key answers with the same run (200), another request
//! under it is refused (409). A key holds as long as its run is kept (until `gc` drops it).

use crate::server::AppState;
use crate::ApiError;
use apollo11_runtime::RunId;
use apollo11_store::sha256_hex;
use axum::http::HeaderMap;

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// The definition attribute a keyed run pins: its request's digest.
pub const ATTRIBUTE: &str = "idempotency_request";
/// The longest key.
pub const KEY_BYTES_MAX: usize = 255;

/// The key a request carries, if any.
///
/// # Errors
///
/// 400 for a key that is empty, longer than [`KEY_BYTES_MAX`], or not visible ASCII.
pub fn key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(HEADER) else {
        return Ok(None);
    };
    let visible = |t: &&str| t.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    let text = (value.to_str().ok())
        .filter(|t| !t.is_empty() && t.len() <= KEY_BYTES_MAX)
        .filter(visible)
        .ok_or_else(|| {
            ApiError::Invalid(format!(
                "header Idempotency-Key: 1 to {KEY_BYTES_MAX} visible ASCII characters"
            ))
        })?;
    Ok(Some(text.to_owned()))
}

/// The run a key names when the request names none: `WORKFLOW-key-HASH`.
pub fn run_id(workflow: &str, key: &str) -> String {
    let digest = sha256_hex(format!("{workflow}\n{key}").as_bytes());
    apollo11_shell::run_folder::run_id_of(workflow, &format!("key-{}", &digest[..16]))
}

/// The digest of a request under `key`: what a retry must repeat.
pub fn request(key: &str, what: &serde_json::Value) -> String {
    sha256_hex(format!("{key}\n{what}").as_bytes())
}

/// The answer to a keyed start whose run exists: that run, when the same request started it.
///
/// # Errors
///
/// 409 when another request started it (or none under a key); what reading it fails with.
pub async fn replay(state: &AppState, run_id: &RunId, request: &str) -> Result<RunId, ApiError> {
    let spec = state.inspector.definition(run_id).await?;
    match spec.attributes.get(ATTRIBUTE) {
        Some(pinned) if pinned == request => Ok(run_id.clone()),
        _ => Err(ApiError::Conflict(format!(
            "run `{run_id}` exists, started by another request than this one under its Idempotency-Key"
        ))),
    }
}
