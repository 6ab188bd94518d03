//! The engine end to end on the durable file log with no-op steps: 1,000 runs × 10 steps,
//! one 10,000-step chain, one run of 1,000 parallel steps; the chain against its physical
//! limit (one `fdatasync` per step) measured in the same run, each workload against the
//! duroxide peer. The workloads and the timing are shared with `pg_scheduler`.

use crate::catalog::Scenario;
use crate::report::{raw_fsync, Report};
use crate::Setup;
use anyhow::Result;
use apollo11_log::{FileLog, Options};
use apollo11_runtime::{
    Engine, EngineConfig, Idempotency, Output, RunId, RunStatus, Step, StepBuilder, StepContext,
    StepError, Store, Workflow,
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

/// Steps per second for `runs` runs of `wf` started together on the durable file log.
async fn steps_per_s(dir: &Path, wf: &Workflow, runs: usize) -> Result<f64> {
    let _ = std::fs::remove_dir_all(dir);
    let engine = Engine::open(
        Arc::new(FileLog::open(dir, Options::default())?),
        EngineConfig::default(),
    )
    .await?;
    let engine = Arc::new(engine);
    let rate = timed(std::slice::from_ref(&engine), wf, runs).await?;
    close(vec![engine]).await;
    std::fs::remove_dir_all(dir)?;
    Ok(rate)
}

/// Steps per second for `runs` runs of `wf` spread over `engines` (run `r` on engine
/// `r % engines.len()`): each engine starts its share one after another, the engines side by
/// side, and the clock stops when every run has succeeded.
pub async fn timed<S: Store>(
    engines: &[Arc<Engine<S>>],
    wf: &Workflow,
    runs: usize,
) -> Result<f64> {
    let steps = wf.spec().steps.len() * runs;
    let started = Instant::now();
    let starters: Vec<_> = engines
        .iter()
        .enumerate()
        .map(|(i, engine)| {
            let (engine, wf) = (engine.clone(), Arc::new(wf.clone()));
            let share: Vec<usize> = (i..runs).step_by(engines.len()).collect();
            tokio::spawn(async move {
                let mut handles = Vec::with_capacity(share.len());
                for r in share {
                    handles.push(engine.start(&wf, RunId(format!("run-{r:05}"))).await?);
                }
                anyhow::Ok(handles)
            })
        })
        .collect();
    for starter in starters {
        for h in starter.await?? {
            anyhow::ensure!(
                h.outcome().await? == RunStatus::Succeeded,
                "a benchmark run did not succeed"
            );
        }
    }
    Ok(steps as f64 / started.elapsed().as_secs_f64())
}

/// Closes `engines`, each once nothing else holds it.
pub async fn close<S: Store>(engines: Vec<Arc<Engine<S>>>) {
    for engine in engines {
        if let Ok(engine) = Arc::try_unwrap(engine) {
            engine.close().await;
        }
    }
}

/// The same workload on the duroxide peer (a separate program built by `cargo xtask bench`,
/// named by `APOLLO11_PEER_DUROXIDE`): (steps, steps/s), or why it was not measured.
pub fn peer(dir: &Path, workload: &[String]) -> Result<(u64, f64), String> {
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

/// The peer's figures for a workload (steps, steps/s), or `None` after noting why not.
pub fn peer_figures(report: &mut Report, dir: &Path, shape: &Shape) -> Option<(u64, f64)> {
    peer(&dir.join("peer"), &shape.peer_args)
        .map_err(|why| report.note(format!("{}: {why}", shape.label)))
        .ok()
}

/// A workload: runs of one workflow, and its version on the peer.
pub struct Shape {
    /// The row key: `runs`, `chain` or `wide`.
    pub key: &'static str,
    pub label: String,
    pub workflow: Workflow,
    pub runs: usize,
    pub peer_args: Vec<String>,
}

impl Shape {
    pub fn steps(&self) -> usize {
        self.workflow.spec().steps.len() * self.runs
    }
}

/// The workloads, sized `[runs of a 10-step chain, chain length, fan-out width]`, ours and
/// the peer's.
pub fn shapes(ours: [usize; 3], peer: [usize; 3]) -> Result<Vec<Shape>> {
    let ([runs, chain, wide], [peer_runs, peer_chain, peer_wide]) = (ours, peer);
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect();
    Ok(vec![
        Shape {
            key: "runs",
            label: format!("{runs} runs x 10 steps"),
            workflow: workflow("ten", 10, true, 8)?,
            runs,
            peer_args: args(&["many", &peer_runs.to_string(), "10"]),
        },
        Shape {
            key: "chain",
            label: format!("one {chain}-step chain"),
            workflow: workflow("chain", chain, true, 8)?,
            runs: 1,
            peer_args: args(&["chain", &peer_chain.to_string()]),
        },
        Shape {
            key: "wide",
            label: format!("one run of {wide} parallel steps"),
            workflow: workflow("wide", wide, false, u32::try_from(wide)?)?,
            runs: 1,
            peer_args: args(&["wide", &peer_wide.to_string()]),
        },
    ])
}

/// What the peer ran, for the report's notes.
pub fn peer_note(peer: [usize; 3]) -> String {
    let [runs, chain, wide] = peer;
    format!(
        "Peer: duroxide 0.1.32, SQLite provider on a file, 1 ms minimum poll interval, no-op \
         activities; {runs} instances x 10, a {chain}-step chain and a {wide}-wide fan-out (the \
         same sizes as ours would take the peer minutes; steps/s is the compared figure)."
    )
}

pub async fn run(setup: &Setup) -> Result<Report> {
    let (ours, peer) = if setup.quick {
        ([200, 2_000, 1_000], [50, 200, 300])
    } else {
        ([1_000, 10_000, 1_000], [200, 500, 1_000])
    };
    let mut report = Report::new(Scenario::Scheduler);
    report.header();
    // The chain's limit: it must make each step's outcome durable before the next starts.
    let limit = raw_fsync(&setup.dir, 1, 300, 2.0)?.0;
    for (shape, limit) in shapes(ours, peer)?
        .into_iter()
        .zip([None, Some(limit), None])
    {
        let dir = setup.dir.join("engine");
        let rate = steps_per_s(&dir, &shape.workflow, shape.runs).await?;
        let peer = peer_figures(&mut report, &setup.dir, &shape);
        let ratio = |base: Option<f64>| base.map_or(json!(null), |b| json!(rate / b));
        report.row(
            shape.key,
            vec![
                json!(shape.label),
                json!(shape.steps()),
                json!(rate),
                json!(limit),
                ratio(limit),
                json!(peer.map(|p| p.0)),
                json!(peer.map(|p| p.1)),
                ratio(peer.map(|p| p.1)),
            ],
        );
    }
    report.note(format!(
        "limit: one fdatasync per step, measured in this run. {}",
        peer_note(peer)
    ));
    Ok(report)
}
