//! What a cgroup per try costs: the shell executor running no-op tries (`true`) one after
//! another, each in a cgroup of its own (made, joined at the gate, its counters read, removed)
//! against no isolation, p50 and p99 per try and what the cgroup adds; then the engine
//! driving runs of parallel no-op shell steps with limits on against off, steps/s (medians
//! of alternated pairs, and the median of their ratios).
//! Needs a writable cgroup (root); noted and skipped where none can be made.

use crate::catalog::Scenario;
use crate::noop_try::{self, Nowhere};
use crate::report::{median, quantile_us, Report};
use crate::scheduler::close;
use crate::Setup;
use anyhow::Result;
use apollo11_log::{FileLog, Options};
use apollo11_runtime::{Engine, EngineConfig, RunId, RunStatus};
use apollo11_shell::shell::{check_limits, Limits};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The memory limit of a try with limits: enough for `true`, and a cgroup in every mode.
const MEMORY: u64 = 256 << 20;
/// Engine runs each way, alternated.
const PAIRS: usize = 3;

pub async fn run(setup: &Setup) -> Result<Report> {
    let mut report = Report::new(Scenario::Limits);
    report.header();
    let probe = apollo11_shell::parse(&toml(1, true), "probe.toml", &setup.dir)?;
    if let Err(why) = check_limits(&probe) {
        report.note(format!("skipped: no cgroup can be made here ({why})"));
        return Ok(report);
    }
    let tries = if setup.quick { 50 } else { 1_000 };
    per_try(setup, &mut report, tries).await?;
    let steps = if setup.quick { 20 } else { 1_000 };
    scheduler(setup, &mut report, steps).await?;
    Ok(report)
}

/// `tries` no-op tries one after another, without limits then each in a cgroup.
async fn per_try(setup: &Setup, report: &mut Report, tries: usize) -> Result<()> {
    let none = latencies(setup, tries, Limits::default(), "none").await?;
    let cgroup = latencies(
        setup,
        tries,
        Limits {
            memory: Some(MEMORY),
            ..Limits::default()
        },
        "cgroup",
    )
    .await?;
    let quantiles = |l: &[Duration]| (quantile_us(l, 0.5), quantile_us(l, 0.99));
    let (base50, base99) = quantiles(&none);
    for (isolation, sorted) in [("none", &none), ("cgroup", &cgroup)] {
        let (q50, q99) = quantiles(sorted);
        report.row(
            &format!("try_{isolation}"),
            vec![
                json!("no-op try"),
                json!(isolation),
                json!(tries),
                json!(q50.round()),
                json!(q99.round()),
                json!((q50 - base50).round()),
                json!((q99 - base99).round()),
                json!(null),
                json!(null),
            ],
        );
    }
    Ok(())
}

/// The sorted durations of `tries` executions of `true` under `limits`, each checked to be
/// held as `held`.
async fn latencies(
    setup: &Setup,
    tries: usize,
    limits: Limits,
    held: &str,
) -> Result<Vec<Duration>> {
    let dir = setup.dir.join("limits-tries");
    std::fs::create_dir_all(&dir)?;
    let dir = std::fs::canonicalize(dir)?;
    let placing = Nowhere::default();
    let mut took = Vec::with_capacity(tries);
    for attempt in 1..=tries as u32 {
        let started = Instant::now();
        noop_try::run(&dir, "noop", attempt, limits.clone(), &placing).await?;
        took.push(started.elapsed());
    }
    let used = placing.0.lock().expect("not poisoned");
    anyhow::ensure!(
        used.iter().all(|u| u.isolation == held),
        "tries not held as {held}"
    );
    std::fs::remove_dir_all(&dir)?;
    took.sort();
    Ok(took)
}

/// Runs of `steps` parallel no-op shell steps through the engine, limits off then on, in
/// [`PAIRS`] alternated pairs (a drift of the machine weighs on both): the median of each
/// way, and the median of the pairs' ratios.
async fn scheduler(setup: &Setup, report: &mut Report, steps: usize) -> Result<()> {
    let (mut offs, mut ons, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..PAIRS {
        let off = steps_per_s(setup, steps, false).await?;
        let on = steps_per_s(setup, steps, true).await?;
        offs.push(off);
        ons.push(on);
        ratios.push(on / off);
    }
    let ratio = median(&mut ratios);
    let rows = [
        ("none", median(&mut offs), 1.0),
        ("cgroup", median(&mut ons), ratio),
    ];
    for (isolation, rate, ratio) in rows {
        report.row(
            &format!("steps_{isolation}"),
            vec![
                json!(format!("{steps} parallel shell steps")),
                json!(isolation),
                json!(steps),
                json!(null),
                json!(null),
                json!(null),
                json!(null),
                json!(rate.round()),
                json!((ratio * 100.0).round() / 100.0),
            ],
        );
    }
    Ok(())
}

/// A workflow of `steps` independent `true` steps, each with a memory limit when `limited`.
fn toml(steps: usize, limited: bool) -> String {
    let limits = if limited {
        format!("limits = {{ memory = {MEMORY} }}\n")
    } else {
        String::new()
    };
    let mut text = "[workflow]\nname = \"noop\"\nmax_concurrency = 16\n".to_owned();
    for i in 0..steps {
        text.push_str(&format!(
            "\n[[steps]]\nname = \"s{i:05}\"\nidempotency = \"natural\"\nrun = \"true\"\n{limits}"
        ));
    }
    text
}

async fn steps_per_s(setup: &Setup, steps: usize, limited: bool) -> Result<f64> {
    let dir = setup.dir.join("limits-engine");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let dir = std::fs::canonicalize(dir)?;
    let spec = apollo11_shell::parse(&toml(steps, limited), "noop.toml", &dir)?;
    let workflow = Arc::new(apollo11_shell::workflow(&spec, &dir)?);
    let engine = Engine::open(
        Arc::new(FileLog::open(dir.join("log"), Options::default())?),
        EngineConfig::default(),
    )
    .await?;
    let engine = Arc::new(engine);
    let started = Instant::now();
    let handle = engine.start(&workflow, RunId::from("bench")).await?;
    anyhow::ensure!(
        handle.outcome().await? == RunStatus::Succeeded,
        "the benchmark run did not succeed"
    );
    let rate = steps as f64 / started.elapsed().as_secs_f64();
    close(vec![engine]).await;
    std::fs::remove_dir_all(&dir)?;
    Ok(rate)
}
