//! `signal` and `approve`: an operator's signal to a waiting step, with who, why and the
//! JSON data that becomes the step's output (`approve` sends `{"approved": true}`). Through
//! the server when one holds the data dir, else appended here; refused (exit 2) when the
//! step is not waiting for a signal, and nothing is appended then.

use crate::data::{engine_exit, DataDir};
use crate::operate::label;
use crate::remote::{open_or_reach, Remote, Writer};
use crate::{out, Exit};
use apollo11_core::{limits, Value};
use apollo11_runtime::{Engine, EngineConfig, RunId};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

/// The data `approve` sends.
pub fn approval() -> Value {
    json!({"approved": true})
}

/// `--data`, read as JSON.
pub fn data_arg(text: Option<&str>) -> Result<Option<Value>, Exit> {
    text.map(|t| {
        serde_json::from_str(t).map_err(|e| Exit::fail(2, format!("--data: not JSON: {e}")))
    })
    .transpose()
}

/// Sends the signal carrying `data` to `step` of the run.
pub async fn signal(
    dir: &DataDir,
    (run_id, step): (&str, &str),
    data: Option<&Value>,
    (reason, by): (&str, &str),
    token_file: Option<&Path>,
) -> Result<Exit, Exit> {
    label("--reason", reason, limits::ERROR_MESSAGE_BYTES_MAX)?;
    apollo11_core::check_operator("--by", by).map_err(|e| Exit::fail(2, e))?;
    let store = match open_or_reach(dir, token_file).await? {
        Writer::Local(log) => Arc::new(log),
        Writer::Server(server) => {
            let path = format!("{}/signal", Remote::step_path(run_id, step));
            let body = json!({"data": data, "by": by, "reason": reason});
            let answer = server.post(&path, body).await?;
            out::line(format!(
                "{run_id}: {step} signalled by {by} ({reason}), event {}; the server drives the run on",
                answer["event_id"]
            ))?;
            return Ok(Exit::code(0));
        }
    };
    // An operator's action is appended unfenced, whoever drives the run.
    let engine = Engine::open(store, EngineConfig::default())
        .await
        .map_err(engine_exit)?;
    let done = (engine.signal(&RunId::from(run_id), step, data, by, reason)).await;
    engine.close().await;
    done.map_err(engine_exit)?;
    out::line(format!(
        "{run_id}: {step} signalled by {by} ({reason}); it goes on at the next `apollo11 resume {run_id}`"
    ))?;
    Ok(Exit::code(0))
}
