//! A server on a fresh data dir and a fresh workflows folder, on a free loopback port, with
//! a client of it.

use apollo11_client::Client;
use apollo11_server::{Server, ServerConfig};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Workflows every test server knows: `quick` (two steps that succeed), `gated` (a step
/// that waits for the file `gate` in the workflows folder), `stuck` (a step that fails for
/// good under `on_failure = "pause"`), `undone` (as `gated`, its steps in the other order,
/// each with a compensation that leaves a file `<step>-undone` in the workflows folder),
/// `undo_fails` (a step whose compensation fails for good, then one that fails for good
/// under `on_failure = "rollback"`), `placed` (a step that waits for a worker carrying
/// `role=db`, retried on a lost worker), `approve` (a step that waits for a signal, then
/// one that prints its data).
pub const WORKFLOWS: &[(&str, &str)] = &[
    (
        "undone/workflow.toml",
        r#"[workflow]
name = "undone"
[[steps]]
name = "first"
run = "true"
compensate = "touch ../first-undone"
idempotency = "natural"
[[steps]]
name = "last"
run = "while [ ! -f ../gate ]; do sleep 0.02; done"
compensate = "touch ../last-undone"
idempotency = "natural"
depends_on = ["first"]
"#,
    ),
    (
        "undo_fails.toml",
        r#"[workflow]
name = "undo_fails"
on_failure = "rollback"
[defaults]
retry = { max_attempts = 1 }
[[steps]]
name = "book"
run = "true"
compensate = "exit 4"
idempotency = "natural"
[[steps]]
name = "charge"
run = "exit 3"
idempotency = "natural"
depends_on = ["book"]
"#,
    ),
    (
        "quick.toml",
        r#"[workflow]
name = "quick"
[[steps]]
name = "a"
run = "echo hello from a"
idempotency = "natural"
[[steps]]
name = "b"
run = "echo b"
idempotency = "natural"
depends_on = ["a"]
"#,
    ),
    (
        "gated/workflow.toml",
        r#"[workflow]
name = "gated"
[[steps]]
name = "wait"
run = "while [ ! -f ../gate ]; do sleep 0.02; done"
idempotency = "natural"
[[steps]]
name = "after"
run = "true"
idempotency = "natural"
depends_on = ["wait"]
"#,
    ),
    (
        "placed.toml",
        r#"[workflow]
name = "placed"
[[steps]]
name = "db"
run = "true"
idempotency = "natural"
on = { role = "db" }
retry = { max_attempts = 3, initial = "50ms" }
"#,
    ),
    (
        "approve.toml",
        r#"[workflow]
name = "approve"
[[steps]]
name = "gate"
wait = "approval"
deadline = "1h"
[[steps]]
name = "after"
run = "echo ${steps.gate.output}"
idempotency = "natural"
depends_on = ["gate"]
"#,
    ),
    (
        "stuck.toml",
        r#"[workflow]
name = "stuck"
on_failure = "pause"
[[steps]]
name = "fails"
run = "echo failing; exit 3"
idempotency = "natural"
retry = { max_attempts = 1 }
"#,
    ),
];

/// Writes [`WORKFLOWS`] into `dir`.
pub fn write_workflows(dir: &Path) {
    for (file, text) in WORKFLOWS {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// A running server and what it runs on.
pub struct TestServer {
    pub client: Client,
    pub data: tempfile::TempDir,
    pub workflows: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<()>>,
}

impl TestServer {
    /// A server with the test workflows and no token.
    pub async fn start() -> TestServer {
        TestServer::start_with(None).await
    }

    /// A server requiring `token` if given.
    pub async fn start_with(token: Option<&str>) -> TestServer {
        TestServer::start_configured(token, |_| {}).await
    }

    /// A server requiring `token` if given, its config changed by `configure`.
    pub async fn start_configured(
        token: Option<&str>,
        configure: impl FnOnce(&mut ServerConfig),
    ) -> TestServer {
        TestServer::start_on(tempfile::tempdir().unwrap(), token, configure).await
    }

    /// A server on the data dir `data` (one a server used before, say), requiring `token` if
    /// given, its config changed by `configure`.
    pub async fn start_on(
        data: tempfile::TempDir,
        token: Option<&str>,
        configure: impl FnOnce(&mut ServerConfig),
    ) -> TestServer {
        let workflows = tempfile::tempdir().unwrap();
        write_workflows(workflows.path());
        let mut config = ServerConfig::new(data.path().to_owned(), "127.0.0.1:0".parse().unwrap());
        config.workflows = Some(workflows.path().to_owned());
        config.token = token.map(str::to_owned);
        configure(&mut config);
        let server = Server::bind(config).await.unwrap();
        let client = Client::new(server.local_addr().to_string(), token.map(str::to_owned));
        let (stop, stopped) = oneshot::channel();
        let served = tokio::spawn(async move {
            server
                .run(async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        TestServer {
            client,
            data,
            workflows,
            stop: Some(stop),
            served: Some(served),
        }
    }

    /// Stops the server and waits until it has.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.served.take().unwrap().await.unwrap();
    }

    /// Lets the `gated` workflow's step finish.
    pub fn open_gate(&self) {
        std::fs::write(self.workflows.path().join("gate"), "").unwrap();
    }

    /// Starts a run of `workflow` under `run_id`.
    pub async fn start_run(&self, workflow: &str, run_id: &str) {
        let body = serde_json::json!({"workflow": workflow, "run_id": run_id});
        let answer = self.client.post("/api/v1/runs", &body).await.unwrap();
        assert_eq!(answer.status, 201, "{}", answer.message());
    }

    /// `POST /api/v1/workflows/reload`.
    pub async fn reload(&self) -> apollo11_client::Answer {
        let empty = serde_json::json!({});
        let answer = self.client.post("/api/v1/workflows/reload", &empty);
        answer.await.unwrap()
    }

    /// The run object.
    pub async fn run(&self, run_id: &str) -> Value {
        let answer = self
            .client
            .get(&format!("/api/v1/runs/{run_id}"))
            .await
            .unwrap();
        assert_eq!(answer.status, 200, "{}", answer.message());
        answer.json()
    }

    /// Waits until `check` holds for the run object (10 s at most).
    pub async fn wait_for(
        &self,
        run_id: &str,
        what: &str,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        wait_for(&self.client, run_id, what, check).await
    }
}

/// Waits until `check` holds for the run object of `run_id` (10 s at most).
pub async fn wait_for(
    client: &Client,
    run_id: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let run = client
            .get(&format!("/api/v1/runs/{run_id}"))
            .await
            .unwrap()
            .json();
        if check(&run) {
            return run;
        }
        assert!(
            Instant::now() < deadline,
            "run {run_id} never {what}: {run}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An answer with what archiving a run changes taken out (`allowed`, `refused`, `archived`
/// of a run object): the rest is answered from an archive as it was from the live log.
pub fn kept(mut answer: Value) -> Value {
    if let Some(object) = answer.as_object_mut() {
        for key in ["allowed", "refused", "archived"] {
            object.remove(key);
        }
    }
    answer
}

/// Asserts an answer is the error object with `status` and `code`.
pub fn assert_error(answer: &apollo11_client::Answer, status: u16, code: &str) {
    let body = answer.json();
    assert_eq!(answer.status, status, "{body} {:?}", answer.body);
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert_eq!(answer.header("content-type"), Some("application/json"));
}
