//! Replays, on stable and without libFuzzer, every input the fuzz targets keep: the seeds
//! (`fuzz/seeds/TARGET`), the corpus their campaigns grew and minimised (`fuzz/corpus/TARGET`)
//! and every crash they found (`fuzz/regressions/TARGET`), each through the same check its
//! target runs (`apollo11_fuzz::targets`).

use apollo11_fuzz::targets::ALL;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// The folders under `fuzz/` that hold one folder of inputs per target.
const KINDS: [&str; 3] = ["seeds", "corpus", "regressions"];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The entries of `dir`, sorted; none when it does not exist.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .map(|e| {
            e.unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
                .path()
        })
        .collect();
    paths.sort();
    paths
}

/// Feeds every kept input of `target` to its check; fails naming each input that panicked.
fn replay(target: &str) {
    let (_, check) = ALL
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no fuzz target `{target}`"));
    let mut inputs = 0;
    let mut failed = Vec::new();
    for kind in KINDS {
        for file in entries(&fuzz_dir().join(kind).join(target)) {
            let data =
                std::fs::read(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
            inputs += 1;
            if catch_unwind(AssertUnwindSafe(|| check(&data))).is_err() {
                failed.push(file.display().to_string());
            }
        }
    }
    assert!(
        inputs > 0,
        "{target}: no input in fuzz/{{seeds,corpus,regressions}}/{target}"
    );
    assert!(
        failed.is_empty(),
        "{target}: these inputs fail its check: {failed:#?}"
    );
}

macro_rules! replay_tests {
    ($($target:ident),*) => {
        $(#[test]
        fn $target() {
            replay(stringify!($target));
        })*

        /// Every target has a test above, and every folder of inputs is a target's.
        #[test]
        fn every_target_and_folder_is_replayed() {
            let tested = [$(stringify!($target)),*];
            let targets: Vec<&str> = ALL.iter().map(|(name, _)| *name).collect();
            assert_eq!(tested.to_vec(), targets, "a target without its replay test");
            for kind in KINDS {
                for dir in entries(&fuzz_dir().join(kind)) {
                    let name = dir.file_name().unwrap_or_default().to_string_lossy();
                    assert!(targets.contains(&&*name), "fuzz/{kind}/{name} is no target's");
                }
            }
        }
    };
}

replay_tests!(
    event_record,
    segment,
    snapshot_file,
    index_file,
    bundle,
    workflow_toml,
    http_request
);
