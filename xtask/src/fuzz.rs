//! `cargo xtask fuzz [--secs SECS] [TARGET..]` (`--time` is the same): runs each libFuzzer
//! target of `fuzz/` (its own workspace, built by cargo-fuzz on the nightly toolchain) for a
//! bounded time from its committed seeds (`fuzz/seeds/TARGET`) and corpus
//! (`fuzz/corpus/TARGET`), adding what it finds to `target/fuzz-corpus/TARGET` (kept between
//! runs, never committed as is: see fuzz/README.md for minimising it into `fuzz/corpus/`),
//! then prints each target's executions and rate. A crash fails the command with the input
//! libFuzzer saved (`fuzz/artifacts/TARGET/`); replay it with
//! `cargo +nightly fuzz run -s none --debug-assertions TARGET FILE` in `fuzz/`.
//!
//! No sanitizer: the workspace forbids unsafe code, so the targets look for panics, hangs and
//! broken properties, which libFuzzer sees without one (and twice as fast).

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// Every target, in the order they run.
pub const TARGETS: [&str; 7] = [
    "event_record",
    "segment",
    "snapshot_file",
    "index_file",
    "bundle",
    "workflow_toml",
    "http_request",
];

/// Seconds each target runs when `--secs` is not given.
const DEFAULT_SECS: u64 = 60;
/// Longest one input may take before libFuzzer reports it as a hang.
const INPUT_TIMEOUT_SECS: u64 = 30;

/// What one target did.
struct Stats {
    target: String,
    runs: u64,
    per_sec: u64,
}

/// Parses the arguments and runs the targets named (all when none is).
pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let mut secs = DEFAULT_SECS;
    let mut targets = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--secs" | "--time" => {
                let value = args
                    .next()
                    .with_context(|| format!("{arg} takes a number of seconds"))?;
                secs = value
                    .parse()
                    .with_context(|| format!("{arg} takes a number of seconds, not `{value}`"))?;
            }
            target if TARGETS.contains(&target) => targets.push(target),
            other => bail!(
                "unknown argument `{other}`; usage: cargo xtask fuzz [--secs SECS] [TARGET..], \
                 TARGET one of {}",
                TARGETS.join(", ")
            ),
        }
    }
    if targets.is_empty() {
        targets = TARGETS.to_vec();
    }
    fuzz(root, &targets, secs)
}

/// Runs `targets` for `secs` seconds each and prints their figures.
pub fn fuzz(root: &Path, targets: &[&str], secs: u64) -> Result<()> {
    require_tools()?;
    let dir = root.join("fuzz");
    let grown = crate::tidy::target_dir(root)?.join("fuzz-corpus");
    let mut all = Vec::new();
    for target in targets {
        all.push(run_target(&dir, &grown.join(target), target, secs)?);
    }
    println!("{:<14} {:>12} {:>10}", "target", "executions", "exec/s");
    for s in &all {
        println!("{:<14} {:>12} {:>10}", s.target, s.runs, s.per_sec);
    }
    Ok(())
}

/// Fails with what to install when the nightly toolchain or cargo-fuzz is missing.
fn require_tools() -> Result<()> {
    let toolchains = Command::new("rustup")
        .args(["toolchain", "list"])
        .output()
        .context("running rustup toolchain list (cargo xtask fuzz needs rustup)")?;
    let listed = String::from_utf8_lossy(&toolchains.stdout);
    if !listed.lines().any(|l| l.starts_with("nightly")) {
        bail!("cargo xtask fuzz needs the nightly toolchain: rustup toolchain install nightly");
    }
    let fuzz = Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !fuzz.is_ok_and(|s| s.success()) {
        bail!("cargo xtask fuzz needs cargo-fuzz: cargo install cargo-fuzz --locked");
    }
    Ok(())
}

/// Runs `target` in the fuzz workspace `dir` for `secs` seconds, adding what it finds to
/// `grown`.
fn run_target(dir: &Path, grown: &Path, target: &str, secs: u64) -> Result<Stats> {
    std::fs::create_dir_all(grown).with_context(|| format!("creating {}", grown.display()))?;
    eprintln!("$ cargo +nightly fuzz run {target} (for {secs} s)");
    let output = Command::new("cargo")
        .current_dir(dir)
        .args([
            "+nightly",
            "fuzz",
            "run",
            "-s",
            "none",
            "--debug-assertions",
            target,
        ])
        .arg(grown)
        .args([format!("corpus/{target}"), format!("seeds/{target}")])
        .arg("--")
        .arg(format!("-max_total_time={secs}"))
        .arg(format!("-timeout={INPUT_TIMEOUT_SECS}"))
        .arg("-print_final_stats=1")
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running cargo fuzz run {target}"))?;
    let log = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let lines: Vec<&str> = log.lines().collect();
        // The panic's message (its backtrace is long), then libFuzzer's report of the input.
        let panic = lines.iter().position(|l| l.contains("panicked at"));
        for line in panic.map_or(&[][..], |at| &lines[at..(at + 3).min(lines.len())]) {
            eprintln!("{line}");
        }
        for line in &lines[lines.len().saturating_sub(30)..] {
            eprintln!("{line}");
        }
        bail!(
            "fuzz target {target} failed ({}): the input is in fuzz/artifacts/{target}/",
            output.status
        );
    }
    let stat = |name: &str| -> Result<u64> {
        let line = log
            .lines()
            .find_map(|l| l.strip_prefix(&format!("stat::{name}:")))
            .with_context(|| format!("{target}: libFuzzer printed no {name}"))?;
        line.trim()
            .parse()
            .with_context(|| format!("{target}: {name} `{line}`"))
    };
    Ok(Stats {
        target: target.to_owned(),
        runs: stat("number_of_executed_units")?,
        per_sec: stat("average_exec_per_sec")?,
    })
}
