//! `cargo xtask bench [--quick] [SCENARIO...]`: builds the benchmark program in release mode
//! and runs it; figures land in `target/bench/<scenario>.json` and a markdown table.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args(["build", "--release", "--quiet", "-p", "apollo11-bench"])
        .current_dir(root)
        .status()?;
    if !status.success() {
        bail!("building apollo11-bench failed");
    }
    let revision = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root)
        .output()
        .ok();
    let revision = revision
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let out = root.join("target/bench");
    let status = Command::new(root.join("target/release/apollo11-bench"))
        .args(args)
        .arg("--out")
        .arg(&out)
        .env("APOLLO11_GIT_REV", revision)
        .current_dir(root)
        .status()
        .context("running apollo11-bench")?;
    if !status.success() {
        bail!("a benchmark failed");
    }
    println!("\nresults in {}", out.display());
    Ok(())
}
