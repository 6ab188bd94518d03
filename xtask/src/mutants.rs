//! `cargo xtask mutants [TARGET]...`: mutation testing with cargo-mutants, to find tests that
//! let mistakes through. Each target is a crate (or part of one) mutated and tested with the
//! crate's own tests; the score of a target is caught / (caught + missed), with timeouts and
//! unviable mutants (ones that do not build) counted apart. Not run by CI: a run takes about
//! a minute per mutant on two cores.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What each target mutates: a package, and (for the log) only its recovery files.
const TARGETS: &[(&str, &str, &[&str])] = &[
    ("core", "apollo11-core", &[]),
    ("dag", "apollo11-dag", &[]),
    ("machine", "apollo11-machine", &[]),
    (
        "log",
        "apollo11-log",
        &[
            "crates/apollo11-log/src/format/record.rs",
            "crates/apollo11-log/src/format/codec.rs",
            "crates/apollo11-log/src/format/segment.rs",
            "crates/apollo11-log/src/load.rs",
        ],
    ),
];

/// Mutants by outcome, as cargo-mutants lists them in `mutants.out/`.
struct Outcomes {
    caught: Vec<String>,
    missed: Vec<String>,
    timeout: Vec<String>,
    unviable: Vec<String>,
}

impl Outcomes {
    fn read(out: &Path) -> Result<Outcomes> {
        let list = |name: &str| -> Result<Vec<String>> {
            let path = out.join(name);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            Ok(text.lines().map(str::to_owned).collect())
        };
        Ok(Outcomes {
            caught: list("caught.txt")?,
            missed: list("missed.txt")?,
            timeout: list("timeout.txt")?,
            unviable: list("unviable.txt")?,
        })
    }

    /// caught / (caught + missed), in percent.
    fn score(&self) -> f64 {
        let tested = self.caught.len() + self.missed.len();
        if tested == 0 {
            return 100.0;
        }
        100.0 * self.caught.len() as f64 / tested as f64
    }
}

/// Runs the named targets (every target when none is named) and prints their scores.
pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let mut chosen = Vec::new();
    for arg in args {
        let name = arg.trim_start_matches("apollo11-");
        match TARGETS.iter().find(|(n, _, _)| *n == name) {
            Some(target) => chosen.push(*target),
            None => bail!(
                "unknown mutants target `{arg}`; targets: {}",
                TARGETS.iter().map(|t| t.0).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    if chosen.is_empty() {
        chosen = TARGETS.to_vec();
    }
    ensure_installed()?;
    let mut summary = Vec::new();
    for (name, package, files) in chosen {
        let out = root.join("target/mutants").join(name);
        mutate(root, package, files, &out)?;
        let outcomes = Outcomes::read(&out.join("mutants.out"))?;
        print_target(name, &outcomes);
        summary.push(format!("{name}: {:.1}%", outcomes.score()));
    }
    println!("\nscores: {}", summary.join(", "));
    Ok(())
}

/// Installs cargo-mutants into the user's cargo bin if `cargo mutants` is not there.
fn ensure_installed() -> Result<()> {
    let cargo = cargo();
    let present = Command::new(&cargo)
        .args(["mutants", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if present {
        return Ok(());
    }
    eprintln!("$ cargo install cargo-mutants --locked");
    let status = Command::new(&cargo)
        .args(["install", "cargo-mutants", "--locked"])
        .status()
        .context("running cargo install cargo-mutants")?;
    if !status.success() {
        bail!(
            "cargo-mutants is not installed and `cargo install cargo-mutants --locked` failed \
             ({status}); install it by hand and run this again"
        );
    }
    Ok(())
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Runs cargo-mutants on `package` (only `files` of it, if any), testing with the package's
/// own tests, into `out`.
fn mutate(root: &Path, package: &str, files: &[&str], out: &PathBuf) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut command = Command::new(cargo());
    command
        .current_dir(root)
        .args(["mutants", "--package", package, "--test-package", package])
        .args(["--copy-target", "true", "--output"])
        .arg(out);
    for file in files {
        command.args(["--file", file]);
    }
    eprintln!("$ {command:?}");
    let status = command.status().context("running cargo mutants")?;
    // cargo-mutants exits 2 when mutants were missed and 3 on timeouts: results, not failures.
    match status.code() {
        Some(0 | 2 | 3) => Ok(()),
        _ => bail!("cargo mutants on {package} failed: {status}"),
    }
}

fn print_target(name: &str, o: &Outcomes) {
    println!(
        "\n{name}: score {:.1}% (caught {}, missed {}); timeouts {}, unviable {}",
        o.score(),
        o.caught.len(),
        o.missed.len(),
        o.timeout.len(),
        o.unviable.len()
    );
    let lists = [
        ("survived", &o.missed),
        ("timed out", &o.timeout),
        ("unviable", &o.unviable),
    ];
    for (title, list) in lists {
        for mutant in list {
            println!("  {title}: {mutant}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_score_counts_caught_against_missed_only() {
        let o = Outcomes {
            caught: vec!["a".into(); 19],
            missed: vec!["b".into()],
            timeout: vec!["c".into(); 5],
            unviable: vec!["d".into(); 7],
        };
        assert_eq!(o.score(), 95.0);
    }
}
