//! `cargo xtask package`: the library crates as they would be published. `cargo package`
//! packs them together (`--no-verify`: cargo's own verification would build each package
//! once more, minutes on CI's two cores, for what the next step proves anyway); then the
//! packed crates are unpacked into a workspace of their own (`target/packaged/`), their
//! dependencies on each other patched to the packed copies, and built and tested there with
//! every feature: no file outside the packages, no unpublished crate, no path
//! dev-dependency (cargo drops those) can make them pass.
//! Also builds and runs the crates of `tests/external/`, each using one library crate alone.

use crate::tidy::target_dir;
use anyhow::{bail, ensure, Context, Result};
use std::path::Path;
use std::process::Command;

/// The crates published for use alone, in the order they depend on each other.
const LIBRARIES: &[&str] = &[
    "apollo11-core",
    "apollo11-dag",
    "apollo11-author",
    "apollo11-machine",
    "apollo11-store",
    "apollo11-log",
    "apollo11-postgres",
    "apollo11-runtime",
    "apollo11-dispatch",
    "apollo11-client",
    "apollo11-schedule",
    "apollo11-shell",
    "apollo11-prometheus",
];

/// The crates of `tests/external/` and the one dependency each may name.
const EXTERNAL: &[(&str, &str)] = &[
    ("log-user", "apollo11-log"),
    ("machine-user", "apollo11-machine"),
];

/// Fewer seeds and cases than the workspace's own run: the packaged tests prove the
/// packages complete; the workspace's tests run the full counts.
const LIGHT: &[(&str, &str)] = &[("APOLLO11_SEEDS", "50"), ("APOLLO11_MODEL_CASES", "32")];

/// Packs, builds and tests the library crates, then the external users.
pub fn check(root: &Path) -> Result<()> {
    let version = workspace_version(root)?;
    let mut pack = vec!["package", "--allow-dirty", "--no-verify"];
    for library in LIBRARIES {
        pack.extend(["-p", library]);
    }
    run(root, cargo().args(&pack))?;
    let target = target_dir(root)?;
    let packaged = target.join("packaged");
    if packaged.exists() {
        std::fs::remove_dir_all(&packaged)
            .with_context(|| format!("removing {}", packaged.display()))?;
    }
    std::fs::create_dir_all(&packaged)?;
    for library in LIBRARIES {
        let file = target
            .join("package")
            .join(format!("{library}-{version}.crate"));
        run(
            root,
            Command::new("tar")
                .arg("xzf")
                .arg(&file)
                .arg("-C")
                .arg(&packaged),
        )?;
    }
    let members: Vec<String> = LIBRARIES.iter().map(|l| format!("{l}-{version}")).collect();
    write_workspace(root, &packaged, &members)?;
    let tests = ["test", "--workspace", "--all-features"];
    run(
        root,
        outside(&packaged, &target)
            .args(tests)
            .envs(LIGHT.iter().copied()),
    )?;
    for (name, dependency) in EXTERNAL {
        external(root, &target, name, dependency)?;
    }
    Ok(())
}

/// Builds and runs `tests/external/NAME` after checking that it names `dependency` alone.
fn external(root: &Path, target: &Path, name: &str, dependency: &str) -> Result<()> {
    let dir = root.join("tests/external").join(name);
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock"))
        .with_context(|| format!("copying Cargo.lock into {}", dir.display()))?;
    let output = outside(&dir, target)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("running cargo metadata")?;
    ensure!(
        output.status.success(),
        "cargo metadata failed in {}",
        dir.display()
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let names: Vec<&str> = metadata["packages"][0]["dependencies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["name"].as_str())
        .collect();
    ensure!(
        names == [dependency],
        "{} must depend on {dependency} alone, not on {names:?}",
        dir.display()
    );
    run(root, outside(&dir, target).arg("run"))
}

/// The workspace of the unpacked crates, each one's dependencies on the others patched to
/// the unpacked copies, with the repository's lock file so that nothing else changes.
fn write_workspace(root: &Path, dir: &Path, members: &[String]) -> Result<()> {
    let mut manifest = String::from("[workspace]\nresolver = \"2\"\nmembers = [\n");
    for member in members {
        manifest.push_str(&format!("    \"{member}\",\n"));
    }
    manifest.push_str("]\n\n[patch.crates-io]\n");
    for (library, member) in LIBRARIES.iter().zip(members) {
        manifest.push_str(&format!("{library} = {{ path = \"{member}\" }}\n"));
    }
    manifest.push('\n');
    manifest.push_str(&profiles(root)?);
    std::fs::write(dir.join("Cargo.toml"), manifest)?;
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock"))?;
    Ok(())
}

/// The workspace's `[profile.*]` tables (the end of its Cargo.toml), so that the packed
/// crates' dependencies are built as the workspace's tests built them, and reused: with
/// cargo's default profile every dependency was built again, about six of CI's minutes.
fn profiles(root: &Path) -> Result<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml"))?;
    let start = manifest
        .find("\n[profile.")
        .context("the workspace's Cargo.toml has no [profile.*] table")?;
    let tables = &manifest[start + 1..];
    ensure!(
        tables
            .lines()
            .filter(|l| l.starts_with('['))
            .all(|l| l.starts_with("[profile.")),
        "the workspace's Cargo.toml must end with its [profile.*] tables"
    );
    Ok(tables.to_owned())
}

/// Cargo in `dir`, a workspace of its own, building into the repository's target dir with
/// the workspace's profiles (see [`profiles`]), but our crates unoptimized in `test` too:
/// these builds are made once and their tests run light ([`LIGHT`]), so compiling is most
/// of their time (2 min 57 s against 3 min 23 s at opt-level 1, on 2 idle cores). Not
/// incremental: their incremental caches would only fill the disk.
fn outside(dir: &Path, target: &Path) -> Command {
    let mut command = cargo();
    command
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env("CARGO_INCREMENTAL", "0")
        .env("CARGO_PROFILE_TEST_OPT_LEVEL", "0");
    command
}

/// The version every crate of the workspace has.
fn workspace_version(root: &Path) -> Result<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml"))?;
    let line = manifest
        .lines()
        .find(|l| l.starts_with("version = "))
        .context("the workspace's Cargo.toml has no `version = ` line")?;
    Ok(line
        .trim_start_matches("version = ")
        .trim_matches('"')
        .to_owned())
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn run(root: &Path, command: &mut Command) -> Result<()> {
    if command.get_current_dir().is_none() {
        command.current_dir(root);
    }
    eprintln!("$ {command:?}");
    let status = command
        .status()
        .with_context(|| format!("running {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed: {status}");
    }
    Ok(())
}
