//! `cargo xtask soak [--minutes N] [--rate R] [--release]`: a real `apollo11 serve` on a fresh
//! data dir under `target/soak/`, with the shell workflows of `soak_workflows.rs`, under the
//! open-loop load of `soak_load.rs` for N minutes; a sample every 10 s (`soak_sample.rs`),
//! printed as a table; then, once no run is running, the end check of `soak_check.rs` over
//! every run, the flatness verdict on RSS and fds, and a clean stop of the server. The figures
//! go to `target/soak/soak-UNIXTIME.json`; any violation exits non-zero (the data dir is then
//! kept for a look).

use crate::ledger;
use crate::serve::Serve;
use crate::soak_load::Load;
use crate::soak_sample::{flatness, status_kib, Flatness, Sample, Server};
use crate::{soak_check, soak_workflows};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

const USAGE: &str = "usage: cargo xtask soak [--minutes N] [--rate R] [--release]";
/// How long the runs may take to end once the load stops (a long run lasts 30 s and more).
const DRAIN: Duration = Duration::from_secs(180);
/// The flatness slack for RSS (KiB) and for fds: growth within it is noise.
const RSS_SLACK_KIB: f64 = 8.0 * 1024.0;
const FD_SLACK: f64 = 8.0;

#[derive(Debug)]
pub struct Args {
    pub minutes: f64,
    /// Runs started a second.
    pub rate: f64,
    pub release: bool,
}

/// Seconds between samples.
const EVERY_S: f64 = 10.0;

impl Args {
    pub fn parse(args: &[String]) -> Result<Args> {
        let mut parsed = Args {
            minutes: 1.0,
            rate: 4.0,
            release: false,
        };
        let mut rest = args.iter();
        while let Some(flag) = rest.next() {
            let mut number = |name: &str| -> Result<f64> {
                let text = rest
                    .next()
                    .with_context(|| format!("{name} needs a value; {USAGE}"))?;
                let value: f64 = text
                    .parse()
                    .with_context(|| format!("{name} `{text}` is not a number; {USAGE}"))?;
                if value > 0.0 && value.is_finite() {
                    Ok(value)
                } else {
                    bail!("{name} must be above 0, not {text}")
                }
            };
            match flag.as_str() {
                "--minutes" => parsed.minutes = number("--minutes")?,
                "--rate" => parsed.rate = number("--rate")?,
                "--release" => parsed.release = true,
                other => bail!("unknown argument `{other}`; {USAGE}"),
            }
        }
        Ok(parsed)
    }
}

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let args = Args::parse(args)?;
    let profile = if args.release { "release" } else { "debug" };
    if args.release {
        crate::cargo(&["build", "-p", "apollo11-cli", "--locked", "--release"])?;
    } else {
        crate::build_loaded(root)?;
    }
    let out = crate::tidy::target_dir(root)?.join("soak");
    let unix = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)?
        .as_secs();
    let dir = out.join(format!("run-{unix}"));
    let ledger = dir.join("steps.ledger");
    soak_workflows::write(&dir.join("workflows"), &ledger)?;
    let bin = crate::tidy::target_dir(root)?
        .join(profile)
        .join("apollo11");
    let log = dir.join("serve.log");
    let mut server = Serve::start(
        &bin,
        &dir.join("data"),
        &dir.join("workflows"),
        None,
        Some(&log),
    )?;
    println!(
        "soak: {} min at {} runs/s on a {profile} apollo11 serve (pid {}), files (its log: serve.log) in {}",
        args.minutes,
        args.rate,
        server.pid(),
        dir.display()
    );
    let mut report = soak(&mut server, &args, &dir.join("data"), &ledger);
    match server.stop() {
        Some(status) if status.success() => {}
        status => report.violations.push(format!(
            "the server did not stop cleanly on SIGTERM: {status:?}"
        )),
    }
    drop(server);
    match fresh(&bin, &dir) {
        Ok(kib) => {
            if let Some(last) = report.samples.last() {
                println!(
                    "the soak's server at its end: RSS {:.1} MiB ({:.1} MiB anonymous)",
                    last.rss_kib as f64 / 1024.0,
                    last.rss_anon_kib as f64 / 1024.0
                );
            }
            report.fresh_kib = Some(kib);
        }
        Err(e) => report.violations.push(format!("{e:#}")),
    }
    let file = out.join(format!("soak-{unix}.json"));
    let json = report.to_json(&args, profile);
    std::fs::write(&file, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", file.display()))?;
    println!("figures in {}", file.display());
    if !report.violations.is_empty() {
        bail!(
            "the soak found {} violations (data kept in {}):\n{}",
            report.violations.len(),
            dir.display(),
            report.violations.join("\n")
        );
    }
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    println!("soak passed");
    Ok(())
}

#[derive(Default)]
struct Report {
    samples: Vec<Sample>,
    flatness: Vec<Flatness>,
    ends: Vec<Value>,
    runs: usize,
    reruns: u64,
    rss_kib_per_run: Option<f64>,
    /// `VmRSS` and `RssAnon` of a fresh server on the soak's data dir, every run listed.
    fresh_kib: Option<(u64, u64)>,
    errors: Vec<String>,
    violations: Vec<String>,
}

impl Report {
    fn to_json(&self, args: &Args, profile: &str) -> Value {
        json!({
            "minutes": args.minutes, "rate": args.rate, "profile": profile,
            "runs": self.runs, "reruns": self.reruns, "ends": self.ends,
            "rss_kib_per_run_after_warm_up": self.rss_kib_per_run,
            "fresh_server": self.fresh_kib.map(|(rss, anon)| json!({"rss_kib": rss, "rss_anon_kib": anon})),
            "samples": self.samples.iter().map(Sample::to_json).collect::<Vec<_>>(),
            "flatness": self.flatness.iter().map(Flatness::to_json).collect::<Vec<_>>(),
            "errors": self.errors, "violations": self.violations,
        })
    }
}

/// The load, the samples, the end check; violations are collected, not returned early, so
/// the figures are always written.
fn soak(server: &mut Serve, args: &Args, data: &Path, ledger_file: &Path) -> Report {
    let mut report = Report::default();
    let load = Load::new(&server.addr, args.rate);
    let began = Instant::now();
    let threads = load.spawn();
    let end = began + Duration::from_secs_f64(args.minutes * 60.0);
    println!("{}", Sample::HEADER);
    let mut next = began;
    while next < end {
        next += Duration::from_secs_f64(EVERY_S);
        std::thread::sleep(next.min(end).saturating_duration_since(Instant::now()));
        if let Err(e) = sample(server, &load, began, data, &mut report) {
            report.violations.push(format!("{e:#}"));
            break;
        }
    }
    load.stop(threads);
    if let Err(e) = sample(server, &load, began, data, &mut report) {
        report.violations.push(format!("{e:#}"));
    }
    report.errors = load.errors();
    let errors: u64 = report.samples.iter().map(|s| s.errors).sum();
    if errors > 0 {
        report.violations.push(format!(
            "{errors} calls failed, answered 5xx or answered what they should not have (the first: {:?})",
            report.errors
        ));
    }
    judge(&mut report);
    if let Err(e) = end_check(server, &load, ledger_file, &mut report) {
        report.violations.push(format!("{e:#}"));
    }
    report
}

fn sample(
    server: &mut Serve,
    load: &Load,
    began: Instant,
    data: &Path,
    report: &mut Report,
) -> Result<()> {
    if let Some(status) = server.exited()? {
        bail!("I5: the server exited ({status}) under the load");
    }
    let window = load.take_window();
    let at = Server {
        pid: server.pid(),
        addr: &server.addr,
        data,
    };
    let sample = Sample::take(began.elapsed().as_secs_f64(), window, &at)?;
    println!("{}", sample.row());
    report.samples.push(sample);
    Ok(())
}

/// The flatness verdicts on RSS and fds.
fn judge(report: &mut Report) {
    let series = |f: fn(&Sample) -> u64| -> Vec<(f64, f64)> {
        report.samples.iter().map(|s| (s.t, f(s) as f64)).collect()
    };
    report.flatness = vec![
        flatness("RSS (KiB)", &series(|s| s.rss_kib), RSS_SLACK_KIB),
        flatness("open fds", &series(|s| s.fds), FD_SLACK),
    ];
    for verdict in &report.flatness {
        println!("{}", verdict.line());
        if !verdict.flat {
            report.violations.push(verdict.line());
        }
    }
    // What RSS grew by for each run started after warm-up: state kept per run shows as a
    // steady figure here.
    let end = report.samples.last().map_or(0.0, |s| s.t);
    let runs: u64 = report
        .samples
        .iter()
        .filter(|s| s.t >= end / 2.0)
        .map(|s| s.started)
        .sum();
    if runs > 0 {
        let per_run = report.flatness[0].growth / runs as f64;
        println!("RSS: {per_run:.2} KiB more per run started after warm-up ({runs} runs)");
        report.rss_kib_per_run = Some(per_run);
    }
}

/// Tells state kept per run from a leak: a fresh server on the soak's data dir, once it has
/// listed every run (which fills the inspector's rows), holds all the state the soak's server
/// had to keep; what the soak's server held beyond that it lost track of. Returns the fresh
/// server's `VmRSS` and `RssAnon` (KiB). No run is running, so it starts no step.
fn fresh(bin: &Path, dir: &Path) -> Result<(u64, u64)> {
    let ledger = || std::fs::read_to_string(dir.join("steps.ledger")).map(|t| t.lines().count());
    let before = ledger()?;
    let server = Serve::start(
        bin,
        &dir.join("data"),
        &dir.join("workflows"),
        None,
        Some(&dir.join("serve-fresh.log")),
    )?;
    let runs = soak_check::listed(&server.addr)?.len();
    let rss = status_kib(server.pid(), "VmRSS")?;
    let anon = status_kib(server.pid(), "RssAnon")?;
    println!(
        "a fresh server on the same data dir, {runs} runs listed: RSS {:.1} MiB ({:.1} MiB anonymous)",
        rss as f64 / 1024.0,
        anon as f64 / 1024.0
    );
    drop(server);
    let after = ledger()?;
    anyhow::ensure!(
        after == before,
        "a fresh server on the soak's data dir, no run running, ran {} steps",
        after - before
    );
    Ok((rss, anon))
}

fn end_check(server: &Serve, load: &Load, ledger_file: &Path, report: &mut Report) -> Result<()> {
    let drained = Instant::now();
    soak_check::drain(&server.addr, DRAIN)?;
    println!(
        "no run running {:.1} s after the load stopped",
        drained.elapsed().as_secs_f64()
    );
    let runs = load.runs();
    let text = std::fs::read_to_string(ledger_file)
        .with_context(|| format!("reading {}", ledger_file.display()))?;
    let executions = ledger::executions(&text).map_err(anyhow::Error::msg)?;
    let outcome = soak_check::check(&server.addr, &runs, &executions)?;
    let (status, body) = crate::http::request(&server.addr, "GET", "/readyz", None)?;
    anyhow::ensure!(status == 200, "I5: /readyz after the soak: {status} {body}");
    report.runs = runs.len();
    report.reruns = outcome.reruns;
    for ((workflow, state), n) in &outcome.ends {
        println!("{workflow:>16} {state:<12} {n}");
        report
            .ends
            .push(json!({"workflow": workflow, "state": state, "runs": n}));
    }
    println!(
        "I1-I6 hold for {} runs ({} reruns of failed or interrupted attempts)",
        runs.len(),
        outcome.reruns
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args> {
        Args::parse(&args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn arguments_are_checked_and_named() {
        let args = parse(&["--minutes", "60", "--rate", "2.5", "--release"]).unwrap();
        assert_eq!((args.minutes, args.rate, args.release), (60.0, 2.5, true));
        assert_eq!(parse(&[]).unwrap().rate, 4.0);
        let zero = parse(&["--rate", "0"]).unwrap_err().to_string();
        assert!(zero.contains("--rate must be above 0"), "{zero}");
        let word = parse(&["--minutes", "ten"]).unwrap_err().to_string();
        assert!(word.contains("--minutes `ten` is not a number"), "{word}");
        assert!(parse(&["--minutes"]).is_err());
        assert!(parse(&["--fast"])
            .unwrap_err()
            .to_string()
            .contains("`--fast`"));
    }
}
