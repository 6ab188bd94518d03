//! Steps on workers: a server in this process and real `apollo11 worker` processes
//! (`APOLLO11_BIN`, built in release by `cargo xtask bench`).
//! - Dispatch throughput: runs of no-op shell steps (`true`) through the server, placed on 4
//!   workers of 8 slots, side by side with the same steps in the server's process, and with
//!   the bound both share: the same tries' processes and files alone, run by the executor
//!   32 at a time with no engine, log or server around them.
//! - Dispatch latency: one-step runs started at a steady 100 a second; from each step's
//!   `started` (the try is ready) to its `placed` (its process started on the worker, behind
//!   its gate), as the server stamped both.
//! - Memory: the server's resident set per connected idle worker (workers that heartbeat and
//!   hold nothing), and the dispatcher's per queued try (tries of a no-op step's size
//!   waiting for labels no worker has).

use crate::catalog::Scenario;
use crate::noop_try::{self, Nowhere};
use crate::report::{quantile_us, resident_bytes, Report};
use crate::server::host::Hosted;
use crate::Setup;
use anyhow::{ensure, Context, Result};
use apollo11_client::Client;
use apollo11_dispatch::{Config, Dispatcher, Labels, TryRef};
use apollo11_server::ServerConfig;
use apollo11_shell::shell::Limits;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WORKERS: usize = 4;
const SLOTS: u32 = 8;

pub async fn run(setup: &Setup) -> Result<Report> {
    let mut report = Report::new(Scenario::Workers);
    report.header();
    let (runs, items) = if setup.quick { (4, 250) } else { (10, 1_000) };
    let steps = runs * items;
    let bound = processes(setup, steps).await?;
    let local = throughput(setup, runs, items, false).await?;
    let placed = throughput(setup, runs, items, true).await?;
    report.row(
        "processes",
        vec![
            json!(format!(
                "{steps} no-op tries' processes and files alone, {} at a time",
                WORKERS as u32 * SLOTS
            )),
            json!(bound),
            json!("steps/s"),
            json!("(the bound)"),
        ],
    );
    report.row(
        "in_process",
        vec![
            json!(format!("{steps} no-op steps in the server's process")),
            json!(local),
            json!("steps/s"),
            json!(format!("{:.2} of the bound", local / bound)),
        ],
    );
    report.row(
        "on_workers",
        vec![
            json!(format!(
                "{steps} no-op steps on {WORKERS} workers × {SLOTS} slots"
            )),
            json!(placed),
            json!("steps/s"),
            json!(format!(
                "{:.2}× in-process, {:.2} of the bound",
                placed / local,
                placed / bound
            )),
        ],
    );
    let seconds = if setup.quick { 3 } else { 10 };
    let (p50, p99) = latency(setup, seconds).await?;
    report.row(
        "latency_p50",
        vec![
            json!("ready → started on a worker, p50 (100 steps/s)"),
            json!(p50),
            json!("ms"),
            json!(""),
        ],
    );
    report.row(
        "latency_p99",
        vec![
            json!("ready → started on a worker, p99 (100 steps/s)"),
            json!(p99),
            json!("ms"),
            json!(""),
        ],
    );
    let idle = if setup.quick { 200 } else { 1_000 };
    let per_worker = idle_workers(setup, idle).await?;
    report.row(
        "memory_per_worker",
        vec![
            json!(format!("server memory per idle worker ({idle} workers)")),
            json!(per_worker),
            json!("bytes"),
            json!(""),
        ],
    );
    let queued = if setup.quick { 10_000 } else { 100_000 };
    let per_try = queued_tries(queued).await;
    report.row(
        "memory_per_try",
        vec![
            json!(format!("dispatcher memory per queued try ({queued} tries)")),
            json!(per_try),
            json!("bytes"),
            json!(""),
        ],
    );
    Ok(report)
}

/// Steps per second of `n` tries of a no-op shell step run by the executor alone, as many
/// at a time as the workers have slots: each try's folder and files, its gated process
/// group, its exit and output read; no event appended, no HTTP exchanged.
async fn processes(setup: &Setup, n: usize) -> Result<f64> {
    let dir = setup.dir.join("workers-processes");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let dir = std::path::absolute(dir)?;
    let at_once = (WORKERS as u32 * SLOTS) as usize;
    let began = Instant::now();
    let mut running = tokio::task::JoinSet::new();
    for i in 0..n {
        if running.len() == at_once {
            running.join_next().await.expect("tries run")??;
        }
        let dir = dir.clone();
        running.spawn(async move {
            let step = format!("noop[i{i}]");
            noop_try::run(&dir, &step, 1, Limits::default(), &Nowhere::default()).await
        });
    }
    while let Some(done) = running.join_next().await {
        done??;
    }
    Ok(n as f64 / began.elapsed().as_secs_f64())
}

/// A folder of workflow files with `text` as `NAME.toml`, and the data dir beside it.
fn prepare(dir: &Path, name: &str, text: &str) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    let _ = std::fs::remove_dir_all(dir);
    let workflows = dir.join("workflows");
    std::fs::create_dir_all(&workflows)?;
    std::fs::write(workflows.join(format!("{name}.toml")), text)?;
    Ok((workflows, std::path::absolute(dir.join("data"))?))
}

/// A workflow of `items` no-op steps, placed on `pool=bench` or not.
fn wide(placed: bool) -> String {
    let on = if placed {
        "on = { pool = \"bench\" }\n"
    } else {
        ""
    };
    format!(
        "[workflow]\nname = \"wide\"\nmax_concurrency = {}\n[params.items]\ntype = \"list\"\ndefault = [\"x\"]\n\
         [[steps]]\nname = \"noop\"\nfor_each = \"${{params.items}}\"\nrun = \"true\"\nidempotency = \"natural\"\n{on}",
        WORKERS as u32 * SLOTS
    )
}

/// `apollo11 worker`s on `addr`.
fn workers(dir: &Path, addr: &str, n: usize) -> Result<Vec<Killed>> {
    let bin = std::env::var("APOLLO11_BIN")
        .context("APOLLO11_BIN: the apollo11 binary (cargo xtask bench sets it)")?;
    (0..n)
        .map(|i| {
            let child = Command::new(&bin)
                .args(["worker", "--server", &format!("http://{addr}")])
                .args(["--labels", "pool=bench", "--slots", &SLOTS.to_string()])
                .args([
                    "--name",
                    &format!("b{i}"),
                    "--heartbeat-every",
                    "1s",
                    "--work-dir",
                ])
                .arg(dir.join(format!("worker-{i}")))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            Ok(Killed(child))
        })
        .collect()
}

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn serve(dir: &Path, name: &str, text: &str) -> Result<(Hosted, Client)> {
    let (workflows, data) = prepare(dir, name, text)?;
    let mut config = ServerConfig::new(data, "127.0.0.1:0".parse()?);
    config.workflows = Some(workflows);
    let hosted = Hosted::start(config).await?;
    let client = Client::new(hosted.addr.to_string(), None);
    Ok((hosted, client))
}

async fn start(client: &Client, body: Value) -> Result<()> {
    let answer = client
        .post("/api/v1/runs", &body)
        .await
        .map_err(anyhow::Error::msg)?;
    ensure!(answer.status == 201, "starting a run: {}", answer.message());
    Ok(())
}

/// Waits until every run of `runs` succeeded.
async fn all_succeeded(client: &Client, runs: &[String]) -> Result<()> {
    for run in runs {
        loop {
            let answer = client
                .get(&format!("/api/v1/runs/{run}"))
                .await
                .map_err(anyhow::Error::msg)?;
            match answer.json()["state"].as_str() {
                Some("succeeded") => break,
                Some("running") => tokio::time::sleep(Duration::from_millis(50)).await,
                other => anyhow::bail!("run {run} is {other:?}"),
            }
        }
    }
    Ok(())
}

/// Steps per second of `runs` runs of `items` no-op steps.
async fn throughput(setup: &Setup, runs: usize, items: usize, placed: bool) -> Result<f64> {
    let dir = setup.dir.join(if placed {
        "workers-placed"
    } else {
        "workers-local"
    });
    let (hosted, client) = serve(&dir, "wide", &wide(placed)).await?;
    let _workers = if placed {
        workers(&dir, &hosted.addr.to_string(), WORKERS)?
    } else {
        Vec::new()
    };
    if placed {
        wait_connected(&client, WORKERS).await?;
    }
    let list: Vec<String> = (0..items).map(|i| format!("i{i}")).collect();
    let ids: Vec<String> = (0..runs).map(|r| format!("r{r}")).collect();
    let began = Instant::now();
    for id in &ids {
        start(
            &client,
            json!({"workflow": "wide", "run_id": id, "params": {"items": list}}),
        )
        .await?;
    }
    all_succeeded(&client, &ids).await?;
    let rate = (runs * items) as f64 / began.elapsed().as_secs_f64();
    hosted.stop().await?;
    Ok(rate)
}

async fn wait_connected(client: &Client, n: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = client
            .get("/api/v1/workers")
            .await
            .map_err(anyhow::Error::msg)?
            .json();
        if listed["workers"].as_array().is_some_and(|w| w.len() >= n) {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "{n} workers did not connect in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// p50 and p99, in ms, of ready → placed of one-step runs started at 100 a second.
async fn latency(setup: &Setup, seconds: u64) -> Result<(f64, f64)> {
    let dir = setup.dir.join("workers-latency");
    let text = "[workflow]\nname = \"one\"\n[[steps]]\nname = \"noop\"\nrun = \"true\"\nidempotency = \"natural\"\non = { pool = \"bench\" }\n";
    let (hosted, client) = serve(&dir, "one", text).await?;
    let _workers = workers(&dir, &hosted.addr.to_string(), WORKERS)?;
    wait_connected(&client, WORKERS).await?;
    let n = seconds * 100;
    let began = Instant::now();
    let mut ids = Vec::new();
    for i in 0..n {
        tokio::time::sleep_until((began + Duration::from_millis(10 * i)).into()).await;
        let id = format!("l{i}");
        start(&client, json!({"workflow": "one", "run_id": id})).await?;
        ids.push(id);
    }
    all_succeeded(&client, &ids).await?;
    let mut delays = Vec::new();
    for id in &ids {
        let events = client
            .get(&format!("/api/v1/runs/{id}/events"))
            .await
            .map_err(anyhow::Error::msg)?
            .json();
        let at = |kind: &str| {
            (events["events"].as_array().into_iter().flatten())
                .find(|e| e["kind"] == kind)
                .and_then(|e| e["at_ms"].as_u64())
        };
        let (ready, placed) = (
            at("started").context("no started")?,
            at("placed").context("no placed")?,
        );
        delays.push(Duration::from_millis(placed - ready));
    }
    hosted.stop().await?;
    delays.sort();
    Ok((
        quantile_us(&delays, 0.5) / 1000.0,
        quantile_us(&delays, 0.99) / 1000.0,
    ))
}

/// The server's resident bytes per worker, for `n` workers that heartbeat and hold nothing.
async fn idle_workers(setup: &Setup, n: usize) -> Result<f64> {
    let dir = setup.dir.join("workers-idle");
    let (hosted, client) = serve(&dir, "one", "[workflow]\nname = \"one\"\n[[steps]]\nname = \"s\"\nrun = \"true\"\nidempotency = \"natural\"\n").await?;
    let beat = |i: usize| {
        let labels: Labels = [
            ("pool".to_owned(), "idle".to_owned()),
            ("hostname".to_owned(), format!("host-{i:05}")),
        ]
        .into();
        json!({"worker": {"name": format!("idle-{i:05}"), "labels": labels, "slots": 8, "version": "0.1.0"}, "running": []})
    };
    for i in 0..16 {
        client
            .post("/api/v1/worker/heartbeat", &beat(i))
            .await
            .map_err(anyhow::Error::msg)?;
    }
    let before = resident_bytes()?;
    for i in 16..n + 16 {
        client
            .post("/api/v1/worker/heartbeat", &beat(i))
            .await
            .map_err(anyhow::Error::msg)?;
    }
    let after = resident_bytes()?;
    let listed = client
        .get("/api/v1/workers")
        .await
        .map_err(anyhow::Error::msg)?
        .json();
    ensure!(
        listed["workers"].as_array().map_or(0, Vec::len) == n + 16,
        "not every idle worker is listed"
    );
    hosted.stop().await?;
    Ok(after.saturating_sub(before) as f64 / n as f64)
}

/// The dispatcher's resident bytes per queued try, each with a no-op step's job.
async fn queued_tries(n: usize) -> f64 {
    {
        let dispatcher = Dispatcher::new(Config::default());
        let job =
            json!({"run_id": "r1", "step": "noop[i00000]", "attempt": 1, "compensation": false,
            "command": "true", "env": [], "pass": null, "dir": "/srv/workflows", "inputs": {},
            "params": {}, "payload": null, "non_retryable": []})
            .to_string();
        let needs: Labels = [("pool".to_owned(), "nobody".to_owned())].into();
        let before = resident_bytes().unwrap_or(0);
        let tickets: Vec<_> = (0..n)
            .map(|i| {
                let what = TryRef {
                    run_id: "r1".into(),
                    step: format!("noop[i{i:05}]"),
                    attempt: 1,
                    compensation: false,
                };
                dispatcher.submit(needs.clone(), what, job.clone().into_bytes())
            })
            .collect();
        let after = resident_bytes().unwrap_or(0);
        assert_eq!(dispatcher.queued()[0].tries as usize, tickets.len());
        after.saturating_sub(before) as f64 / n as f64
    }
}
