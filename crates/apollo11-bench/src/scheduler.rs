//! The engine end to end on the durable file log with no-op steps: 1,000 runs × 10 steps,
//! one 10,000-step chain, one run of 1,000 parallel steps; the chain against its physical
//! limit (one `fdatasync` per step) measured in the same run.

use crate::report::{raw_fsync_rate, Report};
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

struct NoOp;

#[async_trait]
impl Step for NoOp {
    async fn run(&self, _: &StepContext) -> Result<Output, StepError> {
        Ok(Output::empty())
    }
}

fn workflow(name: &str, steps: usize, chain: bool, concurrency: u32) -> Result<Workflow> {
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

pub async fn run(setup: &Setup) -> Result<Report> {
    let (runs, chain) = if setup.quick {
        (200, 2_000)
    } else {
        (1_000, 10_000)
    };
    let mut report = Report::new(
        "scheduler",
        &[
            "workload",
            "steps",
            "steps_per_s",
            "baseline",
            "baseline_steps_per_s",
            "ratio",
        ],
    );
    report.header();
    let many = steps_per_s(&setup.dir.join("many"), workflow("ten", 10, true, 8)?, runs).await?;
    report.row(vec![
        json!(format!("{runs} runs x 10 steps")),
        json!(runs * 10),
        json!(many),
        json!("-"),
        json!(null),
        json!(null),
    ]);
    let limit = raw_fsync_rate(&setup.dir, 1, 300, 2.0)?;
    let chained = steps_per_s(
        &setup.dir.join("chain"),
        workflow("chain", chain, true, 8)?,
        1,
    )
    .await?;
    report.row(vec![
        json!(format!("one {chain}-step chain")),
        json!(chain),
        json!(chained),
        json!("1 fdatasync per step"),
        json!(limit),
        json!(chained / limit),
    ]);
    let wide = steps_per_s(
        &setup.dir.join("wide"),
        workflow("wide", 1_000, false, 1_000)?,
        1,
    )
    .await?;
    report.row(vec![
        json!("one run of 1000 parallel steps"),
        json!(1_000),
        json!(wide),
        json!("-"),
        json!(null),
        json!(null),
    ]);
    report.note("Peer baseline (duroxide) not measured yet.".into());
    Ok(report)
}
