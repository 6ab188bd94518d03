//! Architecture checks that a reviewer would otherwise have to remember: dependencies point
//! down the layers of the code map in docs/ARCHITECTURE.md, the pure crates stay pure, the
//! docs stand alone (`docs.rs`), and no doc or source names the work's sessions or issues by
//! number (history is `git log`). Runs as `cargo xtask tidy` and as a test under
//! `cargo test`.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// For each workspace crate, the workspace crates its normal dependencies may name.
/// A crate not listed here is an error: adding a crate means placing it in the layers.
const LAYERS: &[(&str, &[&str])] = &[
    ("apollo11-core", &[]),
    ("apollo11-dag", &[]),
    ("apollo11-machine", &["apollo11-core", "apollo11-dag"]),
    ("apollo11-author", &["apollo11-core", "apollo11-dag"]),
    ("apollo11-store", &["apollo11-core"]),
    ("apollo11-log", &["apollo11-core", "apollo11-store"]),
    ("apollo11-postgres", &["apollo11-core", "apollo11-store"]),
    // Run bundles: any store of the store traits in, a file out, and back.
    ("apollo11-bundle", &["apollo11-core", "apollo11-store"]),
    // Installs the Prometheus recorder: a leaf that names no engine crate, so any binary or
    // server can use it without pulling a layer in.
    ("apollo11-prometheus", &[]),
    // The queue between an engine and its workers: names no engine crate.
    ("apollo11-dispatch", &[]),
    // The HTTP client of a server's API: names no engine crate.
    ("apollo11-client", &[]),
    // Schedules: cron in a time zone, fire times, catch-up. Pure; names no engine crate.
    ("apollo11-schedule", &[]),
    (
        "apollo11-runtime",
        &[
            "apollo11-author",
            "apollo11-core",
            "apollo11-dag",
            "apollo11-machine",
            "apollo11-store",
        ],
    ),
    (
        "apollo11-shell",
        &[
            "apollo11-dispatch",
            "apollo11-schedule",
            "apollo11-author",
            "apollo11-core",
            "apollo11-dag",
            "apollo11-machine",
            "apollo11-runtime",
        ],
    ),
    (
        "apollo11-server",
        &[
            "apollo11-dispatch",
            "apollo11-schedule",
            "apollo11-author",
            "apollo11-core",
            "apollo11-dag",
            "apollo11-machine",
            "apollo11-store",
            "apollo11-log",
            "apollo11-postgres",
            "apollo11-runtime",
            "apollo11-shell",
            "apollo11-prometheus",
            "apollo11-client",
        ],
    ),
    (
        "apollo11-cli",
        &[
            "apollo11-dispatch",
            "apollo11-schedule",
            "apollo11-author",
            "apollo11-core",
            "apollo11-dag",
            "apollo11-machine",
            "apollo11-store",
            "apollo11-bundle",
            "apollo11-log",
            "apollo11-postgres",
            "apollo11-runtime",
            "apollo11-server",
            "apollo11-shell",
            "apollo11-prometheus",
            "apollo11-client",
        ],
    ),
    ("apollo11-bench", &["*"]),
    (
        "apollo11-sim",
        &[
            "apollo11-core",
            "apollo11-dispatch",
            "apollo11-machine",
            "apollo11-store",
            "apollo11-log",
            "apollo11-postgres",
            "apollo11-runtime",
        ],
    ),
    ("xtask", &[]),
];

/// The pure crates and the only external crates they may depend on (normal dependencies).
/// `proptest` is optional in each, behind the `proptest` feature that publishes the
/// strategies property tests use (generators of values: no IO, no clock of their own).
const PURE: &[(&str, &[&str])] = &[
    ("apollo11-core", &["serde", "serde_json", "proptest"]),
    ("apollo11-dag", &["proptest"]),
    ("apollo11-machine", &["serde", "proptest"]),
    ("apollo11-author", &["serde_json", "evalexpr"]),
    // chrono without its `clock` feature: no way to read the time.
    ("apollo11-schedule", &["chrono", "chrono-tz", "croner"]),
];

/// Source text a pure crate must not contain: clocks, IO, threads, processes, randomness.
const IMPURE_TOKENS: &[&str] = &[
    "SystemTime",
    "Instant",
    "std::fs",
    "std::net",
    "std::process",
    "std::thread",
    "std::env",
    "tokio",
    "rand::",
];

/// The checkout `cargo xtask` was run in. `cargo run` names it at run time; the path compiled
/// in is only a fallback, as two checkouts sharing a target dir share this binary.
pub fn workspace_root() -> Result<PathBuf> {
    let here = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    Ok(here
        .parent()
        .context("xtask lives in the workspace root")?
        .to_path_buf())
}

/// Where cargo puts what it builds: `target/` unless `CARGO_TARGET_DIR` or a config says
/// otherwise, so binaries built by `cargo build` are looked for where they are.
pub fn target_dir(root: &Path) -> Result<PathBuf> {
    let metadata = cargo_metadata(root)?;
    let dir = metadata["target_directory"]
        .as_str()
        .context("cargo metadata names no target_directory")?;
    Ok(PathBuf::from(dir))
}

pub fn check(root: &Path) -> Result<()> {
    let metadata = cargo_metadata(root)?;
    let mut problems = layering_problems(&metadata);
    problems.extend(purity_problems(root, &metadata)?);
    problems.extend(crate::docs::problems(root)?);
    problems.extend(diary_problems(root)?);
    if !problems.is_empty() {
        bail!(
            "tidy found {} problem(s):\n  {}",
            problems.len(),
            problems.join("\n  ")
        );
    }
    Ok(())
}

fn cargo_metadata(root: &Path) -> Result<Value> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// `(package name, dependency name, kind)` for every dependency of every workspace package;
/// kind is "normal", "dev" or "build".
fn dependencies(metadata: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let kind = dep["kind"].as_str().unwrap_or("normal");
            let dep_name = dep["name"].as_str().unwrap_or_default();
            out.push((name.to_owned(), dep_name.to_owned(), kind.to_owned()));
        }
    }
    out
}

fn layering_problems(metadata: &Value) -> Vec<String> {
    let layers: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let mut problems = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        if !layers.contains_key(name) {
            problems.push(format!(
                "crate `{name}` has no place in the layers of tidy.rs"
            ));
        }
    }
    for (package, dep, kind) in dependencies(metadata) {
        let Some(allowed) = layers.get(package.as_str()) else {
            continue;
        };
        let internal = layers.contains_key(dep.as_str());
        // A crate may dev-depend on itself to turn on its own `testing` feature.
        let ok = !internal
            || dep == package
            || allowed.contains(&"*")
            || allowed.contains(&dep.as_str())
            || (kind == "dev" && dev_dependency_allowed(&layers, &package, &dep));
        if !ok {
            problems.push(format!("`{package}` must not depend on `{dep}` ({kind})"));
        }
    }
    problems
}

/// Test and example dependencies beyond the normal layering: the runtime never names a
/// backend in its library, but its examples and crash harness run on the file log (and the
/// crash harness on PostgreSQL too); the
/// Prometheus crate's test scrapes a real run of the runtime on the file log.
const DEV_EXTRA: &[(&str, &str)] = &[
    ("apollo11-runtime", "apollo11-log"),
    ("apollo11-runtime", "apollo11-postgres"),
    ("apollo11-prometheus", "apollo11-log"),
    ("apollo11-prometheus", "apollo11-runtime"),
    ("apollo11-shell", "apollo11-log"),
];

/// What any crate's tests may use: the vocabulary and its strategies, the pure machine and
/// its history builder, the store with its conformance suite.
const TEST_SUPPORT: &[&str] = &[
    "apollo11-core",
    "apollo11-dag",
    "apollo11-machine",
    "apollo11-store",
];

/// Tests may use the test support crates, but never a crate above.
fn dev_dependency_allowed(layers: &BTreeMap<&str, &[&str]>, package: &str, dep: &str) -> bool {
    TEST_SUPPORT.contains(&dep)
        || layers[package].contains(&dep)
        || DEV_EXTRA.contains(&(package, dep))
}

fn purity_problems(root: &Path, metadata: &Value) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for (package, dep, kind) in dependencies(metadata) {
        let Some((_, allowed)) = PURE.iter().find(|(p, _)| *p == package) else {
            continue;
        };
        let internal = LAYERS.iter().any(|(l, _)| *l == dep);
        if kind == "normal" && !internal && !allowed.contains(&dep.as_str()) {
            problems.push(format!("pure crate `{package}` must not depend on `{dep}`"));
        }
    }
    for (package, _) in PURE {
        let src = root.join("crates").join(package).join("src");
        for file in rust_files(&src)? {
            let text = std::fs::read_to_string(&file)?;
            for (line_no, line) in text.lines().enumerate() {
                for token in IMPURE_TOKENS.iter().filter(|t| line.contains(**t)) {
                    problems.push(format!(
                        "{}:{}: pure crate `{package}` uses `{token}`",
                        file.display(),
                        line_no + 1
                    ));
                }
            }
        }
    }
    Ok(problems)
}

pub fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() {
            out.extend(rust_files(&path)?);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Where the diary check looks: tracked Markdown anywhere, and Rust sources under these
/// folders (comments and test names included).
const DIARY_RUST_DIRS: &[&str] = &["crates/", "xtask/", "tests/", "bench-peers/", "fuzz/"];

/// Folders of data, not prose: fuzz inputs, installed packages, build output.
const DIARY_SKIPPED_DIRS: &[&str] = &["corpus", "seeds", "regressions", "node_modules", "target"];

/// Phrases that date a text by the work that made it. Built from parts so that this file
/// does not contain them itself.
fn diary_phrases() -> [String; 4] {
    let session = "session";
    [
        ["this ", session].concat(),
        ["last ", session].concat(),
        ["earlier ", session].concat(),
        ["changed in ", session].concat(),
    ]
}

/// Tracked files that speak of the work's history instead of the product: a session or an
/// issue by number, or one of [`diary_phrases`]. History is `git log`.
fn diary_problems(root: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for (file, text) in tracked_texts(root)? {
        if diary_checked(&file) {
            problems.extend(diary_mentions(&file, &text));
        }
    }
    Ok(problems)
}

/// Every file git tracks under `root` that reads as text, with its text (binary files, and
/// files deleted in the worktree, left out).
pub fn tracked_texts(root: &Path) -> Result<Vec<(String, String)>> {
    let listed = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .context("running git ls-files")?;
    Ok(listed
        .stdout
        .split(|b| *b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .filter_map(|file| {
            let text = std::fs::read_to_string(root.join(&file)).ok()?;
            Some((file, text))
        })
        .collect())
}

/// Whether the diary check reads a tracked file: `*.md` anywhere, `*.rs` under
/// [`DIARY_RUST_DIRS`], neither inside one of [`DIARY_SKIPPED_DIRS`].
fn diary_checked(file: &str) -> bool {
    let mut folders = file.split('/').rev().skip(1);
    if folders.any(|f| DIARY_SKIPPED_DIRS.contains(&f)) {
        return false;
    }
    file.ends_with(".md")
        || (file.ends_with(".rs") && DIARY_RUST_DIRS.iter().any(|d| file.starts_with(d)))
}

/// Each line of `text` that names a session or an issue by number (`\b(session|issue)s?
/// #?[0-9]+`, any case) or holds one of [`diary_phrases`].
fn diary_mentions(file: &str, text: &str) -> Vec<String> {
    let phrases = diary_phrases();
    let mut problems = Vec::new();
    for (line_no, line) in text.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        let found = numbered_mention(&lower)
            .or_else(|| phrases.iter().find(|p| lower.contains(p.as_str())).cloned());
        if let Some(found) = found {
            problems.push(format!(
                "{file}:{}: mentions `{found}`: say what the product does, not when it changed (history is git log)",
                line_no + 1
            ));
        }
    }
    problems
}

/// The first `session N`, `sessions N`, `issue N`, `issue #N` (`issues` too) of a
/// lowercased line, not preceded by a letter, digit or `_`.
fn numbered_mention(lower: &str) -> Option<String> {
    let bytes = lower.as_bytes();
    for word in ["session", "issue"] {
        for (start, _) in lower.match_indices(word) {
            let word_char = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
            if start > 0 && word_char(bytes[start - 1]) {
                continue;
            }
            let mut at = start + word.len();
            if bytes.get(at) == Some(&b's') {
                at += 1;
            }
            if bytes.get(at) != Some(&b' ') {
                continue;
            }
            at += 1;
            if bytes.get(at) == Some(&b'#') {
                at += 1;
            }
            let digits = bytes[at.min(bytes.len())..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            if digits > 0 {
                return Some(lower[start..at + digits].to_owned());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_is_tidy() {
        check(&workspace_root().unwrap()).unwrap();
    }

    #[test]
    fn a_session_or_issue_by_number_is_reported_with_its_line() {
        let (session, issue) = ("Sess".to_owned() + "ion", "iss".to_owned() + "ue");
        let text = format!(
            "The writer overlaps the sync.\nMeasured in {session} 24.\nSee ({issue} #16).\n\
             Two {issue}s 3 and 4.\nThe {}{session}'s run.\n",
            "last "
        );
        let found = diary_mentions("a.md", &text);
        let session = session.to_lowercase();
        let expected = [
            (2, format!("{session} 24")),
            (3, format!("{issue} #16")),
            (4, format!("{issue}s 3")),
            (5, format!("last {session}")),
        ];
        assert_eq!(found.len(), expected.len(), "{found:?}");
        for (problem, (line, mention)) in found.iter().zip(expected) {
            let start = format!("a.md:{line}: mentions `{mention}`");
            assert!(problem.starts_with(&start), "{found:?}");
        }
    }

    #[test]
    fn text_without_a_numbered_session_or_issue_passes() {
        let (session, issue) = ("session".to_owned(), "issue".to_owned());
        let text = format!(
            "A {session} cookie.\nThe {session}_1 table, re{issue} 5 times.\n\
             An {issue} with no number; {issue}s: 3.\nThe database {session} ends.\n"
        );
        assert_eq!(diary_mentions("a.md", &text), Vec::<String>::new());
    }

    #[test]
    fn the_diary_check_reads_prose_and_sources_but_not_data() {
        assert!(diary_checked("BENCHMARKS.md"));
        assert!(diary_checked("docs/testing.md"));
        assert!(diary_checked("crates/apollo11-log/src/file_log.rs"));
        assert!(diary_checked("xtask/src/tidy.rs"));
        assert!(!diary_checked("examples/five-stage/steps.rs"));
        assert!(!diary_checked("fuzz/corpus/segment/notes.md"));
        assert!(!diary_checked(
            "crates/apollo11-server/ui/node_modules/x/README.md"
        ));
        assert!(!diary_checked("crates/apollo11-log/Cargo.toml"));
    }

    #[test]
    fn an_upward_dependency_is_reported() {
        let metadata = serde_json::json!({"packages": [
            {"name": "apollo11-core", "dependencies": [
                {"name": "apollo11-machine", "kind": null},
                {"name": "tokio", "kind": null}
            ]},
        ]});
        let layering = layering_problems(&metadata);
        assert_eq!(
            layering,
            ["`apollo11-core` must not depend on `apollo11-machine` (normal)"]
        );
        let purity = purity_problems(&workspace_root().unwrap(), &metadata).unwrap();
        assert!(
            purity
                .iter()
                .any(|p| p.contains("must not depend on `tokio`")),
            "{purity:?}"
        );
    }

    #[test]
    fn a_dev_dependency_on_the_test_support_is_allowed_but_not_on_a_higher_layer() {
        let metadata = serde_json::json!({"packages": [
            {"name": "apollo11-dag", "dependencies": [
                {"name": "apollo11-machine", "kind": "dev"},
                {"name": "apollo11-runtime", "kind": "dev"}
            ]},
        ]});
        assert_eq!(
            layering_problems(&metadata),
            ["`apollo11-dag` must not depend on `apollo11-runtime` (dev)"]
        );
    }
}
