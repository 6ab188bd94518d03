//! The worker protocol on the engine's dispatcher: a worker long-polls `take` for tries whose
//! labels it carries, heartbeats with the tries it holds (answered with those to stop),
//! reports that a try `started` (answered once its place is durable: only then does the
//! worker let it act), sends its log in chunks, and reports its `result` (idempotent;
//! 409 for a try decided without it; 503 for one this server does not know yet, which its
//! driver may adopt after a restart). Behind the worker token, which opens nothing else;
//! `GET /api/v1/workers` (behind the operator's token) lists them.

use crate::extract::Body;
use crate::server::AppState;
use crate::ApiError;
use apollo11_client::LOG_CHUNK_BYTES_MAX;
use apollo11_dispatch::{Hello, QueuedView, Refusal, WorkerView};
use apollo11_shell::definition::is_label;
use apollo11_shell::files;
use apollo11_shell::shell::Outcome;
use axum::extract::{Path, State};
use axum::Json;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;
use std::time::Duration;

/// The longest a `take` waits for a try.
pub const TAKE_WAIT_MAX: Duration = Duration::from_secs(30);
/// The most slots a worker may say it has.
pub const SLOTS_MAX: u32 = 1024;
/// The largest step log a worker may fill on the server.
pub const WORKER_LOG_BYTES_MAX: u64 = 1024 * 1024 * 1024;
/// The largest result body: an output of `STEP_OUTPUT_BYTES_MAX` in base64, and room.
pub const RESULT_BODY_BYTES_MAX: usize =
    (apollo11_core::limits::STEP_OUTPUT_BYTES_MAX as usize) / 3 * 4 + 64 * 1024;

type Shared = Arc<AppState>;

/// A long poll for tries.
#[derive(Deserialize)]
pub struct TakeBody {
    worker: Hello,
    /// Free slots.
    free: u32,
    /// How long to wait for a try, in milliseconds (at most 30 s).
    #[serde(default)]
    wait_ms: u64,
}

/// A try handed to a worker.
#[derive(Serialize)]
pub struct Offered {
    token: String,
    run_id: String,
    step: String,
    attempt: u32,
    compensation: bool,
    /// What to run (the shell executor's job).
    job: Value,
}

/// The tries taken.
#[derive(Serialize)]
pub struct Taken {
    tries: Vec<Offered>,
}

/// Checks what a worker says of itself.
fn checked(hello: &Hello) -> Result<(), ApiError> {
    if !is_label(&hello.name) {
        return Err(ApiError::Invalid(format!(
            "worker.name `{}`: 1 to 64 of letters, digits, `_`, `-`, `.`",
            hello.name.escape_debug()
        )));
    }
    for (name, value) in &hello.labels {
        let max = apollo11_core::limits::LABEL_BYTES_MAX as usize;
        if !is_label(name) || value.is_empty() || value.len() > max {
            return Err(ApiError::Invalid(format!(
                "worker.labels: `{}`: a label is a name (letters, digits, `_`, `-`, `.`) and a value of 1 to {max} bytes",
                name.escape_debug()
            )));
        }
    }
    if hello.slots == 0 || hello.slots > SLOTS_MAX {
        return Err(ApiError::Invalid(format!(
            "worker.slots: {}: 1 to {SLOTS_MAX}",
            hello.slots
        )));
    }
    Ok(())
}

/// `POST /api/v1/worker/take`.
pub async fn take(
    State(state): State<Shared>,
    Body(body): Body<TakeBody>,
) -> Result<Json<Taken>, ApiError> {
    checked(&body.worker)?;
    let wait = Duration::from_millis(body.wait_ms).min(TAKE_WAIT_MAX);
    let free = body.free.min(body.worker.slots);
    let mut closing = state.closing.clone();
    let offers = tokio::select! {
        offers = state.workers.take(&body.worker, free, wait) => offers,
        _ = closing.wait_for(|c| *c) => Vec::new(),
    };
    let tries = offers
        .into_iter()
        .map(|o| Offered {
            token: o.token,
            run_id: o.what.run_id,
            step: o.what.step,
            attempt: o.what.attempt,
            compensation: o.what.compensation,
            job: serde_json::from_slice(&o.job).unwrap_or(Value::Null),
        })
        .collect();
    Ok(Json(Taken { tries }))
}

/// A heartbeat.
#[derive(Deserialize)]
pub struct HeartbeatBody {
    worker: Hello,
    /// The tokens of the tries it holds.
    running: Vec<String>,
}

/// The tries a worker must stop.
#[derive(Serialize)]
pub struct Stop {
    stop: Vec<String>,
}

/// `POST /api/v1/worker/heartbeat`.
pub async fn heartbeat(
    State(state): State<Shared>,
    Body(body): Body<HeartbeatBody, { 1024 * 1024 }>,
) -> Result<Json<Stop>, ApiError> {
    checked(&body.worker)?;
    let stop = state.workers.heartbeat(&body.worker, &body.running);
    Ok(Json(Stop { stop }))
}

/// A try's start on a worker.
#[derive(Deserialize)]
pub struct StartedBody {
    worker: String,
    host: String,
    handle: String,
}

/// `POST /api/v1/worker/tries/{token}/started`: answered once the place is durable.
pub async fn started(
    State(state): State<Shared>,
    Path(token): Path<String>,
    Body(body): Body<StartedBody>,
) -> Result<Json<Value>, ApiError> {
    let answer = state
        .workers
        .started(&body.worker, &token, body.host, body.handle)
        .await;
    answer.map_err(refused)?;
    Ok(Json(serde_json::json!({})))
}

/// A chunk of a try's log.
#[derive(Deserialize)]
pub struct LogBody {
    worker: String,
    /// Where in the log the chunk goes.
    offset: u64,
    /// The bytes, base64.
    data: String,
}

/// `POST /api/v1/worker/tries/{token}/log`: writes the chunk where local step logs go.
pub async fn log(
    State(state): State<Shared>,
    Path(token): Path<String>,
    Body(body): Body<LogBody, { LOG_CHUNK_BYTES_MAX / 3 * 4 + 4096 }>,
) -> Result<Json<Value>, ApiError> {
    let what = state.workers.what(&body.worker, &token).ok_or_else(|| {
        ApiError::Conflict(format!("try `{token}` is not wanted from this worker"))
    })?;
    let data = STANDARD
        .decode(&body.data)
        .map_err(|e| ApiError::Invalid(format!("data: {e}")))?;
    let end = body.offset.saturating_add(data.len() as u64);
    if end > WORKER_LOG_BYTES_MAX {
        return Err(ApiError::TooLarge(format!(
            "a step log of a worker is kept up to {WORKER_LOG_BYTES_MAX} bytes"
        )));
    }
    let path = files::step_files(
        &state.data_dir,
        &what.run_id,
        &what.step,
        what.attempt,
        what.compensation,
    )
    .log;
    tokio::task::spawn_blocking(move || write_at(&path, body.offset, &data))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .map_err(|e| ApiError::Unavailable(format!("writing the step log: {e}")))?;
    Ok(Json(serde_json::json!({})))
}

fn write_at(path: &std::path::Path, offset: u64, data: &[u8]) -> std::io::Result<()> {
    if let Some(folder) = path.parent() {
        files::create_private_dir(folder)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    file.write_all(data)
}

/// A try's result.
#[derive(Deserialize)]
pub struct ResultBody {
    worker: String,
    outcome: Outcome,
}

/// `POST /api/v1/worker/tries/{token}/result`.
pub async fn result(
    State(state): State<Shared>,
    Path(token): Path<String>,
    Body(body): Body<ResultBody, RESULT_BODY_BYTES_MAX>,
) -> Result<Json<Value>, ApiError> {
    let outcome = serde_json::to_vec(&body.outcome).expect("an outcome serializes");
    match state.workers.finish(&body.worker, &token, outcome).await {
        Ok(()) => Ok(Json(serde_json::json!({}))),
        Err(refusal) => {
            tracing::warn!(worker = %body.worker, token = %token, refusal = ?refusal, "a try's result refused");
            Err(refused(refusal))
        }
    }
}

fn refused(refusal: Refusal) -> ApiError {
    match refusal {
        Refusal::Decided(why) => {
            ApiError::Conflict(format!("the try was decided without this report: {why}"))
        }
        Refusal::Unknown => ApiError::Unavailable(
            "this server does not know the try yet (it may have just started): report again"
                .to_owned(),
        ),
        Refusal::NotRecorded(why) => {
            ApiError::Unavailable(format!("the result is not recorded: {why}; report again"))
        }
    }
}

/// What `GET /api/v1/workers` answers.
#[derive(Serialize)]
pub struct Workers {
    workers: Vec<WorkerView>,
    queued: Vec<QueuedView>,
    lost: u64,
}

/// `GET /api/v1/workers`.
pub async fn list(State(state): State<Shared>) -> Json<Workers> {
    Json(Workers {
        workers: state.workers.workers(),
        queued: state.workers.queued(),
        lost: state.workers.lost_workers(),
    })
}
