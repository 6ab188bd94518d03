//! Schedules at scale: one server (in this process, on a runtime of its own) whose workflow
//! declares 1,000 schedules firing every second, each fire a run of one step its condition
//! skips (no process: the fire itself is what is measured). After a warm-up, for a window
//! of whole seconds: the fires started per second, the lag of each fire from its time to
//! its run's `RunCreated` (stamped by the store, in ms), and the process's CPU over the
//! window as a share of one core. Baseline in the same run: the same server with the
//! schedules disabled, over the same window (what serving and its rounds cost idle).

use crate::catalog::Scenario;
use crate::report::Report;
use crate::server::host::Hosted;
use crate::Setup;
use anyhow::{ensure, Context, Result};
use apollo11_log::{FileLog, Options};
use apollo11_runtime::{EventId, EventKind, EventStore};
use apollo11_schedule::Cron;
use apollo11_server::ServerConfig;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const NAME: &str = "fires";
const SCHEDULES: usize = 1_000;
const WARM_UP: Duration = Duration::from_secs(3);

pub async fn run(setup: &Setup) -> Result<Report> {
    let mut report = Report::new(Scenario::Schedules);
    report.header();
    let window = Duration::from_secs(if setup.quick { 3 } else { 10 });
    let idle = served(&setup.dir.join("idle"), false, window).await?;
    let busy = served(&setup.dir.join("busy"), true, window).await?;
    let lags = fire_lags(&busy.data, busy.from_ms, busy.to_ms).await?;
    let expected = SCHEDULES as u64 * window.as_secs();
    ensure!(!lags.is_empty(), "no fire landed in the window");
    let quantile = |q: f64| lags[((lags.len() - 1) as f64 * q).round() as usize];
    let rows = [
        (
            "fires",
            "fires started in the window",
            json!(lags.len()),
            "runs",
            format!(
                "{expected} due ({SCHEDULES} schedules × {} s)",
                window.as_secs()
            ),
        ),
        (
            "lag_p50",
            "fire lag p50",
            json!(quantile(0.5)),
            "ms",
            "fire time → `RunCreated` stamped".to_owned(),
        ),
        (
            "lag_p99",
            "fire lag p99",
            json!(quantile(0.99)),
            "ms",
            "goal ≤ 100 ms".to_owned(),
        ),
        (
            "lag_max",
            "fire lag max",
            json!(lags[lags.len() - 1]),
            "ms",
            String::new(),
        ),
        (
            "cpu_firing",
            "process CPU, schedules firing",
            json!(round2(busy.cpu_share)),
            "cores",
            String::new(),
        ),
        (
            "cpu_disabled",
            "process CPU, schedules disabled",
            json!(round2(idle.cpu_share)),
            "cores",
            "baseline: the same server idle".to_owned(),
        ),
    ];
    for (key, measure, value, unit, note) in rows {
        report.row(key, vec![json!(measure), value, json!(unit), json!(note)]);
    }
    Ok(report)
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// What a server did over the window.
struct Served {
    data: PathBuf,
    from_ms: u64,
    to_ms: u64,
    cpu_share: f64,
}

/// Serves a fresh data dir whose workflow has the schedules (`enabled` or not) through a
/// warm-up and a window; the window's bounds (on whole seconds) and the CPU used in it.
async fn served(dir: &Path, enabled: bool, window: Duration) -> Result<Served> {
    let _ = std::fs::remove_dir_all(dir);
    let workflows = dir.join("workflows");
    std::fs::create_dir_all(&workflows)?;
    std::fs::write(workflows.join("fires.toml"), workflow(enabled))?;
    let data = std::path::absolute(dir.join("data"))?;
    let mut config = ServerConfig::new(data.clone(), "127.0.0.1:0".parse()?);
    config.workflows = Some(workflows);
    let hosted = Hosted::start(config).await?;
    tokio::time::sleep(WARM_UP).await;
    let from_ms = next_second(now_ms());
    tokio::time::sleep(Duration::from_millis(from_ms - now_ms())).await;
    let cpu = cpu_seconds()?;
    tokio::time::sleep(window).await;
    let cpu_share = (cpu_seconds()? - cpu) / window.as_secs_f64();
    let to_ms = from_ms + window.as_millis() as u64;
    hosted.stop().await?;
    Ok(Served {
        data,
        from_ms,
        to_ms,
        cpu_share,
    })
}

fn workflow(enabled: bool) -> String {
    let mut text = format!(
        "[workflow]\nname = \"{NAME}\"\n[params.go]\ntype = \"boolean\"\ndefault = false\n\
         [[steps]]\nname = \"s\"\nrun = \"true\"\nidempotency = \"natural\"\nwhen = \"params.go == true\"\n"
    );
    for i in 0..SCHEDULES {
        text += &format!(
            "[schedules.s{i:04}]\ncron = \"* * * * * *\"\ncatch_up = \"none\"\nenabled = {enabled}\n"
        );
    }
    text
}

/// The lag in ms of each fire whose time is in `[from_ms, to_ms)`, sorted, read from the
/// data dir's log once its server has stopped.
async fn fire_lags(data: &Path, from_ms: u64, to_ms: u64) -> Result<Vec<u64>> {
    let cron = Cron::parse("* * * * * *", "UTC").map_err(|e| anyhow::anyhow!("{e}"))?;
    let store = FileLog::open(data, Options::default())?;
    let mut lags = Vec::new();
    let mut next = EventId(1);
    loop {
        let events = store.read_from(next, 10_000).await?;
        let Some(last) = events.last() else {
            break;
        };
        next = EventId(last.event_id.0 + 1);
        for e in events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::RunCreated { .. }))
        {
            let fire = (e.run_id.as_str().rsplit('-').next()).and_then(|s| cron.at_stamp(s));
            if let Some(fire) = fire.filter(|f| (from_ms..to_ms).contains(&f.ms)) {
                lags.push(e.at_ms.saturating_sub(fire.ms));
            }
        }
    }
    lags.sort_unstable();
    Ok(lags)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn next_second(ms: u64) -> u64 {
    (ms / 1_000 + 1) * 1_000
}

/// The process's user and system CPU so far, in seconds (`/proc/self/stat`, in clock ticks
/// of 1/100 s).
fn cpu_seconds() -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let after_name = stat.rsplit_once(')').context("/proc/self/stat")?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| -> Result<f64> {
        Ok(fields
            .get(i)
            .context("/proc/self/stat field")?
            .parse::<f64>()?)
    };
    // utime and stime are the 14th and 15th fields; the 3rd is the first after the name.
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}
