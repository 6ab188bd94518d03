//! One try on a worker: its files in `WORK_DIR/tries/TOKEN/`, its process run by the shell
//! executor behind the gate (opened once the server says its place is durable), its log
//! sent in chunks as it grows, its result reported until the server takes it (200) or
//! refuses it (409: decided without it); a stop from the server kills its process group,
//! and what the try used up to then goes to the server with its (refused) result.

use super::{backoff, call, Worker};
use apollo11_client::Client;
use apollo11_runtime::Output;
use apollo11_runtime::{StepError, Usage};
use apollo11_shell::files::StepFiles;
use apollo11_shell::shell::{execute, reattach, Files, Job, Outcome, Placing};
use async_trait::async_trait;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, OwnedSemaphorePermit};

/// How often a try's log is sent while it runs.
const LOG_EVERY: Duration = Duration::from_millis(250);
/// How long a result the server does not know yet is offered again before it is dropped.
const REPORT_FOR: Duration = Duration::from_secs(600);
/// How long a stopped try may take to die and be measured before the worker lets it go
/// unmeasured.
const MEASURE_WITHIN: Duration = Duration::from_secs(5);

/// What a try keeps in its folder: the server that gave it and the offer (written before
/// it starts), and the process group's handle (written once the server recorded the place,
/// before the gate opens): what a restarted worker finds it by.
const OFFERED: &str = "offered.json";
const GROUP: &str = "group.json";

/// Starts the try `offered` in a task of its own, holding `permit` (its slot) until it ends.
/// An offer whose token is not one path component (it names the try's folder, which goes
/// away with the try) is dropped: the server loses that try at the next heartbeats.
pub(super) fn start(
    worker: Arc<Worker>,
    client: Arc<Client>,
    server: usize,
    offered: Value,
    permit: OwnedSemaphorePermit,
) {
    let token = offered["token"].as_str().unwrap_or_default().to_owned();
    if let Err(e) = try_dir(&worker.work_dir, &token) {
        tracing::warn!(server = client.address(), error = %e, "an offer with a token that names no folder: dropped");
        return;
    }
    spawn(
        worker,
        client,
        server,
        token,
        Some(permit),
        move |task, stop| Box::pin(async move { task.run(offered, stop).await }),
    );
}

/// Takes up again the tries an earlier life of this worker left in its work dir: one whose
/// process still runs (or ended meanwhile) is watched and reported as if never left; one
/// that never passed its gate is dropped (it ran nothing); one from a server no longer
/// served is stopped.
pub(super) async fn recover(worker: &Arc<Worker>, clients: &[Arc<Client>]) {
    let Ok(entries) = std::fs::read_dir(worker.work_dir.join("tries")) else {
        return;
    };
    for dir in entries.filter_map(|e| Some(e.ok()?.path())) {
        let token = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        // Only folders a try of this worker could have made: nothing else is touched.
        let token = token.filter(|t| try_dir(&worker.work_dir, t).is_ok());
        if token.is_none() {
            continue;
        }
        let offered = std::fs::read(dir.join(OFFERED)).ok();
        let offered: Option<Value> = offered.and_then(|b| serde_json::from_slice(&b).ok());
        let handle = std::fs::read_to_string(dir.join(GROUP)).ok();
        let (Some(token), Some(offered), Some(handle)) = (token, offered, handle) else {
            let _ = std::fs::remove_dir_all(&dir);
            continue;
        };
        let server = offered["server"].as_str().unwrap_or_default();
        let Some(at) = clients.iter().position(|c| c.address() == server) else {
            tracing::warn!(
                token,
                server,
                "a try left by a server no longer served: stopping it"
            );
            let _ = apollo11_shell::shell::kill(&handle).await;
            let _ = std::fs::remove_dir_all(&dir);
            continue;
        };
        eprintln!("worker: taking up again try {token} left by its earlier life");
        let permit = worker.slots.clone().try_acquire_owned().ok();
        let offer = offered["offered"].clone();
        spawn(
            worker.clone(),
            clients[at].clone(),
            at,
            token,
            permit,
            move |task, stop| Box::pin(async move { task.resume(offer, handle, stop).await }),
        );
    }
}

type Running = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Runs `work` for the try `token` in a task of its own, the try held (its heartbeat names
/// it, a stop reaches it) until it ends.
fn spawn(
    worker: Arc<Worker>,
    client: Arc<Client>,
    server: usize,
    token: String,
    permit: Option<OwnedSemaphorePermit>,
    work: impl FnOnce(Arc<Task>, watch::Receiver<bool>) -> Running + Send + 'static,
) {
    let (stop_tx, stop) = watch::channel(false);
    (worker.held.lock().unwrap_or_else(|p| p.into_inner()))
        .insert(token.clone(), (server, stop_tx));
    tokio::spawn(async move {
        let task = Arc::new(Task {
            dir: try_dir(&worker.work_dir, &token)
                .expect("tokens are checked before their try runs"),
            worker: worker.clone(),
            client,
            token: token.clone(),
            usage: std::sync::Mutex::default(),
            stop: stop.clone(),
        });
        work(task.clone(), stop).await;
        let _ = std::fs::remove_dir_all(&task.dir);
        (worker.held.lock().unwrap_or_else(|p| p.into_inner())).remove(&token);
        drop(permit);
    });
}

struct Task {
    worker: Arc<Worker>,
    client: Arc<Client>,
    token: String,
    /// Its folder in the work dir.
    dir: PathBuf,
    /// What its process used, once it ended, for the result.
    usage: std::sync::Mutex<Option<Usage>>,
    /// Says when the server stops the try.
    stop: watch::Receiver<bool>,
}

impl Task {
    fn path(&self, what: &str) -> String {
        format!("/api/v1/worker/tries/{}/{what}", self.token)
    }

    fn files(&self) -> StepFiles {
        StepFiles {
            log: self.dir.join("log"),
            output: self.dir.join("output"),
            payload: self.dir.join("payload"),
            inputs: self.dir.join("inputs"),
            params: self.dir.join("params.json"),
            retry_after: self.dir.join("retry-after"),
        }
    }

    async fn run(&self, offered: Value, mut stop: watch::Receiver<bool>) {
        let job: Job = match serde_json::from_value(offered["job"].clone()) {
            Ok(job) => job,
            Err(e) => {
                let refused = Err(StepError::fatal(format!(
                    "the worker cannot read the try: {e}"
                )));
                self.report(&Outcome::of(&refused, None), &mut stop).await;
                return;
            }
        };
        let kept = json!({"server": self.client.address(), "offered": offered});
        if let Err(e) = write_new(&self.dir, OFFERED, kept.to_string().as_bytes()) {
            let failed = Err(StepError::retryable(format!(
                "the worker cannot keep the try in its work dir: {e}"
            )));
            self.report(&Outcome::of(&failed, None), &mut stop).await;
            return;
        }
        tracing::info!(token = %self.token, run = %job.run_id, step = %job.step, attempt = job.attempt, "running a try");
        let files = self.files();
        let exit = self.dir.join("exit");
        let at = self.at(&files, &exit);
        let running = execute(&job, &at, self);
        self.follow(running, &files, stop).await;
    }

    /// Watches a try an earlier life of the worker started, as [`Task::run`] would have.
    async fn resume(&self, offered: Value, handle: String, stop: watch::Receiver<bool>) {
        let Ok(job) = serde_json::from_value::<Job>(offered["job"].clone()) else {
            let _ = apollo11_shell::shell::kill(&handle).await;
            return;
        };
        let files = self.files();
        let exit = self.dir.join("exit");
        let at = self.at(&files, &exit);
        let running = reattach(&job, &at, &handle, self);
        self.follow(running, &files, stop).await;
        // A stop killed the group through the executor's guard only in this life.
        let _ = apollo11_shell::shell::kill(&handle).await;
    }

    fn at<'a>(&'a self, files: &'a StepFiles, exit: &'a Path) -> Files<'a> {
        Files {
            files,
            base: &self.worker.work_dir,
            base_words: "the worker's work dir",
            exit: Some(exit),
        }
    }

    /// Sends the log while `running` runs, then its result. A stop ends `running` (the
    /// executor kills the process group and measures it): its result then goes once,
    /// refused, for what it used.
    async fn follow(
        &self,
        running: impl std::future::Future<Output = Result<Output, StepError>>,
        files: &StepFiles,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut sent = 0;
        tokio::pin!(running);
        let result = loop {
            tokio::select! {
                result = &mut running => break Some(result),
                () = stopped(&mut stop) => break tokio::time::timeout(MEASURE_WITHIN, &mut running).await.ok(),
                () = tokio::time::sleep(LOG_EVERY) => sent = self.send_log(&files.log, sent).await,
            }
        };
        self.send_log(&files.log, sent).await;
        if let Some(result) = result {
            let usage = self.usage.lock().ok().and_then(|mut u| u.take());
            self.report(&Outcome::of(&result, usage), &mut stop).await;
        }
    }

    /// Sends what the log holds past `sent`, in chunks; answers how much is sent.
    async fn send_log(&self, log: &Path, mut sent: u64) -> u64 {
        loop {
            let chunk = match read_from(log, sent, apollo11_client::LOG_CHUNK_BYTES_MAX) {
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
        // Offered at least once, even to a server that said to stop the try: it refuses it
        // (and says so in its log) rather than have it vanish unseen.
        loop {
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
            if tokio::time::Instant::now() >= deadline || *stop.borrow() {
                break;
            }
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
            200 => write_new(&self.dir, GROUP, handle.as_bytes()).map_err(|e| {
                StepError::retryable(format!("the worker cannot keep the try's place: {e}"))
            }),
            409 => Err(StepError::fatal(answer.message())),
            _ => Err(StepError::retryable(answer.message())),
        }
    }

    fn used(&self, usage: Usage) {
        if let Ok(mut slot) = self.usage.lock() {
            *slot = Some(usage);
        }
    }

    async fn stopped(&self) {
        stopped(&mut self.stop.clone()).await;
    }
}

/// Writes `name` in `dir` whole or not at all (a temporary file renamed), `dir` made first.
fn write_new(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    apollo11_shell::files::create_private_dir(dir)?;
    let temporary = dir.join(format!("{name}.new"));
    apollo11_shell::files::create_private_file(&temporary)?.write_all(bytes)?;
    std::fs::rename(&temporary, dir.join(name))
}

/// The folder of the try `token` in `work_dir`; an error for a token that is not one path
/// component (empty, `..`, a `/`): it would name another folder, which goes away with the try.
fn try_dir(work_dir: &Path, token: &str) -> Result<PathBuf, String> {
    apollo11_core::check_name(apollo11_core::NameKind::Run, token)
        .map_err(|e| format!("token `{}`: {e}", token.escape_debug()))?;
    Ok(work_dir.join("tries").join(token))
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

#[cfg(test)]
mod tests {
    use super::try_dir;
    use std::path::Path;

    #[test]
    fn a_token_names_one_folder_under_tries_or_is_refused() {
        let work = Path::new("/w");
        assert_eq!(
            try_dir(work, "dfd8d3b886a0c60001").unwrap(),
            Path::new("/w/tries/dfd8d3b886a0c60001")
        );
        for bad in ["", "..", ".", "a/b", "../../etc", "a\0b"] {
            assert!(try_dir(work, bad).is_err(), "{bad:?}");
        }
    }
}
