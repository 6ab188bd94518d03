//! One try on a worker: its files in `WORK_DIR/tries/TOKEN/`, its process run by the shell
//! executor behind the gate (opened once the server says its place is durable), its log
//! sent in chunks as it grows, its result reported until the server takes it (200) or
//! refuses it (409: decided without it); a stop from the server kills its process group.

use super::{backoff, call, Worker};
use apollo11_runtime::StepError;
use apollo11_server::client::Client;
use apollo11_shell::files::StepFiles;
use apollo11_shell::shell::{execute, Files, Job, Outcome, Placing};
use async_trait::async_trait;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, OwnedSemaphorePermit};

/// How often a try's log is sent while it runs.
const LOG_EVERY: Duration = Duration::from_millis(250);
/// How long a result the server does not know yet is offered again before it is dropped.
const REPORT_FOR: Duration = Duration::from_secs(600);

/// Starts the try `offered` in a task of its own, holding `permit` (its slot) until it ends.
pub(super) fn start(
    worker: Arc<Worker>,
    client: Arc<Client>,
    server: usize,
    offered: Value,
    permit: OwnedSemaphorePermit,
) {
    let token = offered["token"].as_str().unwrap_or_default().to_owned();
    let (stop_tx, stop) = watch::channel(false);
    (worker.held.lock().unwrap_or_else(|p| p.into_inner()))
        .insert(token.clone(), (server, stop_tx));
    tokio::spawn(async move {
        let task = Task {
            worker: worker.clone(),
            client,
            token: token.clone(),
        };
        task.run(offered, stop).await;
        (worker.held.lock().unwrap_or_else(|p| p.into_inner())).remove(&token);
        drop(permit);
    });
}

struct Task {
    worker: Arc<Worker>,
    client: Arc<Client>,
    token: String,
}

impl Task {
    fn path(&self, what: &str) -> String {
        format!("/api/v1/worker/tries/{}/{what}", self.token)
    }

    async fn run(&self, offered: Value, mut stop: watch::Receiver<bool>) {
        let dir = self.worker.work_dir.join("tries").join(&self.token);
        let job: Job = match serde_json::from_value(offered["job"].clone()) {
            Ok(job) => job,
            Err(e) => {
                let refused = Err(StepError::fatal(format!(
                    "the worker cannot read the try: {e}"
                )));
                self.report(&Outcome::of(&refused), &mut stop).await;
                return;
            }
        };
        let files = StepFiles {
            log: dir.join("log"),
            output: dir.join("output"),
            payload: dir.join("payload"),
            inputs: dir.join("inputs"),
            params: dir.join("params.json"),
        };
        let at = Files {
            files: &files,
            base: &self.worker.work_dir,
            base_words: "the worker's work dir",
        };
        tracing::info!(token = %self.token, run = %job.run_id, step = %job.step, attempt = job.attempt, "running a try");
        let mut sent = 0;
        let result = {
            let running = execute(&job, &at, self);
            tokio::pin!(running);
            loop {
                tokio::select! {
                    result = &mut running => break Some(result),
                    () = stopped(&mut stop) => break None,
                    () = tokio::time::sleep(LOG_EVERY) => sent = self.send_log(&files.log, sent).await,
                }
            }
        };
        self.send_log(&files.log, sent).await;
        if let Some(result) = result {
            self.report(&Outcome::of(&result), &mut stop).await;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Sends what the log holds past `sent`, in chunks; answers how much is sent.
    async fn send_log(&self, log: &Path, mut sent: u64) -> u64 {
        loop {
            let chunk = match read_from(log, sent, apollo11_server::LOG_CHUNK_BYTES_MAX) {
                Ok(chunk) if !chunk.is_empty() => chunk,
                _ => return sent,
            };
            let body = json!({
                "worker": self.worker.hello.name,
                "offset": sent,
                "data": STANDARD.encode(&chunk),
            });
            match call(&self.client, &self.path("log"), &body).await {
                Ok(a) if a.status == 200 => sent += chunk.len() as u64,
                Ok(a) => {
                    tracing::warn!(status = a.status, error = %a.message(), "a log chunk refused");
                    return sent;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a log chunk not sent; sent again later");
                    return sent;
                }
            }
        }
    }

    /// Reports the result until the server takes or refuses it, or says to stop the try.
    async fn report(&self, outcome: &Outcome, stop: &mut watch::Receiver<bool>) {
        let body = json!({"worker": self.worker.hello.name, "outcome": outcome});
        let deadline = tokio::time::Instant::now() + REPORT_FOR;
        let mut failures = 0;
        while tokio::time::Instant::now() < deadline && !*stop.borrow() {
            match call(&self.client, &self.path("result"), &body).await {
                Ok(a) if a.status == 200 => return,
                Ok(a) if a.status == 409 => {
                    tracing::warn!(token = %self.token, error = %a.message(), "the server refused the try's result");
                    return;
                }
                Ok(a) => {
                    tracing::warn!(status = a.status, error = %a.message(), "result not taken; offered again")
                }
                Err(e) => tracing::warn!(error = %e, "result not sent; offered again"),
            }
            failures += 1;
            tokio::select! {
                () = tokio::time::sleep(backoff(failures)) => {}
                () = stopped(stop) => {}
            }
        }
        tracing::warn!(token = %self.token, "a try's result dropped: the server no longer wants it");
    }
}

#[async_trait]
impl Placing for Task {
    async fn placed(&self, host: &str, handle: &str) -> Result<(), StepError> {
        let body = json!({"worker": self.worker.hello.name, "host": host, "handle": handle});
        let answer = call(&self.client, &self.path("started"), &body)
            .await
            .map_err(StepError::retryable)?;
        match answer.status {
            200 => Ok(()),
            409 => Err(StepError::fatal(answer.message())),
            _ => Err(StepError::retryable(answer.message())),
        }
    }
}

/// Completes once the server stops the try.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Up to `max` bytes of `path` from `offset`.
fn read_from(path: &Path, offset: u64, max: usize) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut chunk = Vec::new();
    file.take(max as u64).read_to_end(&mut chunk)?;
    Ok(chunk)
}
