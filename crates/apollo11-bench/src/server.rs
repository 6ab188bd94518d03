//! `apollo11 serve` under load, on loopback, with the load generated in this process (on a
//! runtime apart from the server's): the read API's rate and latency on a log of 10,000
//! runs (closed loop, and an open loop at 1,000 requests/s), the delay from an event's stamp
//! to its arrival on a run's event stream, and what driving runs through the server with a
//! UI attached costs against the engine alone, in alternated pairs in the same run.

mod api;
mod burst;
mod drive;
pub mod host;
mod http;

use crate::catalog::Scenario;
use crate::report::{median, quantile_us, Report};
use crate::Setup;
use anyhow::Result;
use apollo11_server::ServerConfig;
use drive::Workload;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Connections of the closed loops.
const CONNS: u64 = 16;
/// Offered rate of the open loop, and its connections.
const OPEN_RATE: u64 = 1_000;
const OPEN_CONNS: u64 = 64;
/// Connections of the burst the memory figure follows.
const BURST_CONNS: u64 = 1_000;
/// Goals: run state p99 at the open rate, stream delay p99, throughput through the server
/// against the engine alone.
const STATE_P99_US: f64 = 5_000.0;
const DELAY_P99_US: f64 = 50_000.0;
const RATIO_MIN: f64 = 0.90;

/// Sizes of a pass.
struct Sizes {
    runs: u64,
    seconds: u64,
    pairs: usize,
    workloads: Vec<Workload>,
}

fn sizes(quick: bool) -> Sizes {
    let workload = |key, runs: u64, steps: usize, label: String| Workload {
        key,
        label,
        runs,
        steps,
    };
    let (runs, seconds, pairs, many, chain) = if quick {
        (1_000, 1, 1, 20, 50)
    } else {
        (10_000, 5, 5, 200, 200)
    };
    Sizes {
        runs,
        seconds,
        pairs,
        workloads: vec![
            workload("runs", many, 10, format!("{many} runs x 10 shell steps")),
            workload("chain", 1, chain, format!("one {chain}-step shell chain")),
        ],
    }
}

fn goal(met: bool, text: &str) -> Value {
    json!(format!("{text}: {}", if met { "met" } else { "missed" }))
}

fn latency_row(
    figure: String,
    load: String,
    per_s: Value,
    sorted: &[Duration],
    goal: Value,
) -> Vec<Value> {
    let q = |q| json!(quantile_us(sorted, q));
    vec![
        json!(figure),
        json!(load),
        json!(sorted.len()),
        per_s,
        q(0.5),
        q(0.99),
        q(0.999),
        json!(null),
        json!(null),
        goal,
    ]
}

pub async fn run(setup: &Setup) -> Result<Report> {
    let sizes = sizes(setup.quick);
    let mut report = Report::new(Scenario::Server);
    report.header();
    reads(setup, &sizes, &mut report).await?;
    for workload in &sizes.workloads {
        driven(setup, workload, sizes.pairs, &mut report).await?;
    }
    report.note(format!(
        "Reads: {} finished runs of a 10-step no-op chain written by the engine, then served; \
         closed loops of {CONNS} kept-alive connections for {} s; the open loop releases \
         {OPEN_RATE} requests/s on schedule over {OPEN_CONNS} connections, latency from release. \
         Driven: shell steps `true`; through the server every run is started by POST, followed \
         by its own event stream, and a UI polls the runs list each second and the newest run \
         every 100 ms; {} alternated pairs (engine alone, then server), medians, ratio = median \
         of the pairs' server/alone. Stream delay: event stamp (whole ms, up to 2 ms early) to \
         arrival, events stamped after the stream opened. RSS: the whole process's, the load \
         generator's connections included, before and right after two bursts of {BURST_CONNS} \
         connections each reading one run's state at once, and 2 s later.",
        sizes.runs, sizes.seconds, sizes.pairs
    ));
    Ok(report)
}

/// The read API on a log of `sizes.runs` runs.
async fn reads(setup: &Setup, sizes: &Sizes, report: &mut Report) -> Result<()> {
    let dir = std::path::absolute(setup.dir.join("server-reads"))?;
    api::populate(&dir, sizes.runs).await?;
    let hosted =
        host::Hosted::start(ServerConfig::new(dir.clone(), "127.0.0.1:0".parse()?)).await?;
    let runs = sizes.runs;
    let state: api::Target =
        Arc::new(move |n| format!("/api/v1/runs/{}", api::run_id(n * 7_919 % runs)));
    let closed = format!("closed, {CONNS} connections");
    let l = api::closed(hosted.addr, CONNS, sizes.seconds as f64, state.clone()).await?;
    report.row(
        "run_state_closed",
        latency_row(
            format!("GET /api/v1/runs/{{id}} ({runs} runs)"),
            closed.clone(),
            json!(l.per_s),
            &l.sorted,
            json!(""),
        ),
    );
    let list: api::Target = Arc::new(|_| "/api/v1/runs".to_owned());
    let l = api::closed(hosted.addr, CONNS, sizes.seconds as f64, list).await?;
    report.row(
        "runs_list_closed",
        latency_row(
            format!("GET /api/v1/runs (first 100 of {runs})"),
            closed,
            json!(l.per_s),
            &l.sorted,
            json!(""),
        ),
    );
    let l = api::open(hosted.addr, OPEN_RATE, sizes.seconds, OPEN_CONNS, state).await?;
    let met = quantile_us(&l.sorted, 0.99) <= STATE_P99_US;
    let load = format!("open, {OPEN_RATE}/s offered, {OPEN_CONNS} connections");
    report.row(
        "run_state_open",
        latency_row(
            format!("GET /api/v1/runs/{{id}} ({runs} runs)"),
            load,
            json!(l.per_s),
            &l.sorted,
            goal(met, "p99 <= 5 ms"),
        ),
    );
    memory(hosted.addr, report).await?;
    hosted.stop().await?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The process's RSS before, after two bursts of [`BURST_CONNS`] connections reading a run's
/// state at once, and idle after them; the goal: idle at most twice the RSS before (`ratio`:
/// idle over before).
async fn memory(addr: std::net::SocketAddr, report: &mut Report) -> Result<()> {
    let rss = burst::burst(
        addr,
        BURST_CONNS,
        format!("/api/v1/runs/{}", api::run_id(0)),
    )
    .await?;
    let mib = |kib: u64| kib as f64 / 1024.0;
    let text = format!(
        "RSS {:.1} MiB before, {:.1} after the bursts, {:.1} idle; idle <= 2x before",
        mib(rss.before),
        mib(rss.after),
        mib(rss.idle)
    );
    report.row(
        "memory",
        vec![
            json!("RSS after a burst of GET /api/v1/runs/{id}"),
            json!(format!("{BURST_CONNS} connections at once, twice")),
            json!(2 * BURST_CONNS),
            json!(null),
            json!(null),
            json!(null),
            json!(null),
            json!(null),
            json!(rss.idle as f64 / rss.before as f64),
            goal(rss.idle <= 2 * rss.before, &text),
        ],
    );
    Ok(())
}

/// `workload` by the engine alone and through the server, `pairs` times alternately.
async fn driven(
    setup: &Setup,
    workload: &Workload,
    pairs: usize,
    report: &mut Report,
) -> Result<()> {
    let dir = setup.dir.join("server-driven");
    let (mut alone, mut served, mut ratios, mut delays) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..pairs {
        let a = drive::alone(&dir, workload).await?;
        let (s, d) = drive::served(&dir, workload).await?;
        alone.push(a);
        served.push(s);
        ratios.push(s / a);
        delays.extend(d);
    }
    std::fs::remove_dir_all(&dir)?;
    delays.sort();
    let ratio = median(&mut ratios);
    report.row(
        &format!("{}_through_server", workload.key),
        vec![
            json!(format!("steps/s through the server, UI attached")),
            json!(workload.label),
            json!(pairs),
            json!(median(&mut served)),
            json!(null),
            json!(null),
            json!(null),
            json!(median(&mut alone)),
            json!(ratio),
            goal(ratio >= RATIO_MIN, "ratio >= 0.90"),
        ],
    );
    let met = quantile_us(&delays, 0.99) <= DELAY_P99_US;
    report.row(
        &format!("{}_stream_delay", workload.key),
        latency_row(
            "event stream delay".into(),
            workload.label.clone(),
            json!(null),
            &delays,
            goal(met, "p99 <= 50 ms"),
        ),
    );
    Ok(())
}
