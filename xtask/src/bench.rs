//! `cargo xtask bench [--quick] [SCENARIO...]`: builds the benchmark program in release mode
//! and runs it; figures land in `target/bench/<scenario>.json` and a markdown table.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// The peer engine's program: its own workspace, so its dependencies stay out of ours.
const PEER: &str = "bench-peers/duroxide";

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    build(root, &["-p", "apollo11-bench", "-p", "apollo11-cli"])?;
    let manifest = root.join(PEER).join("Cargo.toml");
    let manifest = manifest.to_string_lossy();
    let target = crate::tidy::target_dir(root)?;
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
    let out = target.join("bench");
    let status = Command::new(target.join("release/apollo11-bench"))
        .args(args)
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
    println!("\nresults in {}", out.display());
    Ok(())
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
