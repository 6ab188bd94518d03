//! Authoring at scale: one run of 10,000 no-op steps written out by hand, made by a static
//! `for_each` (a list expanded when the run is created), and made at run time (a `discover`
//! step's JSON output expanded when it succeeds), each in a fresh process on the durable file
//! log: steps/s and the peak resident memory per step, against the hand-written graph
//! measured in the same run. Then the time to expand and validate a 10,000-item declaration.

use crate::catalog::Scenario;
use crate::report::{child, peak_resident_bytes, resident_bytes, Report};
use crate::scheduler::{workflow, NoOp};
use crate::Setup;
use anyhow::{bail, Result};
use apollo11_log::{FileLog, Options};
use apollo11_runtime::{
    Engine, EngineConfig, Idempotency, ItemSource, Output, RunId, RunStatus, Step, StepBuilder,
    StepContext, StepError, Value, Workflow,
};
use async_trait::async_trait;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// How one run's steps are written.
const SHAPES: [&str; 3] = ["hand", "static", "runtime"];

/// Most steps at work at once, the same for every shape.
const CONCURRENCY: u32 = 256;

pub async fn run(setup: &Setup) -> Result<Report> {
    let items: usize = if setup.quick { 2_000 } else { 10_000 };
    let mut report = Report::new(Scenario::ForEach);
    report.header();
    let mut hand = None;
    for shape in SHAPES {
        let dir = setup.dir.join(format!("for-each-{shape}"));
        let figures = child(
            "--probe-for-each",
            &[shape, &items.to_string(), &dir.display().to_string()],
        )?;
        let steps = figures["steps"].as_f64().unwrap_or(0.0);
        let rate = steps / figures["seconds"].as_f64().unwrap_or(f64::NAN);
        let per_step = figures["peak_resident_bytes"].as_f64().unwrap_or(0.0) / steps;
        let (base_rate, base_bytes) = *hand.get_or_insert((rate, per_step));
        report.row(
            shape,
            vec![
                json!(label(shape, items)),
                json!(steps),
                json!(rate),
                json!(rate / base_rate),
                json!(per_step),
                json!(per_step / base_bytes),
                json!(null),
            ],
        );
    }
    let ms = expansion_ms(items)?;
    report.row(
        "expansion",
        vec![
            json!(format!(
                "build (validate) + instantiate a {items}-item for_each: ms, median of 5"
            )),
            json!(items),
            json!(null),
            json!(null),
            json!(null),
            json!(null),
            json!(ms),
        ],
    );
    report.note(format!(
        "One run, {CONCURRENCY} steps at most at once, no-op steps, each shape in its own \
         process; memory is the process's peak resident set minus its size before the engine \
         opened. The runtime shape has one more step (`discover`)."
    ));
    Ok(report)
}

fn label(shape: &str, items: usize) -> String {
    match shape {
        "hand" => format!("{items} steps written out"),
        "static" => format!("for_each over a {items}-item list"),
        _ => format!("for_each over {items} items a step printed"),
    }
}

/// The probe: one run of `shape` with `items` steps on a fresh file log in `dir`; prints the
/// steps, the seconds from start to success, and the peak resident growth.
pub async fn probe(shape: &str, items: usize, dir: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    let before = resident_bytes()?;
    let engine = Engine::open(
        Arc::new(FileLog::open(dir, Options::default())?),
        EngineConfig::default(),
    )
    .await?;
    let started = Instant::now();
    let wf = shaped(shape, items)?;
    let steps = wf.spec().steps.len() + usize::from(shape == "runtime") * items;
    let run = engine.start(&wf, RunId::from("for-each")).await?;
    if run.outcome().await? != RunStatus::Succeeded {
        bail!("the {shape} run did not succeed");
    }
    let seconds = started.elapsed().as_secs_f64();
    let peak = peak_resident_bytes()?.saturating_sub(before);
    println!(
        "{}",
        json!({"steps": steps, "seconds": seconds, "peak_resident_bytes": peak})
    );
    engine.close().await;
    std::fs::remove_dir_all(dir)?;
    Ok(())
}

/// The run's workflow, instantiated.
fn shaped(shape: &str, items: usize) -> Result<Arc<Workflow>> {
    let names: Vec<Value> = (0..items).map(|i| json!(format!("i{i:05}"))).collect();
    let declared = match shape {
        "hand" => return Ok(Arc::new(workflow("hand", items, false, CONCURRENCY)?)),
        "static" => Workflow::builder("static")
            .max_concurrency(CONCURRENCY)
            .step(
                StepBuilder::new("work", NoOp)
                    .idempotency(Idempotency::Natural)
                    .for_each(ItemSource::List(names)),
            ),
        _ => Workflow::builder("runtime")
            .max_concurrency(CONCURRENCY)
            .step(StepBuilder::new("discover", Discover(names)).idempotency(Idempotency::Natural))
            .step(
                StepBuilder::new("work", NoOp)
                    .idempotency(Idempotency::Natural)
                    .depends_on(&["discover"])
                    .for_each(ItemSource::Output {
                        step: "discover".into(),
                        path: String::new(),
                    }),
            ),
    };
    Ok(declared.build()?.instantiate(&BTreeMap::new())?)
}

/// Prints the items as its JSON output.
struct Discover(Vec<Value>);

#[async_trait]
impl Step for Discover {
    async fn run(&self, _: &StepContext) -> Result<Output, StepError> {
        Ok(Output(
            serde_json::to_vec(&self.0).expect("a list serializes"),
        ))
    }
}

/// The median of 5 times to build (validate) and instantiate a declaration of `items` items,
/// in ms.
fn expansion_ms(items: usize) -> Result<f64> {
    let names: Vec<Value> = (0..items).map(|i| json!(format!("i{i:05}"))).collect();
    let mut times = Vec::new();
    for _ in 0..5 {
        let list = ItemSource::List(names.clone());
        let started = Instant::now();
        let declared = Workflow::builder("static")
            .step(
                StepBuilder::new("work", NoOp)
                    .idempotency(Idempotency::Natural)
                    .for_each(list),
            )
            .build()?;
        declared.instantiate(&BTreeMap::new())?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[2])
}
