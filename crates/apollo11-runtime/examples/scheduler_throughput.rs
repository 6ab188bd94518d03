//! Measures the engine end to end on the durable file log (fsync mode) with no-op steps:
//! 1,000 runs × 10 steps, one run of a 10,000-step chain, one run of 1,000 parallel steps.
//! The physical limit of the chain (one fsync per step) is measured in the same run.
//!
//! `cargo run --release -p apollo11-runtime --example scheduler_throughput -- [DIR]`

use apollo11_log::{FileLog, Options};
use apollo11_runtime::{
    Engine, EngineConfig, Idempotency, Output, RunId, RunStatus, Step, StepBuilder, StepContext,
    StepError, Workflow,
};
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

struct NoOp;

#[async_trait]
impl Step for NoOp {
    async fn run(&self, _: &StepContext) -> Result<Output, StepError> {
        Ok(Output::empty())
    }
}

fn workflow(name: &str, steps: usize, chain: bool, concurrency: u32) -> Workflow {
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
    b.build().unwrap()
}

async fn measure(dir: &Path, label: &str, wf: Workflow, runs: usize) -> f64 {
    let _ = std::fs::remove_dir_all(dir);
    let store = Arc::new(FileLog::open(dir, Options::default()).unwrap());
    let engine = Engine::open(store, EngineConfig::default()).await.unwrap();
    let steps = wf.spec().steps.len() * runs;
    let wf = engine.register(wf);
    let started = Instant::now();
    let mut handles = Vec::new();
    for r in 0..runs {
        handles.push(
            engine
                .start(&wf, RunId(format!("run-{r:05}")))
                .await
                .unwrap(),
        );
    }
    for h in handles {
        assert_eq!(h.outcome().await.unwrap(), RunStatus::Succeeded);
    }
    let rate = steps as f64 / started.elapsed().as_secs_f64();
    println!(
        "| {label} | {steps} | {:.2} | {rate:.0} |",
        started.elapsed().as_secs_f64()
    );
    rate
}

/// One `write + fdatasync` per step: the chain's physical limit on this disk.
fn fsync_rate(dir: &Path) -> f64 {
    std::fs::create_dir_all(dir).unwrap();
    let file = std::fs::File::create(dir.join("fsync.bin")).unwrap();
    let started = Instant::now();
    for i in 0..2_000u64 {
        std::os::unix::fs::FileExt::write_all_at(&file, &[1u8; 256], i * 256).unwrap();
        file.sync_data().unwrap();
    }
    2_000.0 / started.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let root = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("apollo11-sched"));
    println!("| workload | steps | seconds | steps/s |\n|---|---|---|---|");
    measure(
        &root.join("many"),
        "1,000 runs × 10 steps",
        workflow("ten", 10, true, 8),
        1_000,
    )
    .await;
    let chain = measure(
        &root.join("chain"),
        "one 10,000-step chain",
        workflow("chain", 10_000, true, 8),
        1,
    )
    .await;
    measure(
        &root.join("wide"),
        "one run of 1,000 parallel steps",
        workflow("wide", 1_000, false, 1_000),
        1,
    )
    .await;
    let limit = fsync_rate(&root);
    println!(
        "chain physical limit (1 / fdatasync): {limit:.0} steps/s; the chain reaches {:.2} of it",
        chain / limit
    );
    let _ = std::fs::remove_dir_all(&root);
}
