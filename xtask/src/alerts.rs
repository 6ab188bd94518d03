//! `cargo xtask alerts`: Prometheus's own checks of the alert rules: `promtool check rules`
//! (syntax, expressions) and `promtool test rules` (the unit tests of every rule).

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// Where the rules and their tests live, from the repository root.
const RULES_DIR: &str = "deploy/prometheus";

/// Runs both checks; fails naming the check that failed, or promtool missing.
pub fn check(root: &Path) -> Result<()> {
    let dir = root.join(RULES_DIR);
    promtool(&dir, &["check", "rules", "alerts.yml"])?;
    promtool(&dir, &["test", "rules", "alerts.test.yml"])
}

fn promtool(dir: &Path, args: &[&str]) -> Result<()> {
    eprintln!("$ (cd {RULES_DIR} && promtool {})", args.join(" "));
    let status = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .status()
        .context("running promtool (Debian's prometheus package has it; .ci/run installs it)")?;
    if !status.success() {
        bail!(
            "promtool {} failed in {RULES_DIR}: {status}",
            args.join(" ")
        );
    }
    Ok(())
}
