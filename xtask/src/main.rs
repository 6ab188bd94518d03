//! `cargo xtask <command>`: the project's automation, in Rust instead of Makefiles.

mod alerts;
mod api_fuzz;
mod bench;
// The benchmark scenarios and their flags, one table shared with `apollo11-bench`: read here
// by path, so that a bad scenario is refused before the release build.
#[path = "../../crates/apollo11-bench/src/catalog.rs"]
mod catalog;
mod crash;
mod docs;
mod failover;
mod failover_cluster;
mod failover_restart;
mod fuzz;
mod goals;
mod http;
mod invariants;
// The crash child's steps ledger and its I3 check, shared with the kill tests: one file,
// inside the runtime's package (the child is packaged with it), read here by path.
#[path = "../../crates/apollo11-runtime/examples/crash_child/ledger.rs"]
mod ledger;
mod mutants;
mod package;
mod pg_private;
mod psql;
mod readme;
mod serve;
mod sim;
mod soak;
mod soak_check;
mod soak_load;
mod soak_sample;
mod soak_workers;
mod soak_workflows;
mod tidy;
mod ui;

use anyhow::{bail, Context, Result};
use std::process::Command;

const USAGE: &str =
    "usage: cargo xtask <ci|tidy|alerts|readme|package|crash|sim|failover|bench|mutants|ui|api-fuzz|fuzz|soak|soak-workers>
  ci       fmt check, clippy -D warnings, every test of the workspace (tidy included; promtool
           required), rustdoc -D warnings, the alert rules, the web UI in Chromium, the packaged
           library crates and their tests, the README's first command from the repository root,
           schemathesis on the API, crash test (file log, 150 kills; PostgreSQL, 70), 500
           simulation seeds on the file log and on memory, 40 on PostgreSQL, the workers' soak
           (10 faults), failover test (the
           fuzz corpora are replayed by the tests; libFuzzer runs by `cargo xtask fuzz`, not here)
  alerts   promtool check rules and promtool test rules on deploy/prometheus/
  tidy     check crate layering and the purity of the core crates
  readme   run the README's first command as written, check its run succeeded
  package  cargo package of the library crates; their packaged tests in a
           workspace of their own; tests/external/ built on one library crate each
  crash    [--kills N] [--seed S] [--dir DIR] [--store postgres://…]: SIGKILL the engine at
           random instants (on the file log, or on a fresh schema of that database under
           leases), check I1-I6
  sim      [--release] [--seeds N] [--seed S] [--store file|memory|postgres]: the production
           engine under simulated time, disk, steps, operators and faults (power loss, sync
           errors, kills), seeds S..S+N; a failure prints the seed and the shortest history
           found; postgres: on APOLLO11_TEST_PG_URL under leases, real time, kills only
  failover [--restarts]: three `apollo11 serve` on one PostgreSQL schema
           (APOLLO11_TEST_PG_URL): SIGKILL one half-way through 300 runs, SIGSTOP one past its
           lease ttl, connections cut; then on a private server (initdb, a free port) the
           database restarted twice (fast, immediate) during 100 runs (--restarts: only
           that); takeover times, stale appends, I1-I6
  bench    [--quick] [--metrics] [--out DIR] [--dir DIR] [--check] [SCENARIO]...: release
           benchmarks, JSON in target/bench/ (`cargo xtask bench --help` lists the scenarios);
           --check: the figures there against BENCHMARKS.md's goals, running nothing
  mutants  [core|dag|machine|log]...: cargo-mutants (installed if missing) on the pure crates
           and the log's recovery files, each with its crate's tests; prints each score
           (caught / (caught + missed)) and the surviving mutants; output in target/mutants/
  ui       [--paint]: the web UI's browser test (node, npm, /usr/bin/chromium) against a real
           `apollo11 serve`; screenshots in target/ui-screenshots/; --paint: time to first
           paint of a 1,000-step run page, as JSON
  api-fuzz [--examples N] [--seed S]: schemathesis (pinned; .ci/run installs it) against a
           real `apollo11 serve` with a token and paused runs, from its OpenAPI document: no
           5xx, documented statuses, bodies matching their schemas; JUnit in target/api-fuzz/
  fuzz     [--secs SECS] [TARGET]...: each libFuzzer target of fuzz/ for SECS seconds (60),
           from its seeds; prints executions and exec/s; a crash fails with its input
  soak     [--minutes N] [--rate R] [--release]: `apollo11 serve` under an open-loop load of
           runs (R a second, 4 by default), operator actions and readers for N minutes (1);
           RSS, fds, p99 latencies, runs, events and log size every 10 s (JSON in
           target/soak/); then I1-I6 over every run and a flatness verdict on RSS and fds
  soak-workers [--faults N] [--seed S]: `apollo11 serve` and three `apollo11 worker`s under
           N faults (100), one every 2 s: workers killed (back at once, or late), cut off
           (SIGSTOP past the heartbeat timeout), the server killed; then every run succeeded,
           no step ran again after its success, no result lost, reruns of a `compensate` step
           after their undo; tries, lost, adopted, refused, taken up again";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("tidy") => tidy::check(&tidy::workspace_root()?),
        Some("alerts") => alerts::check(&tidy::workspace_root()?),
        Some("package") => package::check(&tidy::workspace_root()?),
        Some("readme") => readme::check_first_command(&tidy::workspace_root()?),
        Some("bench") => bench::run(&tidy::workspace_root()?, &args[1..]),
        Some("mutants") => mutants::run(&tidy::workspace_root()?, &args[1..]),
        Some("ui") => ui::run(&tidy::workspace_root()?, &args[1..]),
        Some("api-fuzz") => api_fuzz::run(&tidy::workspace_root()?, &args[1..]),
        Some("fuzz") => fuzz::run(&tidy::workspace_root()?, &args[1..]),
        Some("failover") => failover::run(&tidy::workspace_root()?, &args[1..]),
        Some("sim") => sim::run(&tidy::workspace_root()?, &args[1..]),
        Some("soak") => soak::run(&tidy::workspace_root()?, &args[1..]),
        Some("soak-workers") => soak_workers::run(&tidy::workspace_root()?, &args[1..]),
        Some("crash") => crash::run(&tidy::workspace_root()?, crash::Args::parse(&args[1..])?),
        _ => bail!("{USAGE}"),
    }
}

fn ci() -> Result<()> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    // Every target; then the build of the README's first command, the CLI without its
    // default features.
    for which in [
        &["--workspace", "--all-targets"][..],
        &["-p", "apollo11-cli", "--no-default-features"],
    ] {
        let args = [&["clippy", "--locked"], which, &["--", "-D", "warnings"]].concat();
        cargo(&args)?;
    }
    // The scrape test must be parsed by promtool here, never skipped.
    std::env::set_var("APOLLO11_REQUIRE_PROMTOOL", "1");
    // The PostgreSQL tests fail, rather than skip, without a database to test against.
    std::env::set_var("APOLLO11_REQUIRE_PG", "1");
    cargo(&["test", "--workspace", "--locked"])?;
    // Broken intra-doc links and other rustdoc warnings fail, with every feature's items.
    std::env::set_var("RUSTDOCFLAGS", "-D warnings");
    cargo(&[
        "doc",
        "--workspace",
        "--no-deps",
        "--all-features",
        "--locked",
    ])?;
    std::env::remove_var("RUSTDOCFLAGS");
    let root = tidy::workspace_root()?;
    alerts::check(&root)?;
    ui::run(&root, &[])?;
    api_fuzz::run(&root, &[])?;
    package::check(&root)?;
    readme::check_first_command(&root)?;
    // Fewer kills than the test's default (200): CI's 30 minutes on two cores, where a kill
    // costs about 0.85 s on the file log and 1 s on PostgreSQL.
    let file = ["--kills", "150"].map(String::from);
    crash::run(&root, crash::Args::parse(&file)?)?;
    // The same on PostgreSQL under leases.
    let url = std::env::var("APOLLO11_TEST_PG_URL")
        .context("the crash test on PostgreSQL needs APOLLO11_TEST_PG_URL")?;
    let pg = ["--store", &url, "--kills", "70"].map(String::from);
    crash::run(&root, crash::Args::parse(&pg)?)?;
    for store in ["file", "memory"] {
        let args = ["--seeds", sim::CI_SEEDS, "--store", store].map(String::from);
        sim::run(&root, &args)?;
    }
    // The same harness on PostgreSQL under leases, on real time: about 40 s.
    let args = ["--seeds", sim::CI_PG_SEEDS, "--store", "postgres"].map(String::from);
    sim::run(&root, &args)?;
    // The soak is not here: 30 s of it cost about 50 s of CI's 30 minutes and are too short
    // for its flatness verdict; `cargo xtask soak --minutes N` is run on its own. The
    // workers' soak is, short (about 40 s): its checks hold at any length.
    soak_workers::run(&root, &["--faults", "10"].map(String::from))?;
    failover::run(&root, &[])
}

/// Builds the binaries xtask runs under load (the crash child, the simulator, the servers of
/// the browser, API, failover and soak tests) as `cargo test` builds them: the `test`
/// profile, our crates optimized a little (Cargo.toml), and the features the tests unify.
/// After the tests this builds nothing; a build of one package alone would resolve other
/// features (the test-only ones add items, never behavior) and build most of the workspace
/// again. The binaries land in `target/debug/`.
fn build_loaded(root: &std::path::Path) -> Result<()> {
    cargo_in(
        Some(root),
        &["test", "--workspace", "--locked", "--no-run", "--quiet"],
    )
}

fn cargo(args: &[&str]) -> Result<()> {
    cargo_in(None, args)
}

/// Cargo with `args`, in `dir` if given.
fn cargo_in(dir: Option<&std::path::Path>, args: &[&str]) -> Result<()> {
    eprintln!("$ cargo {}", args.join(" "));
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.args(args);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let status = command
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("cargo {} failed: {status}", args.join(" "));
    }
    Ok(())
}
