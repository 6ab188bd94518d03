//! Benchmark scenarios. Every figure is measured next to a baseline in the same run and
//! reported as a ratio; each scenario prints a markdown table and writes
//! `<out>/<scenario>.json` with the host, the git revision and the figures.
//!
//! `apollo11-bench [--quick] [--metrics] [--out DIR] [--dir DIR] [SCENARIO...]`, scenarios:
//! append, open_loop, replay, recovery, scheduler, pg_append, pg_scheduler, server, cold, gc, lifecycle, for_each,
//! workers, schedules, limits (all by
//! default; the pg_ ones need a database, see `pg_append`). Run through `cargo xtask bench`. `--metrics` installs the
//! Prometheus recorder first, as `apollo11 serve` does, to measure what the instrumentation
//! costs against a run without it.

mod append;
mod cold;
mod for_each;
mod gc;
mod lifecycle;
mod limits;
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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut quick, mut out, mut dir, mut named) = (false, None, None, Vec::new());
    let mut metrics = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--metrics" => metrics = true,
            "--out" => out = rest.next().map(PathBuf::from),
            "--dir" => dir = rest.next().map(PathBuf::from),
            "--probe-recovery" => {
                let dir = rest.next().map(PathBuf::from);
                let dir = dir.ok_or_else(|| anyhow::anyhow!("--probe-recovery needs a DIR"))?;
                return recovery::probe(&dir).await;
            }
            "--probe-for-each" => {
                let probe: Vec<&String> = rest.by_ref().take(3).collect();
                let [shape, items, dir] = probe[..] else {
                    bail!("--probe-for-each needs SHAPE ITEMS DIR");
                };
                return for_each::probe(shape, items.parse()?, &PathBuf::from(dir)).await;
            }
            flag if flag.starts_with("--") => {
                bail!("unknown flag `{flag}`; flags: --quick, --metrics, --out DIR, --dir DIR")
            }
            scenario => named.push(scenario),
        }
    }
    if metrics {
        apollo11_prometheus::install(&[
            apollo11_log::metrics::HISTOGRAM_BUCKETS,
            apollo11_runtime::metrics::HISTOGRAM_BUCKETS,
        ])?;
    }
    let out = out.unwrap_or_else(|| PathBuf::from("target/bench"));
    let setup = Setup {
        quick,
        dir: dir.unwrap_or_else(|| out.join("data")),
    };
    let all = [
        "append",
        "open_loop",
        "replay",
        "recovery",
        "scheduler",
        "pg_append",
        "pg_scheduler",
        "server",
        "cold",
        "gc",
        "lifecycle",
        "for_each",
        "workers",
        "schedules",
        "limits",
    ];
    let chosen: Vec<&str> = if named.is_empty() {
        all.to_vec()
    } else {
        named
    };
    std::fs::create_dir_all(&out)?;
    for scenario in chosen {
        let report = match scenario {
            "append" => append::run(&setup).await?,
            "open_loop" => open_loop::run(&setup).await?,
            "replay" => replay::run(&setup).await?,
            "recovery" => recovery::run(&setup).await?,
            "scheduler" => scheduler::run(&setup).await?,
            "pg_append" => pg_append::run(&setup).await?,
            "pg_scheduler" => pg_scheduler::run(&setup).await?,
            "server" => server::run(&setup).await?,
            "cold" => cold::run(&setup).await?,
            "gc" => gc::run(&setup).await?,
            "lifecycle" => lifecycle::run(&setup).await?,
            "for_each" => for_each::run(&setup).await?,
            "workers" => workers::run(&setup).await?,
            "schedules" => schedules::run(&setup).await?,
            "limits" => limits::run(&setup).await?,
            other => bail!("unknown scenario `{other}`; known: {}", all.join(", ")),
        };
        report.save(&out, setup.quick)?;
    }
    let _ = std::fs::remove_dir_all(&setup.dir);
    Ok(())
}
