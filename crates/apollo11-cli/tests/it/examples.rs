//! The shipped examples run as a user runs them, each from a copy of its folder (their steps
//! write beside the workflow file): the fan-out over partitions a step lists at run time,
//! the rolling upgrade in waves with its rollback, and the same upgrade through a server with
//! its host steps on the workers its `workers.sh` starts. The five-stage pipeline is the
//! README's first command, run by CI.

use crate::harness::{serving_address, Cli};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

/// `apollo11 serve` and the process group of a `workers.sh`, killed when dropped.
struct Fleet {
    server: Child,
    workers: Child,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.workers.id() as i32), Signal::SIGKILL);
        let _ = self.workers.wait();
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// Whether the process group `leader` led has no process left, within 10 s.
fn group_gone(leader: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while killpg(Pid::from_raw(leader as i32), None).is_ok() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn the_runbook_on_workers_runs_each_host_step_on_the_worker_of_its_host() {
    let cli = Cli::new();
    example(&cli, "ops-runbook");
    let wf = example(&cli, "ops-runbook-workers");
    let work = cli.work.path().to_str().unwrap().to_owned();
    let mut server = (cli.command(&["serve", "--listen", "127.0.0.1:0", "--workflows", &work]))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let address = serving_address(&mut server);
    let workers = Command::new("sh")
        .arg(cli.work.path().join("ops-runbook-workers/workers.sh"))
        .arg(format!("http://{address}"))
        .env("APOLLO11", env!("CARGO_BIN_EXE_apollo11"))
        .env("WORK_DIR", cli.file("workers"))
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut fleet = Fleet { server, workers };

    let ran = cli.run(&["run", &wf, "--run-id", "w"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains("w: succeeded (driven by the server"),
        "{}",
        ran.stdout
    );
    assert_eq!(output(&cli, "w", "report"), "{\"upgraded\": 32}\n");
    let mut placed = 0;
    for event in cli
        .events_json("w")
        .iter()
        .filter(|e| e["kind"] == "placed")
    {
        let step = event["step"].as_str().unwrap();
        let handle: serde_json::Value =
            serde_json::from_str(event["handle"].as_str().unwrap()).unwrap();
        let host = (step.split_once('['))
            .filter(|(declaration, _)| ["drain", "upgrade", "undrain"].contains(declaration))
            .map(|(_, item)| item.trim_end_matches(']'));
        assert_eq!(handle["worker"].as_str(), host, "{step} ran on {handle}");
        placed += usize::from(host.is_some());
    }
    assert_eq!(placed, 96, "drain, upgrade and undrain of 32 hosts");

    let script = Pid::from_raw(fleet.workers.id() as i32);
    nix::sys::signal::kill(script, Signal::SIGTERM).unwrap();
    fleet.workers.wait().unwrap();
    assert!(
        group_gone(fleet.workers.id()),
        "the script stopped its workers"
    );
}
