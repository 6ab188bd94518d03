//! T15: hostile names. Run ids, step names and workflow names that are paths, dots, empty,
//! over-long or carry control characters are refused with exit 2 before any event is written,
//! and nothing outside the data dir is created, changed or deleted.

use crate::harness::{Cli, Ran};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A sandbox holding the data dir (deep inside it, so `..` lands in the sandbox) and files a
/// hostile name could truncate or delete.
struct Sandbox {
    root: tempfile::TempDir,
    cli: Cli,
}

impl Sandbox {
    fn new() -> Sandbox {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("a/b/c/data");
        std::fs::create_dir_all(&data).unwrap();
        for victim in ["victim.1.log", "victim.1.output", "victim/1.log", "x.1.log"] {
            let path = root.path().join(victim);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "precious").unwrap();
        }
        let cli = Cli::new();
        Sandbox { root, cli }
    }

    fn data(&self) -> PathBuf {
        self.root.path().join("a/b/c/data")
    }

    fn run(&self, args: &[&str]) -> Ran {
        let data = self.data();
        self.cli
            .run_at(self.cli.work.path(), data.to_str().unwrap(), args)
    }

    /// Every file and folder of the sandbox outside the data dir, with its content, and of
    /// the workflow folder.
    fn tree(&self) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
        let mut out = BTreeMap::new();
        for top in [self.root.path(), self.cli.work.path()] {
            for path in crate::paths::walk(top) {
                if !path.starts_with(self.data()) {
                    out.insert(path.clone(), std::fs::read(&path).ok());
                }
            }
        }
        out
    }

    fn events(&self) -> u64 {
        let out = self.run(&["verify", "--json"]);
        let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        report["events"].as_u64().unwrap()
    }
}

fn workflow(name: &str, step: &str) -> String {
    let name = toml_string(name);
    let step = toml_string(step);
    format!("[workflow]\nname = {name}\n[[steps]]\nname = {step}\nrun = \"echo hi; echo '{{}}' > $APOLLO11_OUTPUT\"\nidempotency = \"natural\"\n")
}

/// A TOML basic string holding `s` exactly (control characters as \u escapes).
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[test]
fn hostile_names_are_refused_before_any_event_and_touch_nothing_outside_the_data_dir() {
    let sandbox = Sandbox::new();
    let ok = sandbox.cli.workflow("ok.toml", &workflow("ok", "s"));
    let out = sandbox.run(&["run", ok.to_str().unwrap(), "--run-id", "first"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = sandbox.events();
    let before = sandbox.tree();
    let root = sandbox.root.path().to_str().unwrap().to_owned();
    let long = "n".repeat(201);
    // Run ids on the command line.
    let run_ids = [
        "../../x".to_owned(),
        "../../../../x".to_owned(),
        format!("{root}/abs-run"),
        "..".to_owned(),
        ".".to_owned(),
        "a/b".to_owned(),
        String::new(),
        long.clone(),
        "esc\u{1b}[2J".to_owned(),
        "new\nline".to_owned(),
    ];
    for id in &run_ids {
        let out = sandbox.run(&["run", ok.to_str().unwrap(), "--run-id", id]);
        assert_eq!(out.code, 2, "--run-id {id:?}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains("--run-id: the run id"),
            "{id:?}: {}",
            out.stderr
        );
        for args in [
            &["resume", id.as_str()][..],
            &["status", id],
            &["events", id],
            &["plan", id],
            &["override", id, "s", "--to", "skipped", "--reason", "r"],
        ] {
            let out = sandbox.run(args);
            assert_eq!(out.code, 2, "{args:?}: {}{}", out.stdout, out.stderr);
        }
    }
    // Names in a workflow file: refused by validate and run alike, at their line and column.
    let files = [
        (
            "../../w".to_owned(),
            "s".to_owned(),
            "2:8: the workflow name",
        ),
        (
            "w".to_owned(),
            format!("{root}/victim"),
            "4:8: the step name",
        ),
        (
            "w".to_owned(),
            "../../../../x".to_owned(),
            "4:8: the step name",
        ),
        ("w".to_owned(), "b/c".to_owned(), "4:8: the step name"),
        ("w".to_owned(), String::new(), "4:8: the step name is empty"),
        ("w".to_owned(), long.clone(), "4:8: the step name"),
        ("w".to_owned(), "a\0b".to_owned(), "4:8: the step name"),
        (long.clone(), "s".to_owned(), "2:8: the workflow name"),
        (
            "\u{1b}]0;pwned\u{7}".to_owned(),
            "s".to_owned(),
            "2:8: the workflow name",
        ),
    ];
    for (name, step, expected) in &files {
        let wf = sandbox.cli.workflow("bad.toml", &workflow(name, step));
        for command in ["validate", "run"] {
            let out = sandbox.run(&[command, wf.to_str().unwrap()]);
            assert_eq!(
                out.code, 2,
                "{command} {name:?}/{step:?}: {}{}",
                out.stdout, out.stderr
            );
            assert!(
                out.stderr.contains(&format!("bad.toml:{expected}")),
                "{command} {name:?}/{step:?}: {}",
                out.stderr
            );
            assert!(
                !out.stderr.contains(['\0', '\u{1b}', '\u{7}']),
                "{:?}",
                out.stderr
            );
        }
    }
    // Run `a` with step `b/c` and run `a/b` with step `c` would share a key and a log file.
    let wf = sandbox.cli.workflow("bad.toml", &workflow("w", "c"));
    let out = sandbox.run(&["run", wf.to_str().unwrap(), "--run-id", "a/b"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    std::fs::remove_file(sandbox.cli.file("bad.toml")).unwrap();
    assert_eq!(sandbox.events(), events, "no event was written");
    assert_eq!(
        sandbox.tree(),
        before,
        "nothing outside the data dir changed"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.root.path().join("victim.1.log")).unwrap(),
        "precious"
    );
}

#[test]
fn the_default_run_id_is_a_valid_name_whatever_the_workflow_name_and_unique_per_run() {
    let cli = Cli::new();
    let name = "é".repeat(100); // 200 bytes: the longest workflow name
    let wf = cli.workflow("wf.toml", &workflow(&name, "s"));
    for _ in 0..3 {
        let out = cli.run(&["run", wf.to_str().unwrap(), "--json"]);
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    }
    let runs = cli.run(&["runs", "--json"]);
    let ids: std::collections::BTreeSet<String> = runs
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["run_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 3, "three runs, three ids: {ids:?}");
    for id in &ids {
        assert!(id.len() <= 200 && id.starts_with("éé"), "{id}");
        assert!(Path::new(&cli.data.path().join("logs").join(id).join("s/1.log")).is_file());
    }
}

#[test]
fn a_step_folder_the_file_system_refuses_stops_the_run_before_its_first_event() {
    // A data dir so deep that a step's folder (logs/<run>/<200-byte step>) passes PATH_MAX.
    let sandbox = Sandbox::new();
    let mut data = sandbox.root.path().to_path_buf();
    while data.as_os_str().len() < 4_000 {
        data.push("d".repeat(199));
    }
    std::fs::create_dir_all(&data).unwrap();
    let step = "s".repeat(200);
    let wf = sandbox.cli.workflow("wf.toml", &workflow("w", &step));
    let data = data.to_str().unwrap();
    let out = sandbox.cli.run_at(
        sandbox.cli.work.path(),
        data,
        &["run", wf.to_str().unwrap(), "--run-id", "r"],
    );
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("cannot create"), "{}", out.stderr);
    let runs = sandbox
        .cli
        .run_at(sandbox.cli.work.path(), data, &["runs", "--json"]);
    assert_eq!(
        (runs.code, runs.stdout.as_str()),
        (0, ""),
        "no run was created: {}",
        runs.stderr
    );
}
