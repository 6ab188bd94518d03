//! Step limits held by a cgroup per try and rlimits, with real processes: a step over its
//! memory killed with class `oom` while the others succeed, a fork loop contained, a
//! spinner held to its cpu share, an fd leak failing cleanly; and bad limits refused where
//! they are written.

use crate::harness::Cli;
use crate::validation::invalid;

const HEAD: &str = "[workflow]\nname = \"limits\"\non_failure = \"pause\"\n\n[defaults]\nretry = { max_attempts = 1 }\n";

/// Whether a cgroup can be made here; when not, says why the test is skipped (and fails
/// in CI, which runs as root with cgroups writable).
pub(crate) fn cgroups() -> bool {
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
    let v1 = std::path::Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists();
    let v2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    if root && (v1 || v2) {
        return true;
    }
    let why = format!("skipped: needs root and a cgroup mount (root: {root}, v1: {v1}, v2: {v2})");
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("{why}");
    false
}

/// Runs `steps` as run `run`; its exit code and status JSON.
fn run(cli: &Cli, steps: &str, run: &str) -> (i32, serde_json::Value) {
    let wf = cli.workflow("wf.toml", &format!("{HEAD}{steps}"));
    let out = cli.run_within(120, &["run", wf.to_str().unwrap(), "--run-id", run]);
    (out.code, cli.status_json(run))
}

fn step<'a>(status: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    &status["steps"][name]
}

/// The `isolation` the `Placed` event of `step`'s last try records, as `status` shows it.
fn isolation<'a>(status: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    &step(status, name)["placed"]["payload"]["isolation"]
}

#[test]
fn a_step_over_its_memory_is_killed_as_oom_and_the_other_step_succeeds() {
    if !cgroups() {
        return;
    }
    let cli = Cli::new();
    let steps = r#"
[[steps]]
name = "hog"
idempotency = "natural"
limits = { memory = "256MiB" }
run = "python3 -c 'b = bytearray(1 << 30); print(len(b))'"

[[steps]]
name = "fine"
idempotency = "natural"
limits = { memory = "256MiB" }
run = "python3 -c 'b = bytearray(1 << 20); print(len(b))'"
"#;
    let (code, status) = run(&cli, steps, "m1");
    assert_eq!(code, 1, "{status}");
    let hog = step(&status, "hog");
    assert_eq!(
        (&hog["state"], &hog["error_class"]),
        (&"failed".into(), &"oom".into()),
        "{status}"
    );
    assert_eq!(step(&status, "fine")["state"], "succeeded", "{status}");
    assert_eq!(isolation(&status, "hog"), "cgroup");
    let events = cli.run(&["events", "m1"]).stdout;
    assert!(events.contains("(limits: cgroup): python3"), "{events}");
}

#[test]
fn a_step_on_a_worker_over_its_memory_is_killed_there_as_oom() {
    if !cgroups() {
        return;
    }
    let workflow = r#"
[workflow]
name = "placed"

[[steps]]
name = "hog"
idempotency = "natural"
on = { role = "big" }
retry = { max_attempts = 1 }
limits = { memory = "256MiB" }
run = "python3 -c 'b = bytearray(1 << 30)'"
"#;
    let mut s = crate::workers::Setup::with(workflow);
    s.worker("w1", "role=big");
    s.start("w1");
    crate::harness::wait_until("the run paused", || {
        crate::workers::state_of(&s.run("w1")) == "paused"
    });
    let hog = &s.run("w1")["steps"]["hog"];
    assert_eq!(hog["error_class"], "oom", "{hog}");
    // What the try used, measured on the worker, comes back with its result.
    let used = &hog["usage"][0];
    assert_eq!(
        (&used["isolation"], &used["memory_limit_bytes"]),
        (&"cgroup".into(), &(256u64 << 20).into()),
        "{hog}"
    );
}

#[test]
fn a_fork_loop_under_64_processes_fails_and_ends() {
    if !cgroups() {
        return;
    }
    let cli = Cli::new();
    let steps = r#"
[[steps]]
name = "forks"
idempotency = "natural"
limits = { processes = 64 }
run = "for i in $(seq 500); do sleep 30 & done; wait"
"#;
    let started = std::time::Instant::now();
    let (code, status) = run(&cli, steps, "p1");
    assert_eq!(
        (code, &step(&status, "forks")["state"]),
        (1, &"failed".into()),
        "{status}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(25),
        "the sleeps it did start were killed"
    );
}

#[test]
fn a_spinner_under_half_a_core_uses_at_most_six_tenths_of_one() {
    if !cgroups() {
        return;
    }
    let cli = Cli::new();
    let steps = r#"
[[steps]]
name = "spin"
idempotency = "natural"
limits = { cpu = 0.5 }
run = '''python3 -c '
import time
start = time.time()
while time.time() - start < 5:
    pass
open("cpu.txt", "w").write(str(time.process_time()))
' '''
"#;
    let (code, status) = run(&cli, steps, "c1");
    assert_eq!(code, 0, "{status}");
    let cpu: f64 = std::fs::read_to_string(cli.file("cpu.txt"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .expect("the spinner's cpu seconds");
    assert!(
        (1.0..=3.0).contains(&cpu),
        "{cpu} cpu seconds in 5 s under cpu = 0.5"
    );
}

#[test]
fn an_fd_leak_over_its_open_files_fails_cleanly_and_cpu_time_is_classed() {
    let cli = Cli::new();
    let steps = r#"
[[steps]]
name = "leak"
idempotency = "natural"
limits = { open_files = 256 }
run = "python3 -c 'fs = [open(\"/dev/null\") for _ in range(1000)]'"

[[steps]]
name = "burn"
idempotency = "natural"
limits = { cpu_time = "1s" }
run = "python3 -c 'while True: pass'"
"#;
    let (code, status) = run(&cli, steps, "f1");
    assert_eq!(code, 1, "{status}");
    let leak = step(&status, "leak");
    assert_eq!(
        (&leak["state"], &leak["error_class"]),
        (&"failed".into(), &"exit:1".into()),
        "{status}"
    );
    let burn = step(&status, "burn");
    assert_eq!(burn["error_class"], "cpu_time", "{status}");
    assert_eq!(isolation(&status, "leak"), "rlimit");
}

#[test]
fn with_rlimits_alone_a_process_limit_refuses_to_start_and_memory_is_address_space() {
    let cli = Cli::new();
    let forks = r#"
[[steps]]
name = "first"
idempotency = "natural"
run = "exit 3"

[[steps]]
name = "forks"
idempotency = "natural"
depends_on = ["first"]
limits = { processes = 64 }
run = "touch started"
"#;
    let wf = cli.workflow("forks.toml", &format!("{HEAD}{forks}"));
    let rlimit = ["--isolation", "rlimit"];
    let refused = cli.run_within(60, &[&["run", wf.to_str().unwrap()][..], &rlimit].concat());
    let stderr = refused.stderr.trim();
    assert_eq!(refused.code, 2, "{stderr}");
    assert!(
        stderr.starts_with("apollo11: step `forks`: the step limits processes"),
        "{stderr}"
    );
    if cgroups() {
        resumed_without_a_cgroup(&cli, &wf);
    }
    let hog = r#"
[[steps]]
name = "hog"
idempotency = "natural"
limits = { memory = "256MiB" }
run = "python3 -c 'b = bytearray(1 << 30)'"
"#;
    let wf = cli.workflow("hog.toml", &format!("{HEAD}{hog}"));
    let args = [
        &["run", wf.to_str().unwrap(), "--run-id", "r2"][..],
        &rlimit,
    ]
    .concat();
    assert_eq!(cli.run_within(60, &args).code, 1);
    let status = cli.status_json("r2");
    let hog = step(&status, "hog");
    assert_eq!(
        (&hog["error_class"], isolation(&status, "hog")),
        (&"exit:1".into(), &"rlimit".into()),
        "{status}"
    );
    let bad = cli.run(&["run", wf.to_str().unwrap(), "--isolation", "none"]);
    assert!(
        bad.code == 2 && bad.stderr.contains("auto, cgroup, rlimit"),
        "{}",
        bad.stderr
    );
}

/// Runs `wf` (its `first` step failing) where a cgroup can be made, then resumes it with
/// rlimits alone: the `forks` try refuses to start rather than run unlimited.
fn resumed_without_a_cgroup(cli: &Cli, wf: &std::path::Path) {
    let rlimit = ["--isolation", "rlimit"];
    assert_eq!(
        cli.run_within(60, &["run", wf.to_str().unwrap(), "--run-id", "r1"])
            .code,
        1
    );
    cli.run(&[
        "override",
        "r1",
        "first",
        "--to",
        "succeeded",
        "--reason",
        "fixed by hand",
    ]);
    assert_eq!(
        cli.run_within(60, &[&["resume", "r1"][..], &rlimit].concat())
            .code,
        1
    );
    let status = cli.status_json("r1");
    let step_forks = step(&status, "forks");
    assert_eq!(step_forks["error_class"], "spawn", "{status}");
    let error = step_forks["error"].as_str().unwrap();
    assert!(
        error.contains("processes") && error.contains("`rlimit`"),
        "{error}"
    );
    assert!(
        !cli.file("started").exists(),
        "the step must not run unlimited"
    );
}

#[test]
fn bad_limits_are_named_where_they_are_written() {
    let step = "[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n";
    let cases = [
        ("limits = { swap = \"1G\" }", "wf.toml:11:12: limits.swap: not a limit; a limit is one of memory, cpu, processes, open_files, cpu_time"),
        ("limits = { memory = \"-5\" }", "wf.toml:11:21: limits.memory: `-5` is not a size; write e.g. \"256MiB\", \"2GiB\""),
        ("limits = { processes = -5 }", "wf.toml:11:24: limits.processes: -5 is not a whole number of at least 1"),
        ("limits = { cpu = 0 }", "wf.toml:11:18: limits.cpu: 0 is not a share of cores above 0 (0.5: half a core)"),
        ("limits = { cpu_time = \"soon\" }", "wf.toml:11:23: `soon` is not a duration"),
    ];
    for (line, expected) in cases {
        let error = invalid(&format!("{HEAD}{step}{line}\n"));
        assert!(error.starts_with(expected), "{error}\nwanted {expected}");
    }
    let cli = Cli::new();
    let huge = cli.workflow(
        "huge.toml",
        &format!("{HEAD}{step}limits = {{ memory = \"4096TiB\" }}\n"),
    );
    let out = cli.run(&["validate", huge.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let warning = out.stderr.replace(huge.to_str().unwrap(), "huge.toml");
    assert!(warning.starts_with("apollo11: warning: huge.toml:11:21: limits.memory: 4503599627370496 bytes is more than this machine's"), "{warning}");
}
