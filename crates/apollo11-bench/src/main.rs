//! Benchmark scenarios. Every figure is measured next to a baseline in the same run and
//! reported as a ratio; each scenario prints a markdown table and writes
//! `<out>/<scenario>.json` with the host, the git revision and the figures.
//!
//! `apollo11-bench --help` lists the scenarios (`catalog.rs`, one table) and the flags. Run
//! through `cargo xtask bench`, which checks the figures against BENCHMARKS.md's goals with
//! `--check`. `--metrics` installs the Prometheus recorder first, as `apollo11 serve` does,
//! to measure what the instrumentation costs against a run without it.

mod append;
mod catalog;
mod cold;
mod for_each;
mod gc;
mod lifecycle;
mod limits;
mod noop_try;
mod open_loop;
mod pg_append;
mod pg_baselines;
mod pg_scheduler;
mod recovery;
mod replay;
mod report;
mod scheduler;
mod schedules;
mod server;
mod sqlite;
mod workers;

use anyhow::{bail, Result};
use catalog::Scenario;
use clap::{Parser, ValueEnum};
use std::path::PathBuf;

/// How a scenario is run.
pub struct Setup {
    /// A shorter pass (`--quick`).
    pub quick: bool,
    /// Where data files go (on the disk under test).
    pub dir: PathBuf,
}

/// The allocator of the `apollo11` binary (and its configuration, `.cargo/config.toml`).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The command line: the shared flags, and the probes the scenarios run in a child process.
#[derive(clap::Parser)]
#[command(
    name = "apollo11-bench",
    about = "Apollo-11 benchmark scenarios: each prints a markdown table and writes <out>/<scenario>.json",
    after_help = "Run through `cargo xtask bench` (release build); the pg_ scenarios need \
                  APOLLO11_BENCH_PG_URL or APOLLO11_TEST_PG_URL."
)]
struct Cli {
    #[command(flatten)]
    flags: catalog::Flags,
    /// Probe: time Engine::open of DIR in this process (the recovery scenario's child).
    #[arg(long, hide = true, value_name = "DIR")]
    probe_recovery: Option<PathBuf>,
    /// Probe: run one for_each shape (the for_each scenario's child).
    #[arg(long, hide = true, num_args = 3, value_names = ["SHAPE", "ITEMS", "DIR"])]
    probe_for_each: Option<Vec<String>>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    if let Some(dir) = &cli.probe_recovery {
        return recovery::probe(dir).await;
    }
    if let Some(probe) = &cli.probe_for_each {
        let [shape, items, dir] = &probe[..] else {
            bail!("--probe-for-each needs SHAPE ITEMS DIR");
        };
        return for_each::probe(shape, items.parse()?, &PathBuf::from(dir)).await;
    }
    let flags = cli.flags;
    if flags.metrics {
        apollo11_prometheus::install(&[
            apollo11_log::metrics::HISTOGRAM_BUCKETS,
            apollo11_runtime::metrics::HISTOGRAM_BUCKETS,
        ])?;
    }
    let out = flags.out.unwrap_or_else(|| PathBuf::from("target/bench"));
    let setup = Setup {
        quick: flags.quick,
        dir: flags.dir.unwrap_or_else(|| out.join("data")),
    };
    let chosen = if flags.scenarios.is_empty() {
        Scenario::value_variants().to_vec()
    } else {
        flags.scenarios
    };
    std::fs::create_dir_all(&out)?;
    for scenario in chosen {
        run(scenario, &setup).await?.save(&out, setup.quick)?;
    }
    let _ = std::fs::remove_dir_all(&setup.dir);
    Ok(())
}

/// Runs one scenario.
async fn run(scenario: Scenario, setup: &Setup) -> Result<report::Report> {
    match scenario {
        Scenario::Append => append::run(setup).await,
        Scenario::OpenLoop => open_loop::run(setup).await,
        Scenario::Replay => replay::run(setup).await,
        Scenario::Recovery => recovery::run(setup).await,
        Scenario::Scheduler => scheduler::run(setup).await,
        Scenario::PgAppend => pg_append::run(setup).await,
        Scenario::PgScheduler => pg_scheduler::run(setup).await,
        Scenario::Server => server::run(setup).await,
        Scenario::Cold => cold::run(setup).await,
        Scenario::Gc => gc::run(setup).await,
        Scenario::Lifecycle => lifecycle::run(setup).await,
        Scenario::ForEach => for_each::run(setup).await,
        Scenario::Workers => workers::run(setup).await,
        Scenario::Schedules => schedules::run(setup).await,
        Scenario::Limits => limits::run(setup).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn help_lists_every_scenario_and_flag_but_not_the_probes() {
        let help = Cli::command().render_long_help().to_string();
        for scenario in Scenario::value_variants() {
            assert!(help.contains(&format!("- {}:", scenario.name())), "{help}");
        }
        for flag in ["--quick", "--metrics", "--out", "--dir"] {
            assert!(help.contains(flag), "{flag}: {help}");
        }
        assert!(!help.contains("probe"), "{help}");
    }

    #[test]
    fn scenarios_and_probes_parse() {
        let cli = Cli::try_parse_from(["b", "--quick", "open_loop", "pg_append"]).expect("parsed");
        assert!(cli.flags.quick);
        assert_eq!(
            cli.flags.scenarios,
            [Scenario::OpenLoop, Scenario::PgAppend]
        );
        let cli =
            Cli::try_parse_from(["b", "--probe-for-each", "static", "10", "/d"]).expect("a probe");
        assert_eq!(
            cli.probe_for_each.as_deref(),
            Some(&["static".into(), "10".into(), "/d".into()][..])
        );
    }

    #[test]
    fn an_unknown_scenario_or_flag_is_a_usage_error() {
        let err = Cli::try_parse_from(["b", "nope"]).err().expect("refused");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("open_loop"), "{err}");
        let err = Cli::try_parse_from(["b", "--bogus"])
            .err()
            .expect("refused");
        assert_eq!(err.exit_code(), 2);
    }
}
