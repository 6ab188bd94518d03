//! `signal` and `approve`: an operator's signal to a waiting step, with who, why and the
//! JSON data that becomes the step's output (`approve` sends `{"approved": true}`). Through
//! the server when one holds the data dir, else appended here; refused (exit 2) when the
//! step is not waiting for a signal, and nothing is appended then.

use crate::data::DataDir;
use crate::operate::{perform, Action};
use crate::remote::Remote;
use crate::Exit;
use apollo11_core::Value;
use apollo11_runtime::RunId;
use serde_json::json;
use std::path::Path;

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
    let action = Action {
        run_id,
        path: format!("{}/signal", Remote::step_path(run_id, step)),
        body: json!({ "data": data }),
        done: format!("{step} signalled"),
        next: format!("it goes on at the next `apollo11 resume {run_id}`"),
        reason,
        by,
    };
    perform(dir, token_file, action, |engine| async move {
        let id = RunId::from(run_id);
        let done = engine.signal(&id, step, data, by, reason).await;
        (engine, done.map(drop))
    })
    .await
}
