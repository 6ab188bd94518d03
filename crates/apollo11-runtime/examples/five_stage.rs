//! The canonical pipeline — collect → clean → feature → infer → persist — as real Rust steps
//! on generated data, on the durable file log. Kill it at any point and run it again with the
//! same `--run-id`: it resumes where the log says, rerunning only what did not finish.
//!
//! ```text
//! cargo run -p apollo11-runtime --example five_stage -- [--dir DIR] [--run-id ID] [--fail-persist]
//! ```
//!
//! - `collect` (keyed): generates 200,000 sensor readings, a few malformed, written to a temp
//!   file and renamed into place under the run's idempotency key.
//! - `clean` (natural): drops malformed and out-of-range rows; same input, same output.
//! - `feature` (checkpoint): normalizes and computes a rolling mean in chunks; a retry resumes
//!   after the last chunk its previous attempt recorded.
//! - `infer` (natural): a small logistic model scores every row.
//! - `persist` (compensate): appends the run's summary to a shared results log (appending
//!   twice would duplicate it, so it is not idempotent); its compensation removes the line.
//!   `--fail-persist` makes the step fail after appending, to show the rollback.

use apollo11_log::{FileLog, Options};
use apollo11_runtime::{
    Engine, EngineConfig, EngineError, Idempotency, OnFailure, Output, RetryPolicy, RunId, Step,
    StepBuilder, StepContext, StepError, Timeout, Workflow,
};
use async_trait::async_trait;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const ROWS: usize = 200_000;
const CHUNK: usize = 50_000;

/// Where a run's files live.
#[derive(Clone)]
struct Files {
    dir: PathBuf,
}

impl Files {
    fn of(&self, ctx: &StepContext, name: &str) -> PathBuf {
        self.dir.join(ctx.run_id.as_str()).join(name)
    }
}

fn io(e: std::io::Error) -> StepError {
    StepError::retryable(e.to_string())
}

/// Writes `text` to `path` atomically: temp file, fsync, rename.
fn write_atomically(path: &Path, text: &str) -> Result<(), StepError> {
    std::fs::create_dir_all(path.parent().expect("a file has a folder")).map_err(io)?;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

fn read(path: &Path) -> Result<String, StepError> {
    std::fs::read_to_string(path).map_err(io)
}

/// A deterministic generator, seeded by the run, so the same run always collects the same data.
fn rng(seed: &str) -> impl FnMut() -> u64 {
    let mut x = seed.bytes().fold(0x9e37_79b9_7f4a_7c15u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

struct Collect(Files);
struct Clean(Files);
struct Feature(Files);
struct Infer(Files);
struct Persist {
    files: Files,
    fail: bool,
}

#[async_trait]
impl Step for Collect {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        let path = self.0.of(ctx, "raw.csv");
        let mut next = rng(&ctx.idempotency_key);
        let mut csv = String::from("id,temperature,humidity\n");
        for id in 0..ROWS {
            let (t, h) = (next() % 600, next() % 1000);
            match next() % 500 {
                0 => csv.push_str(&format!("{id},n/a,{h}\n")),
                1 => csv.push_str(&format!("{id},{}.0,{}\n", t + 900, h / 10)),
                _ => csv.push_str(&format!(
                    "{id},{}.{},{}.{}\n",
                    t / 10,
                    t % 10,
                    h / 10,
                    h % 10
                )),
            }
        }
        write_atomically(&path, &csv)?;
        Ok(Output::text(format!(
            "{{\"rows\":{ROWS},\"file\":\"{}\"}}",
            path.display()
        )))
    }
}

#[async_trait]
impl Step for Clean {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        let raw = read(&self.0.of(ctx, "raw.csv"))?;
        let mut kept = String::from("id,temperature,humidity\n");
        let (mut good, mut dropped) = (0, 0);
        for line in raw.lines().skip(1) {
            let f: Vec<&str> = line.split(',').collect();
            let valid = f.len() == 3
                && f[1]
                    .parse::<f64>()
                    .is_ok_and(|t| (-40.0..=60.0).contains(&t))
                && f[2]
                    .parse::<f64>()
                    .is_ok_and(|h| (0.0..=100.0).contains(&h));
            if valid {
                kept.push_str(line);
                kept.push('\n');
                good += 1;
            } else {
                dropped += 1;
            }
        }
        write_atomically(&self.0.of(ctx, "clean.csv"), &kept)?;
        Ok(Output::text(format!(
            "{{\"rows\":{good},\"dropped\":{dropped}}}"
        )))
    }
}

#[async_trait]
impl Step for Feature {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        let clean = read(&self.0.of(ctx, "clean.csv"))?;
        let rows: Vec<(f64, f64)> = clean
            .lines()
            .skip(1)
            .map(|l| {
                let f: Vec<f64> = l
                    .split(',')
                    .skip(1)
                    .map(|v| v.parse().unwrap_or_default())
                    .collect();
                (f[0], f[1])
            })
            .collect();
        // Resume after the last chunk a previous attempt finished.
        let done: usize = ctx
            .previous_payload
            .as_deref()
            .and_then(|p| {
                std::str::from_utf8(p)
                    .ok()?
                    .strip_prefix("chunks=")?
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        for (chunk, part) in rows.chunks(CHUNK).enumerate().skip(done) {
            let mut out = String::new();
            for (i, (t, h)) in part.iter().enumerate() {
                let window = &part[i.saturating_sub(9)..=i];
                let mean = window.iter().map(|(t, _)| t).sum::<f64>() / window.len() as f64;
                out.push_str(&format!(
                    "{:.4},{:.4},{:.4}\n",
                    (t + 40.0) / 100.0,
                    h / 100.0,
                    (mean + 40.0) / 100.0
                ));
            }
            write_atomically(&self.0.of(ctx, &format!("features-{chunk}.csv")), &out)
                .map_err(|e| e.with_payload(format!("chunks={chunk}").into_bytes()))?;
        }
        Ok(Output::text(format!(
            "chunks={}",
            rows.len().div_ceil(CHUNK)
        )))
    }
}

#[async_trait]
impl Step for Infer {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        let chunks = read_chunks(&self.0, ctx)?;
        let (w, bias) = ([2.1, -1.3, 0.8], -0.4);
        let (mut rows, mut alerts) = (0, 0);
        let mut out = String::new();
        for chunk in 0..chunks {
            for line in read(&self.0.of(ctx, &format!("features-{chunk}.csv")))?.lines() {
                let x: Vec<f64> = line
                    .split(',')
                    .map(|v| v.parse().unwrap_or_default())
                    .collect();
                let z = bias + w.iter().zip(&x).map(|(w, x)| w * x).sum::<f64>();
                // Rounded as written, so every reader of the file counts the same alerts.
                let p = (1e4 / (1.0 + (-z).exp())).round() / 1e4;
                alerts += usize::from(p > 0.7);
                rows += 1;
                out.push_str(&format!("{p:.4}\n"));
            }
        }
        write_atomically(&self.0.of(ctx, "predictions.csv"), &out)?;
        Ok(Output::text(format!(
            "{{\"rows\":{rows},\"alerts\":{alerts}}}"
        )))
    }
}

fn read_chunks(files: &Files, ctx: &StepContext) -> Result<usize, StepError> {
    Ok((0..)
        .take_while(|c| files.of(ctx, &format!("features-{c}.csv")).exists())
        .count())
}

#[async_trait]
impl Step for Persist {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        let predictions = read(&self.files.of(ctx, "predictions.csv"))?;
        let alerts = predictions
            .lines()
            .filter(|p| p.parse::<f64>().is_ok_and(|p| p > 0.7))
            .count();
        let line = format!(
            "{} alerts={alerts} rows={}\n",
            ctx.run_id,
            predictions.lines().count()
        );
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.files.dir.join("results.log"))
            .map_err(io)?;
        log.write_all(line.as_bytes())
            .and_then(|()| log.sync_all())
            .map_err(io)?;
        if self.fail {
            return Err(StepError::fatal(
                "the results store rejected the batch (--fail-persist)",
            ));
        }
        Ok(Output::text(line.trim_end().to_owned()))
    }

    async fn compensate(&self, ctx: &StepContext) -> Result<(), StepError> {
        let path = self.files.dir.join("results.log");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let prefix = format!("{} ", ctx.run_id);
        let kept: String = text
            .lines()
            .filter(|l| !l.starts_with(&prefix))
            .map(|l| format!("{l}\n"))
            .collect();
        write_atomically(&path, &kept)
    }

    fn has_compensation(&self) -> bool {
        true
    }
}

fn workflow(files: &Files, fail: bool) -> Workflow {
    Workflow::builder("five-stage")
        .on_failure(OnFailure::Rollback)
        .defaults(
            RetryPolicy {
                max_attempts: 3,
                initial_ms: 200,
                ..RetryPolicy::default()
            },
            Timeout::Fixed(120_000),
        )
        .step(StepBuilder::new("collect", Collect(files.clone())).idempotency(Idempotency::Keyed))
        .step(
            StepBuilder::new("clean", Clean(files.clone()))
                .idempotency(Idempotency::Natural)
                .depends_on(&["collect"]),
        )
        .step(
            StepBuilder::new("feature", Feature(files.clone()))
                .idempotency(Idempotency::Checkpoint)
                .depends_on(&["clean"]),
        )
        .step(
            StepBuilder::new("infer", Infer(files.clone()))
                .idempotency(Idempotency::Natural)
                .depends_on(&["feature"]),
        )
        .step(
            StepBuilder::new(
                "persist",
                Persist {
                    files: files.clone(),
                    fail,
                },
            )
            .idempotency(Idempotency::Compensate)
            .depends_on(&["infer"]),
        )
        .build()
        .expect("the five-stage workflow is valid")
}

fn arg(args: &[String], flag: &str) -> Option<String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(arg(&args, "--dir").unwrap_or_else(|| "target/five-stage".into()));
    let run_id = RunId(arg(&args, "--run-id").unwrap_or_else(|| "pipeline-1".into()));
    let files = Files {
        dir: dir.join("data"),
    };
    let store = Arc::new(FileLog::open(dir.join("log"), Options::default())?);
    let engine = Engine::open(store.clone(), EngineConfig::default()).await?;
    let wf = Arc::new(workflow(&files, args.iter().any(|a| a == "--fail-persist")));
    let handle = match engine.start(&wf, run_id.clone()).await {
        Err(EngineError::RunExists { .. }) => {
            println!("run {run_id} exists: resuming it from the log");
            engine.resume(&wf, run_id.clone()).await?
        }
        other => other?,
    };
    let status = handle.outcome().await?;
    let state = engine.state(&run_id).await?;
    println!("run {run_id}: {status}");
    for step in wf.spec().steps.iter().map(|s| s.name.as_str()) {
        let s = state.step(step);
        let payload = engine.step_payload(&run_id, step).await?;
        let output = payload
            .inline_bytes()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        println!(
            "  {step:<8} {:<12} attempt {}  {:>6} ms  {output}",
            s.status.name(),
            s.attempt,
            s.duration_ms.unwrap_or(0)
        );
    }
    println!(
        "data in {}, log in {}",
        files.dir.display(),
        dir.join("log").display()
    );
    std::process::exit(if status == apollo11_runtime::RunStatus::Succeeded {
        0
    } else {
        1
    });
}
