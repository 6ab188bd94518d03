//! The same workload of shell steps (`true`, the lightest step a server can run: it runs
//! only workflow files) driven two ways: by an `Engine` alone in-process, as `apollo11 run`
//! drives it, and by a server, each run started through the API, with what a UI attaches:
//! an event stream on every run, the runs list polled each second and the newest run's
//! state every 100 ms. The streams also give the delay from each event's stamp to its
//! arrival.

use super::api::run_id;
use super::host::{isolated, Hosted};
use super::http::{Conn, Events};
use anyhow::{bail, ensure, Context, Result};
use apollo11_client::Client;
use apollo11_log::{FileLog, Options};
use apollo11_runtime::{Engine, EngineConfig, RunId, RunStatus};
use apollo11_server::ServerConfig;
use apollo11_shell::run_folder;
use apollo11_shell::{definition, shell};
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The benchmark workflow's name.
const NAME: &str = "bench";

/// How often the UI polls the newest run's state; the runs list every tenth time.
const UI_POLL: Duration = Duration::from_millis(100);

/// How long a run's stream may stay quiet before the benchmark gives up.
const STALL: Duration = Duration::from_secs(60);

/// Runs of a chain of shell steps, started together.
pub struct Workload {
    /// Its rows' key: `runs` or `chain`.
    pub key: &'static str,
    /// How it is shown.
    pub label: String,
    /// Runs.
    pub runs: u64,
    /// Steps per run, each depending on the one before.
    pub steps: usize,
}

impl Workload {
    fn step(i: usize) -> String {
        format!("s{i:03}")
    }

    /// A fresh `dir` with the workflow file in `dir/workflows`; returns that folder and the
    /// data dir (absolute, as steps need).
    fn prepare(&self, dir: &Path) -> Result<(PathBuf, PathBuf)> {
        let _ = std::fs::remove_dir_all(dir);
        let workflows = dir.join("workflows");
        std::fs::create_dir_all(&workflows)?;
        let mut text = format!("[workflow]\nname = \"{NAME}\"\n");
        for i in 0..self.steps {
            let after = match i {
                0 => String::new(),
                _ => format!("depends_on = [\"{}\"]\n", Workload::step(i - 1)),
            };
            text += &format!(
                "[[steps]]\nname = \"{}\"\nrun = \"true\"\nidempotency = \"natural\"\n{after}",
                Workload::step(i)
            );
        }
        std::fs::write(workflows.join("bench.toml"), text)?;
        Ok((workflows, std::path::absolute(dir.join("data"))?))
    }

    fn total_steps(&self) -> f64 {
        (self.runs as usize * self.steps) as f64
    }
}

/// Steps per second with the engine alone, on a runtime of its own.
pub async fn alone(dir: &Path, workload: &Workload) -> Result<f64> {
    let (workflows, data) = workload.prepare(dir)?;
    let (runs, steps) = (workload.runs, workload.total_steps());
    isolated(move || async move {
        let spec =
            definition::load(&workflows.join("bench.toml")).map_err(|e| anyhow::anyhow!("{e}"))?;
        let store = Arc::new(FileLog::open(&data, Options::default())?);
        let engine = Engine::open(store, EngineConfig::default()).await?;
        let wf = Arc::new(shell::workflow(&spec, &data)?);
        let started = Instant::now();
        let mut handles = Vec::new();
        for r in 0..runs {
            run_folder::create(&data, &run_id(r), &spec)
                .map_err(|e| anyhow::Error::msg(e.to_string()))?;
            handles.push(engine.start(&wf, RunId(run_id(r))).await?);
        }
        for h in handles {
            ensure!(
                h.outcome().await? == RunStatus::Succeeded,
                "a shell run did not succeed"
            );
        }
        let rate = steps / started.elapsed().as_secs_f64();
        engine.close().await;
        Ok(rate)
    })
    .await
}

/// Through a server with a UI attached: steps per second, and the delay of every event
/// stamped after its stream opened, from its stamp to its arrival.
pub async fn served(dir: &Path, workload: &Workload) -> Result<(f64, Vec<Duration>)> {
    let (workflows, data) = workload.prepare(dir)?;
    let mut config = ServerConfig::new(data, "127.0.0.1:0".parse()?);
    config.workflows = Some(workflows);
    let hosted = Hosted::start(config).await?;
    let client = Client::new(hosted.addr.to_string(), None);
    let (done, quit) = watch::channel(false);
    let ui = tokio::spawn(ui(hosted.addr, quit));
    let last = Workload::step(workload.steps - 1);
    let started = Instant::now();
    let mut streams = Vec::new();
    for r in 0..workload.runs {
        let body = json!({"workflow": NAME, "run_id": run_id(r)});
        let answer = client.post("/api/v1/runs", &body).await;
        let answer = answer.map_err(anyhow::Error::msg)?;
        ensure!(answer.status == 201, "starting a run: {}", answer.message());
        let (client, last) = (client.clone(), last.clone());
        streams.push(tokio::spawn(async move {
            follow(Events::open(&client, &run_id(r)).await?, &last).await
        }));
    }
    let mut delays = Vec::new();
    for stream in streams {
        delays.extend(stream.await??);
    }
    let rate = workload.total_steps() / started.elapsed().as_secs_f64();
    let _ = done.send(true);
    ui.await??;
    hosted.stop().await?;
    delays.sort();
    Ok((rate, delays))
}

/// Reads a run's stream until its step `last` succeeds; returns the delays of the events
/// stamped after the stream opened (a stamp is in whole ms and at most 2 ms behind the
/// instant it stands for, so each delay is overstated by less than 2 ms).
async fn follow(mut events: Events, last: &str) -> Result<Vec<Duration>> {
    let mut delays = Vec::new();
    loop {
        let arrival = tokio::time::timeout(STALL, events.next()).await;
        let arrival = arrival.with_context(|| format!("no event for {STALL:?}"))??;
        let event = &arrival.event;
        let stamp_us = 1_000 * event["at_ms"].as_u64().context("an event without at_ms")?;
        if stamp_us > events.opened_us {
            delays.push(Duration::from_micros(
                arrival.at_us.saturating_sub(stamp_us),
            ));
        }
        match event["kind"].as_str() {
            Some("succeeded") if event["step"] == last => return Ok(delays),
            Some("failed" | "run_paused") => bail!("a benchmark run did not succeed: {event}"),
            _ => {}
        }
    }
}

/// What a UI on the server does: the runs list each second, the newest run's state every
/// 100 ms, until `quit`.
async fn ui(addr: SocketAddr, mut quit: watch::Receiver<bool>) -> Result<()> {
    let mut conn = Conn::open(addr).await?;
    let mut tick = tokio::time::interval(UI_POLL);
    let mut newest = None;
    for n in 0u64.. {
        tokio::select! {
            _ = tick.tick() => {}
            _ = quit.changed() => return Ok(()),
        }
        if n % 10 == 0 || newest.is_none() {
            let list: serde_json::Value = serde_json::from_slice(&conn.get("/api/v1/runs").await?)?;
            newest = list["runs"][0]["run_id"].as_str().map(str::to_owned);
        } else if let Some(run) = &newest {
            conn.get(&format!("/api/v1/runs/{run}")).await?;
        }
    }
    Ok(())
}
