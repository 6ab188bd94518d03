//! `cargo xtask sim [--release] [--seeds N] [--seed S] [--store file|memory|postgres]`: the
//! deterministic simulation (`crates/apollo11-sim`) over seeds S..S+N (on PostgreSQL, that of
//! `APOLLO11_TEST_PG_URL`, on real time); a failing seed is printed with the shortest
//! history found and how to replay it, and fails the command.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// Seeds of the file log and of the memory store `cargo xtask ci` plays.
pub const CI_SEEDS: &str = "500";

/// Seeds `cargo xtask ci` plays on PostgreSQL: on real time, about 0.9 s each on the
/// shared machine (docs/testing.md), so about 40 s.
pub const CI_PG_SEEDS: &str = "40";

/// Builds the simulator (release with `--release`, else as the tests build it: see
/// [`crate::build_loaded`]) and runs it with the other arguments.
pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let release = args.iter().any(|a| a == "--release");
    let passed = args.iter().filter(|a| *a != "--release");
    let target = crate::tidy::target_dir(root)?;
    let program = if release {
        let build = [
            "build",
            "--quiet",
            "--locked",
            "--release",
            "-p",
            "apollo11-sim",
        ];
        crate::cargo_in(Some(root), &build)?;
        target.join("release/apollo11-sim")
    } else {
        crate::build_loaded(root)?;
        target.join("debug/apollo11-sim")
    };
    let status = Command::new(&program)
        .current_dir(root)
        .args(passed)
        .status()
        .with_context(|| format!("running {}", program.display()))?;
    if !status.success() {
        bail!("the simulation failed ({status}): the seed, its shortest history and how to replay it are above");
    }
    Ok(())
}
