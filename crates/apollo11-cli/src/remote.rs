//! When `apollo11 serve` holds the data dir, `run`, `resume`, `override`, `pause` and
//! `rollback` reach it over its API (at the address its lock records) instead of failing
//! with "in use". The token, if the server has one, comes from `--token-file`.

use crate::data::{damaged, open_writer, DataDir};
use crate::{out, Exit};
use apollo11_client::{segment, Answer, Client};
use apollo11_core::WorkflowSpec;
use apollo11_log::LockHolder;
use apollo11_store::DynStore;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// Who writes: this process, on the store it opened (the log, or the shared store of
/// `--store`), or the server holding the data dir.
pub enum Writer {
    Local(DynStore),
    Server(Remote),
}

/// Opens the shared store of `--store`; else the data dir for writing, or, when a server
/// holds it, a client of that server.
pub async fn open_or_reach(dir: &DataDir, token_file: Option<&Path>) -> Result<Writer, Exit> {
    if let Some(shared) = dir.open_shared().await? {
        return Ok(Writer::Local(shared));
    }
    let refused = match open_writer(dir) {
        Ok(log) => return Ok(Writer::Local(DynStore::new(std::sync::Arc::new(log)))),
        Err(refused) => refused,
    };
    let holder = std::fs::read_to_string(dir.join("LOCK")).unwrap_or_default();
    let Some(address) = LockHolder::parse(&holder)
        .listen
        .filter(|_| refused.code == 4)
    else {
        return Err(refused);
    };
    let token = token_file
        .map(crate::flags::read_token)
        .transpose()
        .map_err(|e| Exit::fail(2, e))?;
    Ok(Writer::Server(Remote {
        client: Client::new(address.clone(), token),
        address,
    }))
}

/// A server holding the data dir.
pub struct Remote {
    client: Client,
    address: String,
}

impl Remote {
    /// `POST` to the server; its error object becomes the command's exit.
    pub async fn post(&self, path: &str, body: Value) -> Result<Value, Exit> {
        let answer = self
            .client
            .post(path, &body)
            .await
            .map_err(|e| self.unreachable(e))?;
        self.answered(answer)
    }

    async fn get(&self, path: &str) -> Result<Value, Exit> {
        let answer = self
            .client
            .get(path)
            .await
            .map_err(|e| self.unreachable(e))?;
        self.answered(answer)
    }

    fn unreachable(&self, e: String) -> Exit {
        Exit::fail(
            4,
            format!(
                "the data dir is held by the server at {}, which does not answer: {e}",
                self.address
            ),
        )
    }

    fn answered(&self, answer: Answer) -> Result<Value, Exit> {
        if answer.status < 300 {
            return Ok(answer.json());
        }
        let message = format!(
            "the server at {} answered: {}",
            self.address,
            answer.message()
        );
        Err(match answer.status {
            500 => damaged(message),
            503 => Exit::fail(1, message),
            _ => Exit::fail(2, message),
        })
    }

    /// The route of a run, `/api/v1/runs/{id}`.
    pub fn run_path(run_id: &str) -> String {
        format!("/api/v1/runs/{}", segment(run_id))
    }

    /// The route of a run's step.
    pub fn step_path(run_id: &str, step: &str) -> String {
        format!("{}/steps/{}", Remote::run_path(run_id), segment(step))
    }

    /// Starts a run of workflow `name` on the server; with `file`, the caller's workflow file,
    /// only when the server's definition is the file's (else exit 2, saying how to go on);
    /// `params`: the values given for the workflow's parameters.
    pub async fn start(
        &self,
        name: &str,
        run_id: Option<String>,
        file: Option<(&Path, &WorkflowSpec)>,
        params: &BTreeMap<String, Value>,
    ) -> Result<String, Exit> {
        let digest = file.map(|(_, spec)| apollo11_runtime::digest(spec));
        let mut body = json!({"workflow": name, "run_id": run_id, "digest": digest});
        // Sent only when given: a server that takes no parameters refuses the field.
        if !params.is_empty() {
            body["params"] = json!(params);
        }
        let answer = self
            .client
            .post("/api/v1/runs", &body)
            .await
            .map_err(|e| self.unreachable(e))?;
        if let (412, Some((path, _))) = (answer.status, file) {
            return Err(Exit::fail(
                2,
                format!(
                    "{} defines workflow `{}` otherwise than the server at {} (which holds the \
                     data dir) serves it: {} (a digest covers the steps, their commands and \
                     the folder they run in). Start the served definition with --use-served, or \
                     change the server's file and reload its workflows \
                     (POST /api/v1/workflows/reload)",
                    out::shown(&path.display().to_string(), out::DETAIL_CHARS_MAX),
                    out::name(name),
                    self.address,
                    answer.message()
                ),
            ));
        }
        let answer = self.answered(answer)?;
        Ok(answer["run_id"].as_str().unwrap_or_default().to_owned())
    }

    /// Waits for a run the server drives to stop running (reading it again at each message
    /// of its event stream), then prints where it stands; exit 0 if it succeeded, 1 otherwise.
    pub async fn follow(&self, run_id: &str, json: bool) -> Result<Exit, Exit> {
        let path = Remote::run_path(run_id);
        let mut run = self.get(&path).await?;
        if run["state"] == "running" {
            let after = run["event_id"].as_u64().unwrap_or_default();
            let stream = format!("{path}/events/stream?after={after}");
            let mut events = self
                .client
                .stream(&stream, &[])
                .await
                .map_err(|e| self.unreachable(e))?;
            while run["state"] == "running" {
                match events.next_chunk().await {
                    Some(Ok(_)) => run = self.get(&path).await?,
                    Some(Err(e)) => return Err(self.unreachable(e)),
                    None => return Err(self.unreachable("its event stream ended".into())),
                }
            }
        }
        // `--json`: the server's run object, as `status --json` prints it.
        out::line(if json {
            run.to_string()
        } else {
            self.summary(&run)
        })?;
        Ok(Exit::code(if run["state"] == "succeeded" { 0 } else { 1 }))
    }

    fn summary(&self, run: &Value) -> String {
        let mut lines = vec![format!(
            "{}: {} (driven by the server at {})",
            out::name(run["run_id"].as_str().unwrap_or_default()),
            run["state"].as_str().unwrap_or_default(),
            self.address
        )];
        for step in run["order"].as_array().into_iter().flatten() {
            let name = step.as_str().unwrap_or_default();
            let s = &run["steps"][name];
            lines.push(format!(
                "  {:<24} {:<20} attempt {}",
                out::name(name),
                s["state"].as_str().unwrap_or_default(),
                s["attempt"]
            ));
        }
        lines.join("\n")
    }
}
