//! The shipped examples run as a user runs them, each from a copy of its folder (their steps
//! write beside the workflow file): the fan-out over partitions a step lists at run time,
//! the rolling upgrade in waves with its rollback. The five-stage pipeline is the README's
//! first command, run by CI.

use crate::harness::Cli;
use std::path::Path;

/// Copies `examples/NAME` into the work folder; the copied workflow file's path.
fn example(cli: &Cli, name: &str) -> String {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    let to = cli.work.path().join(name);
    copy(&from, &to);
    to.join("workflow.toml").display().to_string()
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// What the first attempt of `step` of `run` wrote to `APOLLO11_OUTPUT`, as kept in the data dir.
fn output(cli: &Cli, run: &str, step: &str) -> String {
    let file = cli
        .data
        .path()
        .join("logs")
        .join(run)
        .join(step)
        .join("1.output");
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

#[test]
fn the_fan_out_processes_what_discover_lists_and_notifies_only_on_a_failure() {
    let cli = Cli::new();
    let wf = example(&cli, "fan-out");
    let ok = cli.run(&["run", &wf, "--run-id", "ok", "--param", "partitions=10"]);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    assert!(ok.stdout.contains("process[p10]"), "{}", ok.stdout);
    let rows: u32 = (1..=10).map(|p| 1000 + p * 7).sum();
    let merged = output(&cli, "ok", "merge");
    assert_eq!(
        merged,
        format!("{{\"partitions\": 10, \"rows\": {rows}}}\n")
    );
    assert!(
        ok.stdout.contains("notify                   skipped"),
        "{}",
        ok.stdout
    );

    let failed = cli.run(&["run", &wf, "--run-id", "bad", "--param", "fail=p03"]);
    assert_eq!(failed.code, 1, "{}{}", failed.stdout, failed.stderr);
    assert!(
        failed.stdout.contains("(fan-out): paused"),
        "{}",
        failed.stdout
    );
    assert!(
        failed.stdout.contains("notify                   succeeded"),
        "{}",
        failed.stdout
    );
    assert!(
        failed.stdout.contains("merge                    pending"),
        "{}",
        failed.stdout
    );
}

#[test]
fn the_runbook_upgrades_32_hosts_in_waves_and_rolls_back_a_failed_one() {
    let cli = Cli::new();
    let wf = example(&cli, "ops-runbook");
    let ok = cli.run(&["run", &wf, "--run-id", "ok"]);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    assert!(ok.stdout.contains("gate[wave-4]"), "{}", ok.stdout);
    assert_eq!(output(&cli, "ok", "report"), "{\"upgraded\": 32}\n");

    let mut failing = cli.command(&["run", &wf, "--run-id", "bad"]);
    let failed = failing.env("FAIL_HOST", "host-21").output().unwrap();
    let stdout = String::from_utf8_lossy(&failed.stdout);
    assert_eq!(failed.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("(ops-runbook): rolled_back"), "{stdout}");
    assert!(stdout.contains("drain[host-24]"), "{stdout}");
}
