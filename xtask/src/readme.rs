//! The README's first command, run by CI exactly as a newcomer runs it: from the repository
//! root, with the default data dir, read from the README itself so the two cannot differ.
//! It must exit 0 and leave one new run that `status --json` calls succeeded. When it builds
//! `apollo11` without the default features, that build must refuse `--store` naming the
//! missing feature, not run on the data dir's log instead.

use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

pub fn check_first_command(root: &Path) -> Result<()> {
    let readme = std::fs::read_to_string(root.join("README.md")).context("reading README.md")?;
    let command = first_sh_command(&readme).context("README.md has no ```sh block")?;
    let cargo_args =
        cargo_args(command).context("the README's first command is not `cargo run ... -- ...`")?;
    let before = run_ids(root, &cargo_args)?;
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
    let new: Vec<String> = run_ids(root, &cargo_args)?
        .difference(&before)
        .cloned()
        .collect();
    let [run] = new.as_slice() else {
        bail!("the README's first command should have made one new run, found {new:?}");
    };
    let status = apollo11(root, &cargo_args, &["status", run, "--json"])?;
    let status: serde_json::Value = serde_json::from_str(&status)
        .with_context(|| format!("`status {run} --json` printed {status}"))?;
    ensure!(
        status["state"] == "succeeded",
        "run {run} of the README's first command is {}",
        status["state"]
    );
    eprintln!("README's first command: run {run} succeeded");
    if cargo_args.contains(&"--no-default-features") {
        refuses_store(root, &cargo_args)?;
    }
    Ok(())
}

/// A build without `postgres` given `--store`: exit 2, naming the feature.
fn refuses_store(root: &Path, cargo_args: &[&str]) -> Result<()> {
    let args = ["--store", "postgres://127.0.0.1:1/none", "runs"];
    let out = output(root, cargo_args, &args)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(2) && stderr.contains("feature `postgres`"),
        "apollo11 {} without the postgres feature: {}, {stderr}",
        args.join(" "),
        out.status
    );
    eprintln!("README's build refuses --store: {}", stderr.trim());
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

/// What the command gives cargo, before the `--` that starts `apollo11`'s own arguments:
/// the later commands are built the same way, so they build nothing more.
fn cargo_args(command: &str) -> Option<Vec<&str>> {
    let mut words = command.split_whitespace();
    if words.next() != Some("cargo") {
        return None;
    }
    let args: Vec<&str> = words.take_while(|w| *w != "--").collect();
    (args.first() == Some(&"run")).then_some(args)
}

/// The runs in the default data dir (none when it does not exist yet).
fn run_ids(root: &Path, cargo_args: &[&str]) -> Result<BTreeSet<String>> {
    if !root.join(".apollo11").exists() {
        return Ok(BTreeSet::new());
    }
    apollo11(root, cargo_args, &["runs", "--json"])?
        .lines()
        .map(|line| {
            let run: serde_json::Value = serde_json::from_str(line)?;
            let id = run["run_id"].as_str().context("a run without run_id")?;
            Ok(id.to_owned())
        })
        .collect()
}

/// `apollo11 ARGS` from the repository root, built as the README's first command builds it.
fn output(root: &Path, cargo_args: &[&str], args: &[&str]) -> Result<std::process::Output> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    Command::new(cargo)
        .args(cargo_args)
        .args(["--quiet", "--"])
        .args(args)
        .current_dir(root)
        .env_remove("APOLLO11_DATA_DIR")
        .env_remove("APOLLO11_STORE")
        .output()
        .with_context(|| format!("running apollo11 {}", args.join(" ")))
}

/// [`output`] of a command that must succeed: its stdout.
fn apollo11(root: &Path, cargo_args: &[&str], args: &[&str]) -> Result<String> {
    let out = output(root, cargo_args, args)?;
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
        assert!(cargo_args(command).is_some(), "{command}");
    }

    #[test]
    fn the_cargo_arguments_end_at_the_double_dash() {
        assert_eq!(
            cargo_args("cargo run -p x --no-default-features -- run a.toml  # why"),
            Some(vec!["run", "-p", "x", "--no-default-features"])
        );
        assert_eq!(cargo_args("cargo build -p x"), None);
        assert_eq!(cargo_args("make run"), None);
    }
}
