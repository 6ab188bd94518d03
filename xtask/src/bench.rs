//! `cargo xtask bench [FLAGS] [SCENARIO...]`: builds the benchmark program in release mode
//! and runs it; figures land in `target/bench/<scenario>.json` and a markdown table.
//! `--check` runs nothing: it holds the figures already there against BENCHMARKS.md's goals.

use crate::catalog::{Flags, Scenario};
use crate::goals::{self, Goal, Outcome};
use anyhow::{bail, Context, Result};
use clap::Parser;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The peer engine's program: its own workspace, so its dependencies stay out of ours.
const PEER: &str = "bench-peers/duroxide";

/// `cargo xtask bench`'s command line: `apollo11-bench`'s flags, passed on, and `--check`.
#[derive(Parser)]
#[command(
    name = "cargo xtask bench",
    about = "Builds apollo11-bench and the duroxide peer in release mode and runs the scenarios \
             named (all by default): a markdown table each, and <out>/<scenario>.json",
    after_help = "Run benchmarks alone: the figures move with the machine's load. The pg_ \
                  scenarios need APOLLO11_BENCH_PG_URL or APOLLO11_TEST_PG_URL."
)]
struct Args {
    #[command(flatten)]
    flags: Flags,
    /// Build and run nothing: hold the figures in the --out folder against the goals of BENCHMARKS.md
    /// (of the scenarios named, else all); exit 1 if one is missed.
    #[arg(long, conflicts_with_all = ["quick", "metrics", "dir"])]
    check: bool,
}

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let args = Args::try_parse_from(
        std::iter::once("cargo xtask bench".to_owned()).chain(args.iter().cloned()),
    )
    .unwrap_or_else(|e| e.exit());
    let target = crate::tidy::target_dir(root)?;
    let out = args
        .flags
        .out
        .clone()
        .unwrap_or_else(|| target.join("bench"));
    if args.check {
        let (missed, checked) = check(root, &out, &args.flags.scenarios)?;
        if missed > 0 {
            // A verdict, not a failure of the tool: no backtrace.
            eprintln!(
                "{missed} of {checked} goals missed (figures from {})",
                out.display()
            );
            std::process::exit(1);
        }
        return Ok(());
    }
    build(root, &["-p", "apollo11-bench", "-p", "apollo11-cli"])?;
    let manifest = root.join(PEER).join("Cargo.toml");
    let manifest = manifest.to_string_lossy();
    let peer_target = target.join("peer");
    build(
        root,
        &[
            "--manifest-path",
            &manifest,
            "--target-dir",
            &peer_target.to_string_lossy(),
        ],
    )?;
    let revision = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root)
        .output()
        .ok();
    let revision = revision
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let status = Command::new(target.join("release/apollo11-bench"))
        .args(passed_on(&args.flags))
        .arg("--out")
        .arg(&out)
        .env("APOLLO11_GIT_REV", revision)
        .env("APOLLO11_BIN", target.join("release/apollo11"))
        .env(
            "APOLLO11_PEER_DUROXIDE",
            peer_target.join("release/apollo11-peer-duroxide"),
        )
        .current_dir(root)
        .status()
        .context("running apollo11-bench")?;
    if !status.success() {
        bail!("a benchmark failed");
    }
    println!(
        "\nresults in {}; `cargo xtask bench --check` holds them against the goals",
        out.display()
    );
    Ok(())
}

/// The flags for `apollo11-bench` (all but `--out`, which is always passed).
fn passed_on(flags: &Flags) -> Vec<String> {
    let mut args = Vec::new();
    for (set, flag) in [(flags.quick, "--quick"), (flags.metrics, "--metrics")] {
        if set {
            args.push(flag.to_owned());
        }
    }
    if let Some(dir) = &flags.dir {
        args.extend(["--dir".to_owned(), dir.display().to_string()]);
    }
    args.extend(flags.scenarios.iter().map(|s| s.name()));
    args
}

/// Holds the figures in `out` against the goals of BENCHMARKS.md of `scenarios` (all when
/// empty), one line a goal; returns how many were missed, of how many.
fn check(root: &Path, out: &Path, scenarios: &[Scenario]) -> Result<(usize, usize)> {
    let path = root.join("BENCHMARKS.md");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let goals = goals::parse(&text).map_err(|e| anyhow::anyhow!("{}:\n{e}", path.display()))?;
    let chosen = |g: &&Goal| scenarios.is_empty() || scenarios.contains(&g.scenario);
    let mut runs = BTreeMap::new();
    let (mut checked, mut missed) = (0, 0);
    for goal in goals.iter().filter(chosen) {
        let name = goal.scenario.name();
        let run = runs.entry(name.clone()).or_insert_with(|| load(out, &name));
        let outcome = match run {
            Ok(run) => goal.evaluate(run),
            Err(why) => Outcome::NotMeasured(why.clone()),
        };
        println!("{}", line(goal, &outcome));
        checked += 1;
        missed += usize::from(matches!(outcome, Outcome::Missed { .. }));
    }
    quick_runs(&runs);
    if checked == 0 {
        println!("BENCHMARKS.md sets no goal for {}", goals::names(scenarios));
    }
    Ok((missed, checked))
}

/// A scenario's JSON in `out`, or why there is none.
fn load(out: &Path, name: &str) -> Result<Value, String> {
    let path = out.join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// One goal's line of the report.
fn line(goal: &Goal, outcome: &Outcome) -> String {
    let (verdict, value, bound) = match outcome {
        Outcome::Met { value, bound } => ("met", value, bound),
        Outcome::Missed { value, bound } => ("MISSED", value, bound),
        Outcome::NotMeasured(why) => return format!("not measured  {goal}: {why}"),
    };
    format!(
        "{verdict:<12}  {goal}: {} (bound {})",
        round(*value),
        round(*bound)
    )
}

/// A figure as a person reads it: whole above 100, else three decimals.
fn round(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Says which of the runs checked were `--quick`: a smoke test, not a figure.
fn quick_runs(runs: &BTreeMap<String, Result<Value, String>>) {
    let quick: Vec<&str> = runs
        .iter()
        .filter(|(_, run)| run.as_ref().is_ok_and(|r| r["quick"] == true))
        .map(|(name, _)| name.as_str())
        .collect();
    if !quick.is_empty() {
        println!(
            "(--quick runs, smoke tests rather than figures: {})",
            quick.join(", ")
        );
    }
}

fn build(root: &Path, what: &[&str]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args(["build", "--release", "--quiet"])
        .args(what)
        .current_dir(root)
        .status()?;
    if !status.success() {
        bail!("building {} failed", what.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("cargo xtask bench").chain(args.iter().copied()))
    }

    #[test]
    fn flags_are_passed_on_and_bad_ones_refused() {
        let args = parse(&["--quick", "--dir", "/d", "open_loop", "append"]).expect("parsed");
        assert_eq!(
            passed_on(&args.flags),
            ["--quick", "--dir", "/d", "open_loop", "append"]
        );
        for bad in [&["nope"][..], &["--bogus"], &["--check", "--quick"]] {
            let err = parse(bad).err().expect("refused");
            assert_eq!(err.exit_code(), 2, "{bad:?}");
        }
    }

    #[test]
    fn check_counts_missed_goals_of_the_scenarios_named() {
        let root = std::env::temp_dir().join(format!("xtask-bench-check-{}", std::process::id()));
        std::fs::create_dir_all(&root).expect("a dir");
        std::fs::write(
            root.join("BENCHMARKS.md"),
            "<!-- goal: replay log ratio_to_naive >= 2.5 -->\n\
             <!-- goal: replay log events_per_s >= 5000000 -->\n\
             <!-- goal: scheduler chain ratio_to_limit >= 0.5 -->\n",
        )
        .expect("written");
        let run = r#"{"quick": false, "rows": [{"row": "log", "ratio_to_naive": 3.1, "events_per_s": 4e6}]}"#;
        std::fs::write(root.join("replay.json"), run).expect("written");
        let checked = check(&root, &root, &[Scenario::Replay]).expect("checked");
        let all = check(&root, &root, &[]).expect("checked");
        std::fs::remove_dir_all(&root).expect("removed");
        assert_eq!(checked, (1, 2));
        assert_eq!(
            all,
            (1, 3),
            "the scheduler goal is not measured, not missed"
        );
    }
}
