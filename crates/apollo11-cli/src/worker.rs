//! `apollo11 worker`: runs the steps servers place on it. Outbound connections only: for each
//! `--server`, a loop long-polls for tries while a slot is free and a loop heartbeats with
//! the tries held (stopping those the server answers it no longer wants). Each try runs as
//! the engine runs a local one (`apollo11_shell::shell::execute`), in the work dir, its log
//! sent to the server as it grows and its result reported until the server takes or
//! refuses it (`worker/task.rs`). A server out of reach is retried with a growing pause, and
//! said so; a refused token ends the worker.

mod task;

use crate::{run::Interrupts, Exit};
use apollo11_client::{Answer, Client};
use apollo11_dispatch::{Hello, Labels};
use serde_json::json;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Semaphore};

/// What `worker` was asked.
pub struct WorkerOptions {
    pub servers: Vec<String>,
    pub labels: Vec<String>,
    pub slots: u32,
    pub token_file: Option<PathBuf>,
    pub name: Option<String>,
    pub work_dir: PathBuf,
    pub heartbeat_every: Duration,
}

/// A worker's tries at work, by token: the server that gave each and its stop signal.
type Held = Arc<Mutex<HashMap<String, (usize, watch::Sender<bool>)>>>;

/// What every loop of a worker shares.
pub(crate) struct Worker {
    hello: Hello,
    work_dir: PathBuf,
    slots: Arc<Semaphore>,
    held: Held,
}

impl Worker {
    fn held_of(&self, server: usize) -> Vec<String> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        (held.iter())
            .filter(|(_, (s, _))| *s == server)
            .map(|(t, _)| t.clone())
            .collect()
    }

    fn stop(&self, token: &str) {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, stop)) = held.get(token) {
            tracing::warn!(token, "the server stopped a try; killing its process group");
            let _ = stop.send(true);
        }
    }
}

pub async fn run(options: WorkerOptions) -> Result<Exit, Exit> {
    let mut interrupts = Interrupts::install()?;
    let token = options
        .token_file
        .as_deref()
        .map(crate::flags::read_token)
        .transpose()
        .map_err(|e| Exit::fail(2, e))?;
    let clients = (options.servers.iter())
        .map(|s| address(s).map(|a| Client::new(a, token.clone())))
        .collect::<Result<Vec<_>, _>>()?;
    if clients.is_empty() {
        return Err(Exit::fail(
            2,
            "--server: give the URL of at least one server",
        ));
    }
    let hello = hello(&options)?;
    apollo11_shell::files::create_private_dir(&options.work_dir.join("tries"))
        .map_err(|e| Exit::fail(1, format!("--work-dir {}: {e}", options.work_dir.display())))?;
    let work_dir = std::path::absolute(&options.work_dir)
        .map_err(|e| Exit::fail(2, format!("--work-dir {}: {e}", options.work_dir.display())))?;
    eprintln!(
        "worker {} ({} slots, labels {}) serving {}",
        hello.name,
        hello.slots,
        apollo11_shell::shell::label_words(&hello.labels),
        options.servers.join(", ")
    );
    let worker = Arc::new(Worker {
        slots: Arc::new(Semaphore::new(hello.slots as usize)),
        hello,
        work_dir,
        held: Arc::default(),
    });
    let clients: Vec<Arc<Client>> = clients.into_iter().map(Arc::new).collect();
    task::recover(&worker, &clients).await;
    let (refused_tx, mut refused) = tokio::sync::mpsc::channel::<String>(1);
    for (i, client) in clients.into_iter().enumerate() {
        tokio::spawn(take_loop(
            worker.clone(),
            client.clone(),
            i,
            refused_tx.clone(),
        ));
        tokio::spawn(heartbeat_loop(
            worker.clone(),
            client,
            i,
            options.heartbeat_every,
        ));
    }
    tokio::select! {
        Some(why) = refused.recv() => Err(Exit::fail(2, why)),
        () = interrupts.recv() => {
            eprintln!("worker stopping: its running tries are killed");
            Ok(Exit::code(130))
        }
    }
}

/// `host:port` of a `--server` (`http://host:port`, or `host:port`).
/// `GET path` of the server at `server` (`--server URL`), or `POST` of `body`, with the
/// token of `token_file`: its JSON; exit 2 for a request it refuses (400, 404), 3 for the
/// rest of what fails.
pub async fn fetch(
    server: &str,
    token_file: Option<&std::path::Path>,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Result<serde_json::Value, Exit> {
    let token = token_file
        .map(crate::flags::read_token)
        .transpose()
        .map_err(|e| Exit::fail(2, e))?;
    let client = Client::new(address(server)?, token);
    let answer = match body {
        Some(body) => client.post(path, body).await,
        None => client.get(path).await,
    }
    .map_err(|e| Exit::fail(3, format!("--server {server}: {e}")))?;
    match answer.status {
        200..=299 => Ok(answer.json()),
        400 | 404 => Err(Exit::fail(
            2,
            format!("--server {server}: {}", answer.message()),
        )),
        _ => Err(Exit::fail(
            3,
            format!("--server {server}: {}", answer.message()),
        )),
    }
}

fn address(server: &str) -> Result<String, Exit> {
    let rest = server.strip_prefix("http://").unwrap_or(server);
    let rest = rest.trim_end_matches('/');
    if server.starts_with("https://") || rest.contains('/') || !rest.contains(':') {
        return Err(Exit::fail(
            2,
            format!("--server {server}: give http://HOST:PORT (the worker speaks HTTP; put TLS in a proxy beside it)"),
        ));
    }
    Ok(rest.to_owned())
}

/// Who the worker says it is: its name (the host's by default) and its labels with
/// `hostname=`.
fn hello(options: &WorkerOptions) -> Result<Hello, Exit> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .map_err(|e| Exit::fail(1, format!("reading this host's name: {e}")))?;
    let name = options.name.clone().unwrap_or_else(|| host.clone());
    if !apollo11_shell::definition::is_label(&name) {
        return Err(Exit::fail(
            2,
            format!("--name {name}: 1 to 64 of letters, digits, `_`, `-`, `.`"),
        ));
    }
    let mut labels = Labels::from([("hostname".to_owned(), host)]);
    for pair in options.labels.iter().flat_map(|l| l.split(',')) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| Exit::fail(2, format!("--labels: `{pair}` is not NAME=VALUE")))?;
        if !apollo11_shell::definition::is_label(k) || v.is_empty() {
            return Err(Exit::fail(2, format!("--labels: `{pair}`: a label is NAME=VALUE, the name letters, digits, `_`, `-`, `.`")));
        }
        labels.insert(k.to_owned(), v.to_owned());
    }
    if options.slots == 0 || options.slots > 1024 {
        return Err(Exit::fail(2, "--slots: 1 to 1024"));
    }
    Ok(Hello {
        name,
        labels,
        slots: options.slots,
        version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}

/// The pause after the `failures`-th failed call in a row: 1 s, doubling, at most 30 s.
pub(crate) fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1 << failures.saturating_sub(1).min(5)).min(Duration::from_secs(30))
}

/// Calls `path` with `body`; a refused token is sent to `refused` (it ends the worker).
pub(crate) async fn call(
    client: &Client,
    path: &str,
    body: &serde_json::Value,
) -> Result<Answer, String> {
    let answer = client.post(path, body).await?;
    if answer.status == 401 {
        return Err(format!(
            "{}: the server refused the worker token: {}",
            client.address(),
            answer.message()
        ));
    }
    Ok(answer)
}

async fn take_loop(
    worker: Arc<Worker>,
    client: Arc<Client>,
    server: usize,
    refused: tokio::sync::mpsc::Sender<String>,
) {
    let mut failures = 0;
    loop {
        let Ok(first) = worker.slots.clone().acquire_owned().await else {
            return;
        };
        let free = 1 + worker.slots.available_permits() as u32;
        let body = json!({"worker": worker.hello, "free": free, "wait_ms": 20_000});
        let answer = match call(&client, "/api/v1/worker/take", &body).await {
            Ok(a) if a.status == 200 => a,
            Ok(a) => {
                failures += 1;
                tracing::warn!(server = client.address(), status = a.status, error = %a.message(), "taking tries refused; retrying");
                tokio::time::sleep(backoff(failures)).await;
                continue;
            }
            Err(e) if e.contains("refused the worker token") => {
                let _ = refused.send(e).await;
                return;
            }
            Err(e) => {
                failures += 1;
                let pause = backoff(failures);
                eprintln!(
                    "worker: server {} out of reach ({e}); trying again in {pause:?}",
                    client.address()
                );
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        if failures > 0 {
            eprintln!("worker: server {} reached again", client.address());
            failures = 0;
        }
        let tries = answer.json()["tries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut permits = vec![first];
        for offered in tries {
            let permit = match permits.pop() {
                Some(p) => p,
                // The server gives at most `free`: the rest of the permits are free.
                None => match worker.slots.clone().try_acquire_owned() {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            task::start(worker.clone(), client.clone(), server, offered, permit);
        }
    }
}

async fn heartbeat_loop(worker: Arc<Worker>, client: Arc<Client>, server: usize, every: Duration) {
    loop {
        let body = json!({"worker": worker.hello, "running": worker.held_of(server)});
        match call(&client, "/api/v1/worker/heartbeat", &body).await {
            Ok(a) if a.status == 200 => {
                for token in a.json()["stop"].as_array().into_iter().flatten() {
                    worker.stop(token.as_str().unwrap_or_default());
                }
            }
            Ok(a) => {
                tracing::warn!(server = client.address(), status = a.status, error = %a.message(), "heartbeat refused")
            }
            Err(e) => tracing::warn!(server = client.address(), error = %e, "heartbeat failed"),
        }
        tokio::time::sleep(every).await;
    }
}

/// `apollo11 workers`: the workers `server` hears from and its queue.
pub async fn list(
    server: &str,
    token_file: Option<&std::path::Path>,
    json: bool,
) -> Result<Exit, Exit> {
    let body = fetch(server, token_file, "/api/v1/workers", None).await?;
    if json {
        println!("{body}");
        return Ok(Exit::code(0));
    }
    println!(
        "{:<24} {:>5} {:>7} {:>9}  LABELS",
        "WORKER", "SLOTS", "RUNNING", "HEARD"
    );
    for w in body["workers"].as_array().into_iter().flatten() {
        let labels: Vec<String> = (w["labels"].as_object().into_iter().flatten())
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        println!(
            "{:<24} {:>5} {:>7} {:>7}ms  {}",
            w["name"].as_str().unwrap_or_default(),
            w["slots"],
            w["running"],
            w["last_heartbeat_ms_ago"],
            labels.join(",")
        );
    }
    for q in body["queued"].as_array().into_iter().flatten() {
        let matched = if q["matched"] == true {
            ""
        } else {
            " (no connected worker carries these labels)"
        };
        println!(
            "queued: {} tries waiting for {}{matched}",
            q["tries"], q["needs"]
        );
    }
    Ok(Exit::code(0))
}
