//! The soak's samples: every window, the server's RSS and open file descriptors (from
//! `/proc/PID`), the p99 of the window's API latencies, runs finished and events appended
//! (from `/metrics`), the data dir's size; and the flatness verdict on RSS and fds.

use crate::soak_load::Window;
use anyhow::{ensure, Context, Result};
use serde_json::{json, Value};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// One window's figures.
pub struct Sample {
    /// Seconds since the load started.
    pub t: f64,
    pub started: u64,
    pub finished: u64,
    pub events: u64,
    /// p99 of the window's calls by kind, and of all of them (`all`), in ms.
    pub p99_ms: Vec<(&'static str, f64)>,
    pub calls: usize,
    pub errors: u64,
    pub rss_kib: u64,
    /// `RssAnon` (the heap, stacks) and `RssFile` (the binary's pages as they are touched).
    pub rss_anon_kib: u64,
    pub rss_file_kib: u64,
    pub fds: u64,
    /// The log's files (segments, index files, snapshots, blobs), in bytes on disk.
    pub log_bytes: u64,
    /// The steps' logs (`logs/` of the data dir), in bytes on disk.
    pub step_log_bytes: u64,
}

/// What the server's `/proc` and `/metrics` and the data dir say now.
pub struct Server<'a> {
    pub pid: u32,
    pub addr: &'a str,
    pub data: &'a Path,
}

impl Sample {
    pub fn take(t: f64, window: Window, server: &Server) -> Result<Sample> {
        let mut all: Vec<u64> = window.latencies.values().flatten().copied().collect();
        let mut p99s = vec![("all", p99_ms(&mut all))];
        for (kind, mut micros) in window.latencies {
            p99s.push((kind, p99_ms(&mut micros)));
        }
        let (log_bytes, step_log_bytes) = sizes(server.data)?;
        let metrics = metrics(server.addr)?;
        Ok(Sample {
            t,
            started: window.started,
            finished: counter(&metrics, "apollo11_runs_finished_total"),
            events: counter(&metrics, "apollo11_events_appended_total"),
            p99_ms: p99s,
            calls: all.len(),
            errors: window.errors,
            rss_kib: status_kib(server.pid, "VmRSS")?,
            rss_anon_kib: status_kib(server.pid, "RssAnon")?,
            rss_file_kib: status_kib(server.pid, "RssFile")?,
            fds: fds(server.pid)?,
            log_bytes,
            step_log_bytes,
        })
    }

    pub const HEADER: &'static str =
        "     t  started finished   events  calls errors  p99 ms (all/start/read/list/action/sse)   RSS MiB   fds  log MiB";

    /// One line of the table under `HEADER`.
    pub fn row(&self) -> String {
        let p99 = |kind: &str| {
            self.p99_ms
                .iter()
                .find(|(k, _)| *k == kind)
                .map_or("-".to_owned(), |(_, ms)| format!("{ms:.0}"))
        };
        let kinds = ["all", "start", "read", "list", "action", "sse"].map(p99);
        format!(
            "{:>6.0} {:>8} {:>8} {:>8} {:>6} {:>6}  {:<40} {:>8.1} {:>5} {:>8.1}",
            self.t,
            self.started,
            self.finished,
            self.events,
            self.calls,
            self.errors,
            kinds.join("/"),
            self.rss_kib as f64 / 1024.0,
            self.fds,
            self.log_bytes as f64 / 1048576.0
        )
    }

    pub fn to_json(&self) -> Value {
        let p99: serde_json::Map<String, Value> = self
            .p99_ms
            .iter()
            .map(|(k, ms)| ((*k).to_owned(), json!(ms)))
            .collect();
        json!({
            "t_s": self.t, "runs_started": self.started, "runs_finished": self.finished,
            "events": self.events, "calls": self.calls, "errors": self.errors, "p99_ms": p99,
            "rss_kib": self.rss_kib, "rss_anon_kib": self.rss_anon_kib,
            "rss_file_kib": self.rss_file_kib, "fds": self.fds, "log_bytes": self.log_bytes,
            "step_log_bytes": self.step_log_bytes,
        })
    }
}

/// The 99th percentile of `micros`, in ms (0 for none).
fn p99_ms(micros: &mut [u64]) -> f64 {
    if micros.is_empty() {
        return 0.0;
    }
    micros.sort_unstable();
    let i = (micros.len() * 99).div_ceil(100).max(1) - 1;
    micros[i] as f64 / 1000.0
}

/// A `NAME:  N kB` line of `/proc/PID/status`, in KiB.
pub fn status_kib(pid: u32, name: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("/proc/{pid}/status has no {name} line"))
}

fn fds(pid: u32) -> Result<u64> {
    let dir = format!("/proc/{pid}/fd");
    Ok(std::fs::read_dir(&dir)
        .with_context(|| format!("listing {dir}"))?
        .count() as u64)
}

/// The log's bytes (everything but `logs/`) and the steps' logs' bytes of the data dir.
fn sizes(data: &Path) -> Result<(u64, u64)> {
    let (mut log, mut steps) = (0, 0);
    for entry in std::fs::read_dir(data).with_context(|| format!("listing {}", data.display()))? {
        let entry = entry?;
        let bytes = tree_bytes(&entry.path())?;
        if entry.file_name() == "logs" {
            steps += bytes;
        } else {
            log += bytes;
        }
    }
    Ok((log, steps))
}

fn tree_bytes(path: &Path) -> Result<u64> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_dir() {
        // The blocks on disk: the log preallocates its segment files.
        return Ok(meta.blocks() * 512);
    }
    // A folder's own blocks count: the steps' logs are many folders of small files.
    let mut total = meta.blocks() * 512;
    for entry in std::fs::read_dir(path)? {
        // A file removed between the listing and its stat (a temp file) counts nothing.
        total += tree_bytes(&entry?.path()).unwrap_or(0);
    }
    Ok(total)
}

fn metrics(addr: &str) -> Result<String> {
    let (status, text) = crate::http::request(addr, "GET", "/metrics", None)?;
    ensure!(status == 200, "GET /metrics: {status}");
    Ok(text)
}

/// The sum of a counter's series in a Prometheus text (0 when absent).
fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with([' ', '{']))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Whether a series stayed flat after warm-up.
pub struct Flatness {
    pub name: &'static str,
    /// Samples judged: those of the second half of the soak.
    pub samples: usize,
    /// The least-squares slope over them, per hour.
    pub slope_per_hour: f64,
    /// The slope times the second half's span: what the line says it grew by.
    pub growth: f64,
    /// `growth` over the mean of the samples judged.
    pub relative: f64,
    pub flat: bool,
}

/// The rule: a series is flat when the least-squares line through its samples of the second
/// half of the soak (the first half is warm-up) grows by at most `REL_BOUND` of their mean,
/// or by at most `slack` (absolute, for series whose noise is a few units). Fewer than
/// `MIN_SAMPLES` samples are not judged (flat, and said so).
pub const REL_BOUND: f64 = 0.10;
pub const MIN_SAMPLES: usize = 4;

pub fn flatness(name: &'static str, points: &[(f64, f64)], slack: f64) -> Flatness {
    let end = points.last().map_or(0.0, |p| p.0);
    let judged: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|p| p.0 >= end / 2.0)
        .collect();
    let n = judged.len() as f64;
    let (mean_t, mean_v) = (
        judged.iter().map(|p| p.0).sum::<f64>() / n,
        judged.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let var_t: f64 = judged.iter().map(|p| (p.0 - mean_t).powi(2)).sum();
    let cov: f64 = judged.iter().map(|p| (p.0 - mean_t) * (p.1 - mean_v)).sum();
    let slope = if var_t > 0.0 { cov / var_t } else { 0.0 };
    let span = judged.last().map_or(0.0, |p| p.0) - judged.first().map_or(0.0, |p| p.0);
    let growth = slope * span;
    let relative = if mean_v > 0.0 { growth / mean_v } else { 0.0 };
    Flatness {
        name,
        samples: judged.len(),
        slope_per_hour: slope * 3600.0,
        growth,
        relative,
        flat: judged.len() < MIN_SAMPLES || relative <= REL_BOUND || growth <= slack,
    }
}

impl Flatness {
    pub fn line(&self) -> String {
        let verdict = match (self.samples < MIN_SAMPLES, self.flat) {
            (true, _) => "not judged (too few samples)",
            (false, true) => "flat",
            (false, false) => "GROWS",
        };
        format!(
            "{}: {verdict}: {} samples after warm-up, slope {:.1}/h, line grows {:.1} ({:+.1}% of its mean)",
            self.name,
            self.samples,
            self.slope_per_hour,
            self.growth,
            self.relative * 100.0
        )
    }

    pub fn to_json(&self) -> Value {
        json!({"series": self.name, "samples": self.samples, "slope_per_hour": self.slope_per_hour,
            "growth": self.growth, "relative": self.relative, "flat": self.flat})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(f: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
        (0..60)
            .map(|i| (i as f64 * 10.0, f(i as f64 * 10.0)))
            .collect()
    }

    #[test]
    fn a_leak_after_warm_up_is_not_flat() {
        // 100 MiB, then 10 MiB a minute: +48 MiB (28 %) over the second half.
        let leak = flatness("RSS", &series(|t| 100.0 + t / 6.0), 8.0);
        assert!(!leak.flat, "{}", leak.line());
        assert!((leak.slope_per_hour - 600.0).abs() < 1e-6);
        assert!((leak.growth - 290.0 / 6.0).abs() < 1e-6);
    }

    #[test]
    fn a_warm_up_then_a_plateau_is_flat() {
        let warm = flatness("RSS", &series(|t| if t < 200.0 { t } else { 200.0 }), 8.0);
        assert!(warm.flat, "{}", warm.line());
        assert_eq!(warm.samples, 30);
    }

    #[test]
    fn noise_of_a_few_fds_is_within_the_slack() {
        let fds = flatness("fds", &series(|t| 20.0 + (t / 10.0) % 2.0 * 3.0), 8.0);
        assert!(fds.flat, "{}", fds.line());
        let climbing = flatness("fds", &series(|t| 20.0 + t / 10.0), 8.0);
        assert!(!climbing.flat, "{}", climbing.line());
    }

    #[test]
    fn too_few_samples_are_not_judged() {
        let short = flatness("fds", &[(0.0, 1.0), (10.0, 50.0), (20.0, 99.0)], 8.0);
        assert!(short.flat && short.line().contains("not judged"));
    }

    #[test]
    fn the_server_status_is_read_in_kib() {
        let me = std::process::id();
        let rss = status_kib(me, "VmRSS").unwrap();
        assert!(rss > 0 && rss >= status_kib(me, "RssAnon").unwrap());
        let err = status_kib(me, "VmNothing").unwrap_err().to_string();
        assert!(err.contains("no VmNothing line"), "{err}");
    }

    #[test]
    fn p99_and_counters() {
        let mut micros: Vec<u64> = (1..=200).map(|i| i * 1000).collect();
        assert_eq!(p99_ms(&mut micros), 198.0);
        assert_eq!(p99_ms(&mut []), 0.0);
        let text = "# TYPE x counter\napollo11_runs_finished_total{workflow=\"a\",status=\"succeeded\"} 3\napollo11_runs_finished_total{workflow=\"b\",status=\"rolled_back\"} 2\napollo11_runs_finished_totals 9\n";
        assert_eq!(counter(text, "apollo11_runs_finished_total"), 5);
    }
}
