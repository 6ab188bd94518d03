//! The README's first command, run by CI exactly as a newcomer runs it: from the repository
//! root, with the default data dir, read from the README itself so the two cannot differ.
//! It must exit 0 and leave one new run that `status --json` calls succeeded.

use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

pub fn check_first_command(root: &Path) -> Result<()> {
    let readme = std::fs::read_to_string(root.join("README.md")).context("reading README.md")?;
    let command = first_sh_command(&readme).context("README.md has no ```sh block")?;
    let before = run_ids(root)?;
    eprintln!("$ {command}");
    let status = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(root)
        .env_remove("APOLLO11_DATA_DIR")
        .env_remove("APOLLO11_SEGMENT_BYTES")
        .status()
        .context("running the README's first command")?;
    ensure!(
        status.success(),
        "the README's first command failed: {status}"
    );
    let new: Vec<String> = run_ids(root)?.difference(&before).cloned().collect();
    let [run] = new.as_slice() else {
        bail!("the README's first command should have made one new run, found {new:?}");
    };
    let status = apollo11(root, &["status", run, "--json"])?;
    let status: serde_json::Value = serde_json::from_str(&status)
        .with_context(|| format!("`status {run} --json` printed {status}"))?;
    ensure!(
        status["state"] == "succeeded",
        "run {run} of the README's first command is {}",
        status["state"]
    );
    eprintln!("README's first command: run {run} succeeded");
    Ok(())
}

/// The first line of the first ```sh block.
fn first_sh_command(readme: &str) -> Option<&str> {
    let mut lines = readme.lines();
    lines.find(|l| l.trim_end() == "```sh")?;
    lines
        .next()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "```")
}

/// The runs in the default data dir (none when it does not exist yet).
fn run_ids(root: &Path) -> Result<BTreeSet<String>> {
    if !root.join(".apollo11").exists() {
        return Ok(BTreeSet::new());
    }
    apollo11(root, &["runs", "--json"])?
        .lines()
        .map(|line| {
            let run: serde_json::Value = serde_json::from_str(line)?;
            let id = run["run_id"].as_str().context("a run without run_id")?;
            Ok(id.to_owned())
        })
        .collect()
}

/// `apollo11 ARGS` from the repository root, as the README's later commands run it.
fn apollo11(root: &Path, args: &[&str]) -> Result<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["run", "--quiet", "-p", "apollo11-cli", "--"])
        .args(args)
        .current_dir(root)
        .env_remove("APOLLO11_DATA_DIR")
        .output()
        .with_context(|| format!("running apollo11 {}", args.join(" ")))?;
    ensure!(
        out.status.success(),
        "apollo11 {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_of_the_first_sh_block_is_the_command() {
        let readme =
            "# T\n\n```toml\nx\n```\n```sh\ncargo run -- a   # why\ncargo b\n```\n```sh\nc\n```\n";
        assert_eq!(first_sh_command(readme), Some("cargo run -- a   # why"));
        assert_eq!(first_sh_command("```sh\n```\n"), None);
        assert_eq!(first_sh_command("no block"), None);
    }

    #[test]
    fn the_readme_has_a_first_command_to_run() {
        let root = crate::tidy::workspace_root().unwrap();
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let command = first_sh_command(&readme).unwrap();
        assert!(command.starts_with("cargo run"), "{command}");
    }
}
