//! The engine end to end on the durable file log with no-op steps: 1,000 runs × 10 steps,
//! one 10,000-step chain, one run of 1,000 parallel steps; the chain against its physical
//! limit (one `fdatasync` per step) measured in the same run.

use crate::report::{raw_fsync, Report};
use crate::Setup;
use anyhow::Result;
use apollo11_log::{FileLog, Options};
use apollo11_runtime::{
    Engine, EngineConfig, Idempotency, Output, RunId, RunStatus, Step, StepBuilder, StepContext,
    StepError, Workflow,
};
use async_trait::async_trait;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// A step that does nothing.
pub struct NoOp;

#[async_trait]
impl Step for NoOp {
    async fn run(&self, _: &StepContext) -> Result<Output, StepError> {
        Ok(Output::empty())
    }
}

/// `steps` no-op steps, chained or independent.
pub fn workflow(name: &str, steps: usize, chain: bool, concurrency: u32) -> Result<Workflow> {
    let names: Vec<String> = (0..steps).map(|i| format!("s{i:05}")).collect();
    let mut b = Workflow::builder(name).max_concurrency(concurrency);
    for i in 0..steps {
        let deps: Vec<&str> = if chain && i > 0 {
            vec![names[i - 1].as_str()]
        } else {
            Vec::new()
        };
        b = b.step(
            StepBuilder::new(&names[i], NoOp)
                .idempotency(Idempotency::Natural)
                .depends_on(&deps),
        );
    }
    Ok(b.build()?)
}

/// Steps per second for `runs` runs of `wf` started together.
async fn steps_per_s(dir: &Path, wf: Workflow, runs: usize) -> Result<f64> {
    let _ = std::fs::remove_dir_all(dir);
    let engine = Engine::open(
        Arc::new(FileLog::open(dir, Options::default())?),
        EngineConfig::default(),
    )
    .await?;
    let steps = wf.spec().steps.len() * runs;
    let wf = engine.register(wf);
    let started = Instant::now();
    let mut handles = Vec::new();
    for r in 0..runs {
        handles.push(engine.start(&wf, RunId(format!("run-{r:05}"))).await?);
    }
    for h in handles {
        anyhow::ensure!(
            h.outcome().await? == RunStatus::Succeeded,
            "a benchmark run did not succeed"
        );
    }
    let rate = steps as f64 / started.elapsed().as_secs_f64();
    engine.close().await;
    std::fs::remove_dir_all(dir)?;
    Ok(rate)
}

/// The same workload on the duroxide peer (a separate program built by `cargo xtask bench`,
/// named by `APOLLO11_PEER_DUROXIDE`): (steps, steps/s), or why it was not measured.
fn peer(dir: &Path, workload: &[String]) -> Result<(u64, f64), String> {
    let program = std::env::var("APOLLO11_PEER_DUROXIDE")
        .map_err(|_| "peer not built (run through `cargo xtask bench`)".to_owned())?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let db = dir.join("duroxide.db");
    let output = std::process::Command::new(program)
        .arg(&db)
        .args(workload)
        .env("RUST_LOG", "error")
        .output()
        .map_err(|e| format!("peer did not start: {e}"))?;
    let _ = std::fs::remove_dir_all(dir);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let figures: serde_json::Value = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| {
            let stderr = String::from_utf8_lossy(&output.stderr);
            format!(
                "peer failed: {}",
                stderr.lines().last().unwrap_or("no output")
            )
        })?;
    match (figures["steps"].as_u64(), figures["steps_per_s"].as_f64()) {
        (Some(steps), Some(rate)) => Ok((steps, rate)),
        _ => Err(format!("peer printed no steps or steps_per_s: {figures}")),
    }
}

/// One workload: ours, then the peer's (on a smaller size where it would take minutes).
struct Workload {
    label: String,
    steps: usize,
    ours: f64,
    limit: Option<f64>,
    peer_args: Vec<String>,
}

impl Workload {
    fn report(self, report: &mut Report, dir: &Path) {
        let (peer_steps, peer_rate) = match peer(&dir.join("peer"), &self.peer_args) {
            Ok((steps, rate)) => (json!(steps), json!(rate)),
            Err(why) => {
                report.note(format!("{}: {why}", self.label));
                (json!(null), json!(null))
            }
        };
        let ratio = |base: Option<f64>| base.map_or(json!(null), |b| json!(self.ours / b));
        report.row(vec![
            json!(self.label),
            json!(self.steps),
            json!(self.ours),
            json!(self.limit),
            ratio(self.limit),
            peer_steps,
            peer_rate.clone(),
            ratio(peer_rate.as_f64()),
        ]);
    }
}

pub async fn run(setup: &Setup) -> Result<Report> {
    let (runs, chain, peer_runs, peer_chain, peer_wide) = if setup.quick {
        (200, 2_000, 50, 200, 300)
    } else {
        (1_000, 10_000, 200, 500, 1_000)
    };
    let mut report = Report::new(
        "scheduler",
        &[
            "workload",
            "steps",
            "steps_per_s",
            "limit_steps_per_s",
            "ratio_to_limit",
            "peer_steps",
            "peer_steps_per_s",
            "ratio_to_peer",
        ],
    );
    report.header();
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect();
    Workload {
        label: format!("{runs} runs x 10 steps"),
        steps: runs * 10,
        ours: steps_per_s(&setup.dir.join("many"), workflow("ten", 10, true, 8)?, runs).await?,
        limit: None,
        peer_args: args(&["many", &peer_runs.to_string(), "10"]),
    }
    .report(&mut report, &setup.dir);
    let limit = raw_fsync(&setup.dir, 1, 300, 2.0)?.0;
    Workload {
        label: format!("one {chain}-step chain"),
        steps: chain,
        ours: steps_per_s(
            &setup.dir.join("chain"),
            workflow("chain", chain, true, 8)?,
            1,
        )
        .await?,
        limit: Some(limit),
        peer_args: args(&["chain", &peer_chain.to_string()]),
    }
    .report(&mut report, &setup.dir);
    Workload {
        label: "one run of 1000 parallel steps".into(),
        steps: 1_000,
        ours: steps_per_s(
            &setup.dir.join("wide"),
            workflow("wide", 1_000, false, 1_000)?,
            1,
        )
        .await?,
        limit: None,
        peer_args: args(&["wide", &peer_wide.to_string()]),
    }
    .report(&mut report, &setup.dir);
    report.note(format!(
        "limit: one fdatasync per step, measured in this run. Peer: duroxide 0.1.32, SQLite \
         provider on a file, 1 ms minimum poll interval, no-op activities; {peer_runs} \
         instances x 10, a {peer_chain}-step chain and a {peer_wide}-wide fan-out (the same \
         sizes as ours would take the peer minutes; steps/s is the compared figure)."
    ));
    Ok(report)
}
