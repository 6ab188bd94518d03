//! T16 through the binary: after runs that closed cleanly, the last segment is truncated,
//! zeroed or deleted well before its end. Every command exits 3 naming what is missing and
//! pointing to `verify` and `repair`, and leaves the data dir byte for byte as it was (the
//! lock file included: a writer refused for damage writes nothing); `repair` without
//! `--yes` says what it would cut and changes nothing; `repair --yes` cuts, and every
//! command works again.

use crate::harness::{assert_damage_advice, Cli};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug)]
enum Loss {
    Truncate,
    Zero,
    Delete,
}

const SEGMENT_BYTES: &str = "4096";

/// Runs `r0`..`r5` of a workflow whose step leaves a 3,000-byte output, on small segments.
fn runs(cli: &Cli) -> PathBuf {
    let toml = "[workflow]\nname = \"m\"\n[[steps]]\nname = \"a\"\nrun = \"head -c 3000 /dev/zero | tr '\\\\0' x > $APOLLO11_OUTPUT\"\nidempotency = \"natural\"\n";
    let wf = cli.workflow("wf.toml", toml);
    for i in 0..6 {
        let run_id = format!("r{i}");
        let args = [
            "--segment-bytes",
            SEGMENT_BYTES,
            "run",
            wf.to_str().unwrap(),
            "--run-id",
            &run_id,
        ];
        let out = cli.run(&args);
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    wf
}

/// Every file and folder under `dir`, with the bytes of the files.
fn contents(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    crate::paths::walk(dir)
        .into_iter()
        .map(|p| {
            let bytes = p.is_file().then(|| std::fs::read(&p).unwrap());
            (p, bytes)
        })
        .collect()
}

/// The last segment and where its committed data ends, as `verify --json` reports them.
fn last_segment(cli: &Cli) -> (PathBuf, u64) {
    let out = cli.run(&["verify", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let last = report["segments"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let file = cli.data.path().join(last["file"].as_str().unwrap());
    (file, last["bytes"].as_u64().unwrap())
}

fn lose(cli: &Cli, how: Loss) {
    let (path, end) = last_segment(cli);
    let middle = end / 2;
    match how {
        Loss::Truncate => std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(middle)
            .unwrap(),
        Loss::Zero => {
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[middle as usize..].fill(0);
            std::fs::write(&path, bytes).unwrap();
        }
        Loss::Delete => std::fs::remove_file(&path).unwrap(),
    }
}

fn one_case(how: Loss) {
    let cli = Cli::new();
    let wf = runs(&cli);
    let wf = wf.to_str().unwrap();
    let segments = std::fs::read_dir(cli.data.path().join("segments")).unwrap();
    let segments = segments
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "seg")
        })
        .count();
    assert!(segments >= 3, "{how:?}: the log rolled: {segments}");
    lose(&cli, how);
    let before = contents(cli.data.path());
    let commands: [&[&str]; 8] = [
        &["runs"],
        &["status", "r0"],
        &["events", "r0"],
        &["plan", "r0"],
        &["resume", "r0"],
        &["run", wf, "--run-id", "new"],
        &["override", "r0", "a", "--to", "succeeded", "--reason", "x"],
        &["verify"],
    ];
    for args in commands {
        let out = cli.run(args);
        assert_eq!(
            out.code, 3,
            "{how:?} {args:?}: {}{}",
            out.stdout, out.stderr
        );
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(
            said.contains("committed data is missing"),
            "{how:?} {args:?} names what is missing: {said}"
        );
        assert_damage_advice(args, &out.stderr);
        assert!(
            contents(cli.data.path()) == before,
            "{how:?} {args:?} changed the data dir"
        );
    }
    let dry = cli.run(&["repair"]);
    assert_eq!(dry.code, 2, "{how:?}: {}{}", dry.stdout, dry.stderr);
    assert!(
        dry.stdout.contains("DAMAGE") && dry.stdout.contains("repair would keep events 1 to"),
        "{how:?}: {}",
        dry.stdout
    );
    assert!(
        dry.stderr.contains("nothing was changed") && dry.stderr.contains("--yes"),
        "{how:?}: {}",
        dry.stderr
    );
    assert!(
        contents(cli.data.path()) == before,
        "{how:?}: a dry repair changed files"
    );
    let repaired = cli.run(&["repair", "--yes"]);
    assert_eq!(
        repaired.code, 0,
        "{how:?}: {}{}",
        repaired.stdout, repaired.stderr
    );
    assert!(
        repaired
            .stdout
            .contains("repaired: the log keeps events 1 to"),
        "{how:?}: {}",
        repaired.stdout
    );
    let verify = cli.run(&["verify"]);
    assert_eq!(verify.code, 0, "{how:?}: {}", verify.stdout);
    for args in [
        &["runs"][..],
        &["status", "r0"],
        &["events", "r0"],
        &["plan", "r0"],
    ] {
        let out = cli.run(args);
        assert_eq!(out.code, 0, "{how:?} {args:?} after repair: {}", out.stderr);
    }
    let again = cli.run(&[
        "--segment-bytes",
        SEGMENT_BYTES,
        "run",
        wf,
        "--run-id",
        "after",
    ]);
    assert_eq!(again.code, 0, "{how:?}: {}", again.stderr);
}

#[test]
fn a_truncated_last_segment_stops_every_command_with_exit_3_until_repair() {
    one_case(Loss::Truncate);
}

#[test]
fn a_zeroed_last_segment_stops_every_command_with_exit_3_until_repair() {
    one_case(Loss::Zero);
}

#[test]
fn a_deleted_last_segment_stops_every_command_with_exit_3_until_repair() {
    one_case(Loss::Delete);
}
