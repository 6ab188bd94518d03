//! Run bundles: `export` a run, `import` it into another data dir, and every answer about it
//! (`events --json`, `status --json --at` at each of its events) is the source's, with the
//! target's event ids in place of the source's (the run's i-th event for the i-th). A damaged
//! bundle is refused by `verify FILE` and `import`, naming the offset.

use crate::harness::{Cli, Ran};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The five-stage example (copied, so its `work/` stays in the test's folder), on few rows.
fn run_five_stage(cli: &Cli, run: &str, fail_persist: bool) -> Ran {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/five-stage");
    let folder = cli.work.path().join("five-stage");
    std::fs::create_dir_all(folder.join("steps")).unwrap();
    for entry in std::fs::read_dir(example.join("steps")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, folder.join("steps").join(path.file_name().unwrap())).unwrap();
    }
    let toml = std::fs::read_to_string(example.join("workflow.toml")).unwrap();
    // Retries a second apart would only slow the failing run down.
    let toml = toml.replace("initial = \"1s\"", "initial = \"10ms\"");
    std::fs::write(folder.join("workflow.toml"), toml).unwrap();
    let wf = folder.join("workflow.toml");
    let args = [
        "run",
        wf.to_str().unwrap(),
        "--run-id",
        run,
        "--param",
        "rows=2000",
    ];
    let mut command = cli.command(&args);
    if fail_persist {
        command.env("FAIL_PERSIST", "1");
    }
    crate::harness::ran(command.stdin(std::process::Stdio::null()).output().unwrap())
}

/// A run whose step output is a blob (over the inline limit).
fn run_with_blob(cli: &Cli, run: &str) {
    let toml = "[workflow]\nname = \"big\"\n[[steps]]\nname = \"big\"\nrun = \"head -c 10000 /dev/zero | tr '\\\\0' m > $APOLLO11_OUTPUT; echo done\"\nidempotency = \"natural\"\n";
    let wf = cli.workflow("big.toml", toml);
    let ran = cli.run(&["run", wf.to_str().unwrap(), "--run-id", run]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
}

fn export(cli: &Cli, run: &str) -> PathBuf {
    let file = cli.work.path().join(format!("{run}.a11"));
    let ran = cli.run(&["export", run, "-o", file.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    file
}

fn import(cli: &Cli, file: &Path) -> Ran {
    cli.run(&["import", file.to_str().unwrap()])
}

/// `value` with every `event_id` mapped by `ids`.
fn mapped(mut value: Value, ids: &BTreeMap<u64, u64>) -> Value {
    match &mut value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                *v = if key == "event_id" {
                    Value::from(ids[&v.as_u64().unwrap()])
                } else {
                    mapped(v.take(), ids)
                };
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| *v = mapped(v.take(), ids)),
        _ => {}
    }
    value
}

fn status_at(cli: &Cli, run: &str, at: u64) -> Value {
    let ran = cli.run(&["status", run, "--json", "--at", &at.to_string()]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    serde_json::from_str(&ran.stdout).unwrap()
}

fn files_of(cli: &Cli, run: &str) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let dir = cli.data.path().join("logs").join(run);
    for step in std::fs::read_dir(dir).unwrap() {
        for file in std::fs::read_dir(step.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            let name = path
                .strip_prefix(cli.data.path())
                .unwrap()
                .display()
                .to_string();
            files.insert(name, std::fs::read(&path).unwrap());
        }
    }
    files
}

/// Every answer about `run` in `to` is the one in `from` with the ids mapped.
fn assert_same_run(from: &Cli, to: &Cli, run: &str) {
    let (source, target) = (from.events_json(run), to.events_json(run));
    assert_eq!(source.len(), target.len());
    let id = |e: &Value| e["event_id"].as_u64().unwrap();
    let ids: BTreeMap<u64, u64> = source.iter().map(id).zip(target.iter().map(id)).collect();
    assert!(
        ids.iter().any(|(a, b)| a != b),
        "the target numbers the events"
    );
    for (s, t) in source.iter().zip(&target) {
        assert_eq!(mapped(s.clone(), &ids), *t);
    }
    for (s, t) in &ids {
        assert_eq!(
            mapped(status_at(from, run, *s), &ids),
            status_at(to, run, *t),
            "status at event {s} (imported as {t})"
        );
    }
    assert_eq!(files_of(from, run), files_of(to, run), "the step files");
}

#[test]
fn a_run_exported_and_imported_answers_as_in_its_source() {
    let from = Cli::new();
    assert_eq!(run_five_stage(&from, "ok", false).code, 0);
    let failed = run_five_stage(&from, "rolled", true);
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    run_with_blob(&from, "big");
    let to = Cli::new();
    // The target has a run of its own first: its ids are not the source's.
    run_with_blob(&to, "mine");
    for run in ["rolled", "ok", "big"] {
        let file = export(&from, run);
        let verified = to.run(&["verify", file.to_str().unwrap()]);
        assert_eq!(verified.code, 0, "{}", verified.stderr);
        assert!(
            verified.stdout.contains("a clean bundle of run"),
            "{}",
            verified.stdout
        );
        let imported = import(&to, &file);
        assert_eq!(imported.code, 0, "{}", imported.stderr);
        assert_same_run(&from, &to, run);
        // Again: nothing changes.
        let again = import(&to, &file);
        assert_eq!(again.code, 0, "{}", again.stderr);
        assert!(
            again.stdout.contains(": 0 events imported"),
            "{}",
            again.stdout
        );
        assert_same_run(&from, &to, run);
    }
    assert_eq!(to.run(&["verify"]).code, 0, "the target's log is clean");
    // A run of the same id with other events is refused, and nothing is written.
    let other = Cli::new();
    run_with_blob(&other, "ok");
    let before = other.events_json("ok");
    let refused = import(&other, &from.work.path().join("ok.a11"));
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("exists with other events"),
        "{}",
        refused.stderr
    );
    assert_eq!(other.events_json("ok"), before);
}

/// The offset of each record of a bundle file and its kind.
fn records(bytes: &[u8]) -> Vec<(usize, u8)> {
    let (mut at, mut found) = (16, Vec::new());
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        found.push((at, bytes[at + 8]));
        at += 8 + len;
    }
    found
}

#[test]
fn a_damaged_or_truncated_bundle_is_refused_naming_the_offset() {
    let from = Cli::new();
    run_with_blob(&from, "big");
    let file = export(&from, "big");
    let bytes = std::fs::read(&file).unwrap();
    let to = Cli::new();
    let damaged = from.work.path().join("damaged.a11");
    // A bit flipped in each section's record, in the record after it, and in the end record.
    let records = records(&bytes);
    let sections: Vec<usize> = records.iter().filter(|r| r.1 == 16).map(|r| r.0).collect();
    assert_eq!(
        sections.len(),
        5,
        "manifest, events, a blob, a log, an output"
    );
    let mut targets: Vec<usize> = records
        .windows(2)
        .filter(|w| w[0].1 == 16)
        .flat_map(|w| [w[0].0, w[1].0])
        .collect();
    targets.push(records.last().unwrap().0);
    for record in targets {
        let mut copy = bytes.clone();
        copy[record + 10] ^= 0x10;
        std::fs::write(&damaged, &copy).unwrap();
        let offset = format!("at offset {record}:");
        let args = [damaged.to_str().unwrap()];
        let verified = to.run(&["verify", args[0]]);
        assert_eq!(verified.code, 3, "{}", verified.stderr);
        assert!(
            verified.stderr.contains(&offset),
            "{offset} {}",
            verified.stderr
        );
        let imported = to.run(&["import", args[0]]);
        assert_eq!(imported.code, 3, "{}", imported.stderr);
        assert!(
            imported.stderr.contains(&offset),
            "{offset} {}",
            imported.stderr
        );
        assert!(!to.data.path().join("segments").exists(), "nothing written");
    }
    let cut = sections[3] + 5;
    std::fs::write(&damaged, &bytes[..cut]).unwrap();
    let json = to.run(&["verify", damaged.to_str().unwrap(), "--json"]);
    assert_eq!(json.code, 3, "{}", json.stderr);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["clean"], false);
    assert_eq!(report["offset"], sections[3]);
}

/// `export -o` writes a new file, or with `--force` replaces a regular one: it never writes
/// over a link, a pipe, a device or a folder, and refuses what is there without `--force`,
/// leaving it as it was. `verify` and `import` read only regular files (a device could be
/// endless).
#[test]
fn export_writes_only_new_or_forced_regular_files_and_bundles_are_read_only_from_regular_ones() {
    let cli = Cli::new();
    run_with_blob(&cli, "big");
    let at = |name: &str| cli.work.path().join(name);
    let out = |path: &Path, force: bool| {
        let path = path.to_str().unwrap();
        let args = ["export", "big", "-o", path, "--force"];
        cli.run(&args[..if force { 5 } else { 4 }])
    };
    std::fs::write(at("kept"), "precious").unwrap();
    std::os::unix::fs::symlink(at("kept"), at("link")).unwrap();
    std::fs::create_dir(at("folder")).unwrap();
    assert!(std::process::Command::new("mkfifo")
        .arg(at("pipe"))
        .status()
        .unwrap()
        .success());
    let refused = out(&at("kept"), false);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("exists; --force replaces it"),
        "{}",
        refused.stderr
    );
    for (name, kind) in [
        ("link", "a symbolic link"),
        ("folder", "a folder"),
        ("pipe", "a pipe"),
    ] {
        let refused = out(&at(name), true);
        assert_eq!(refused.code, 2, "{name}: {}", refused.stderr);
        assert!(refused.stderr.contains(kind), "{name}: {}", refused.stderr);
    }
    assert_eq!(std::fs::read_to_string(at("kept")).unwrap(), "precious");
    assert!(std::fs::symlink_metadata(at("link"))
        .unwrap()
        .file_type()
        .is_symlink());
    let forced = out(&at("kept"), true);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert_eq!(cli.run(&["verify", at("kept").to_str().unwrap()]).code, 0);
    let fresh = out(&at("new.a11"), false);
    assert_eq!(fresh.code, 0, "{}", fresh.stderr);
    let left: Vec<_> = std::fs::read_dir(cli.work.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temp files left: {left:?}");
    for (args, device) in [
        (["verify", "/dev/zero"], "/dev/zero"),
        (["import", "/dev/zero"], "/dev/zero"),
    ] {
        let refused = cli.run_within(20, &args);
        assert_eq!(refused.code, 2, "{device}: {}", refused.stderr);
        assert!(
            refused.stderr.contains("a device, not a regular file"),
            "{}",
            refused.stderr
        );
    }
}

/// A step file already in the target with other bytes refuses the import before anything is
/// written: no other step file, no event.
#[test]
fn an_import_refused_for_a_step_file_writes_no_other_one() {
    let from = Cli::new();
    assert_eq!(run_five_stage(&from, "ok", false).code, 0);
    let file = export(&from, "ok");
    let source = files_of(&from, "ok");
    assert!(source.len() > 1, "{:?}", source.keys());
    // The last file the bundle holds, there already with other bytes.
    let last = source.keys().last().unwrap();
    let to = Cli::new();
    let held = to.data.path().join(last);
    std::fs::create_dir_all(held.parent().unwrap()).unwrap();
    std::fs::write(&held, b"other").unwrap();
    let refused = import(&to, &file);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("exists with other bytes"),
        "{}",
        refused.stderr
    );
    let written: Vec<String> = files_of(&to, "ok").into_keys().collect();
    assert_eq!(written, std::slice::from_ref(last), "nothing else written");
    let runs = to.run(&["runs", "--json"]);
    assert!(
        !runs.stdout.contains("\"ok\""),
        "no event written: {}",
        runs.stdout
    );
}
