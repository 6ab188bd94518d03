//! `GET /api/v1/runs/{id}/steps/{step}/log?attempt=N&compensation=false`: the last 1 MiB of
//! an attempt's log, its whole size in bytes in the `X-Log-Bytes` header. The run and step are checked names (one path component each, never
//! `..`), and the file found is served only if its real path, symlinks resolved, is inside
//! the data dir.

use crate::extract::StepPath;
use crate::query::{Bounded, Flag, Query};
use crate::server::AppState;
use crate::ApiError;
use apollo11_shell::files;
use axum::extract::State;
use axum::http::{header, HeaderName};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The most of a log served: its end.
pub const LOG_BYTES_MAX: u64 = 1024 * 1024;

/// The query of a log: which attempt, and whether its compensation's.
#[derive(Deserialize)]
pub struct LogQuery {
    attempt: Option<Bounded<1, { u32::MAX as u64 }>>,
    #[serde(default)]
    compensation: Flag,
}

/// The log of one attempt (or its compensation).
pub async fn step_log(
    State(state): State<Arc<AppState>>,
    StepPath { run_id, step }: StepPath,
    Query(query): Query<LogQuery>,
) -> Result<Response, ApiError> {
    let attempt =
        (query.attempt).ok_or_else(|| ApiError::Invalid("attempt: missing (?attempt=N)".into()))?;
    let (attempt, compensation) = (attempt.0 as u32, query.compensation.0);
    let path = files::step_files(&state.data_dir, &run_id.0, &step, attempt, compensation).log;
    let data_dir = state.data_dir.clone();
    let (text, len) = tokio::task::spawn_blocking(move || tail_inside(&data_dir, &path))
        .await
        .map_err(|e| ApiError::Unavailable(format!("reading the log: {e}")))??;
    let headers = [
        (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
        (HeaderName::from_static("x-log-bytes"), len.to_string()),
    ];
    Ok((headers, text).into_response())
}

/// The last [`LOG_BYTES_MAX`] bytes of `path`, if it is a file inside `data_dir`, and its
/// length.
fn tail_inside(data_dir: &Path, path: &Path) -> Result<(String, u64), ApiError> {
    let missing = || ApiError::NotFound("no log for this run, step and attempt".into());
    let real = std::fs::canonicalize(path).map_err(|_| missing())?;
    let root: PathBuf = std::fs::canonicalize(data_dir).map_err(|_| missing())?;
    if !real.starts_with(&root) || !real.is_file() {
        return Err(missing());
    }
    let read = |e: std::io::Error| ApiError::Unavailable(format!("reading the log: {e}"));
    let mut file = std::fs::File::open(&real).map_err(read)?;
    let len = file.metadata().map_err(read)?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(LOG_BYTES_MAX)))
        .map_err(read)?;
    let mut bytes = Vec::new();
    file.take(LOG_BYTES_MAX)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    Ok((String::from_utf8_lossy(&bytes).into_owned(), len))
}
