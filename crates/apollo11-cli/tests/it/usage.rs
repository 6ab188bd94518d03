//! What each try used, with real processes: peak memory, CPU and wall time under a cgroup,
//! CPU and wall time without one, recorded in `attempt_usage` events and shown by `status` and `events`, a try
//! stopped by its timeout measured up to the kill, on the engine's machine or on a worker;
//! and a step killed as `oom` retried with twice the memory, the limit it ran with recorded.

use crate::harness::Cli;
use crate::limits::cgroups;
use serde_json::Value;

const HEAD: &str = "[workflow]\nname = \"usage\"\non_failure = \"pause\"\n\n[defaults]\nretry = { max_attempts = 1 }\n";

/// The usage of each try of `step` in the status JSON.
fn used<'a>(status: &'a Value, step: &str) -> &'a Vec<Value> {
    status["steps"][step]["usage"]
        .as_array()
        .unwrap_or_else(|| panic!("no usage for {step}: {status}"))
}

fn figure(usage: &Value, key: &str) -> u64 {
    usage[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key}: {usage}"))
}

#[test]
fn a_try_under_a_cgroup_records_its_peak_memory_cpu_and_wall_time() {
    if !cgroups() {
        return;
    }
    let cli = Cli::new();
    let steps = r#"
[[steps]]
name = "hold"
idempotency = "natural"
limits = { memory = "512MiB" }
run = "python3 -c 'b = bytearray(100 << 20); b[::4096] = b\"x\" * len(b[::4096])'"

[[steps]]
name = "spin"
idempotency = "natural"
limits = { processes = 64 }
run = "python3 -c 'import time\nwhile time.process_time() < 0.4: sum(range(100000))'"

[[steps]]
name = "spin_free"
idempotency = "natural"
run = "python3 -c 'import time\nwhile time.process_time() < 0.4: sum(range(100000))'"

[[steps]]
name = "nap"
idempotency = "natural"
run = "sleep 0.3"
"#;
    let wf = cli.workflow("wf.toml", &format!("{HEAD}{steps}"));
    let out = cli.run_within(120, &["run", wf.to_str().unwrap(), "--run-id", "u1"]);
    let status = cli.status_json("u1");
    assert_eq!(out.code, 0, "{status}");
    let hold = &used(&status, "hold")[0];
    assert_eq!(
        (&hold["isolation"], hold["attempt"].as_u64()),
        (&"cgroup".into(), Some(1))
    );
    assert!(figure(hold, "peak_memory_bytes") >= 100 << 20, "{hold}");
    assert_eq!(figure(hold, "memory_limit_bytes"), 512 << 20, "{hold}");
    let spin = &used(&status, "spin")[0];
    assert!(figure(spin, "cpu_user_ms") >= 200, "{spin}");
    let nap = &used(&status, "nap")[0];
    assert_eq!(nap["isolation"], "none", "{nap}");
    assert!(figure(nap, "wall_ms") >= 300, "{nap}");
    assert!(
        nap["peak_memory_bytes"].is_null(),
        "no cgroup, no peak: {nap}"
    );
    let free = &used(&status, "spin_free")[0];
    assert_eq!(free["isolation"], "none", "{free}");
    assert!(
        figure(free, "cpu_user_ms") >= 200,
        "read as it ended: {free}"
    );
    let text = cli.run(&["status", "u1"]).stdout;
    assert!(text.contains("used:") && text.contains("peak "), "{text}");
    let events = cli.events_json("u1");
    let kinds: Vec<&str> = (events.iter())
        .filter(|e| e["step"] == "hold")
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["started", "placed", "attempt_usage", "succeeded"]);
    let lines = cli.run(&["events", "u1"]).stdout;
    assert!(lines.contains("attempt_usage(1): wall "), "{lines}");
}

#[test]
fn a_try_stopped_by_its_timeout_records_what_it_used_up_to_the_kill() {
    let cli = Cli::new();
    let spin = "while :; do :; done";
    let mut steps = format!(
        r#"
[[steps]]
name = "nap"
idempotency = "natural"
timeout = "1s"
run = "sleep 5"

[[steps]]
name = "spin"
idempotency = "natural"
timeout = "1s"
run = "{spin}"
"#
    );
    let held = cgroups();
    if held {
        steps += &format!(
            "\n[[steps]]\nname = \"spin_held\"\nidempotency = \"natural\"\ntimeout = \"1s\"\nlimits = {{ processes = 64 }}\nrun = \"{spin}\"\n"
        );
    }
    let wf = cli.workflow("wf.toml", &format!("{HEAD}{steps}"));
    cli.run_within(60, &["run", wf.to_str().unwrap(), "--run-id", "t1"]);
    let status = cli.status_json("t1");
    let nap = &used(&status, "nap")[0];
    assert_eq!(nap["isolation"], "none", "{nap}");
    let wall = figure(nap, "wall_ms");
    assert!((700..3_000).contains(&wall), "about the 1 s timeout: {nap}");
    let spin = &used(&status, "spin")[0];
    assert!(figure(spin, "cpu_user_ms") > 0, "{spin}");
    if held {
        let spin = &used(&status, "spin_held")[0];
        assert_eq!(spin["isolation"], "cgroup", "{spin}");
        assert!(figure(spin, "cpu_user_ms") > 0, "{spin}");
    }
    let kinds: Vec<String> = (cli.events_json("t1").iter())
        .filter(|e| e["step"] == "nap")
        .map(|e| {
            format!(
                "{} {}",
                e["kind"].as_str().unwrap_or(""),
                e["class"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        kinds,
        ["started ", "placed ", "attempt_usage ", "failed timeout"],
        "the usage goes with the failure"
    );
}

#[test]
fn a_try_on_a_worker_stopped_by_its_timeout_records_what_it_used_up_to_the_kill() {
    // Under a cgroup its CPU time is counted; without one, a killed try's is unknown (the
    // worker's gate never waits for the command it ran).
    let held = cgroups();
    let limits = if held {
        "limits = { processes = 64 }"
    } else {
        ""
    };
    let workflow = format!(
        r#"
[workflow]
name = "placed"
on_failure = "pause"

[[steps]]
name = "spin"
idempotency = "natural"
timeout = "1s"
retry = {{ max_attempts = 1 }}
on = {{ role = "spin" }}
{limits}
run = "while :; do :; done"
"#
    );
    let mut s = crate::workers::Setup::with(&workflow);
    s.worker("w1", "role=spin");
    s.start("t1");
    let spin = || {
        (s.cli.events_json("t1").into_iter())
            .filter(|e| e["step"] == "spin")
            .map(|e| {
                let kind = e["kind"].as_str().unwrap_or_default();
                format!("{kind} {}", e["class"].as_str().unwrap_or_default())
            })
            .collect::<Vec<String>>()
    };
    crate::harness::wait_until("the try timed out", || {
        spin().iter().any(|k| k.starts_with("failed"))
    });
    assert_eq!(
        spin(),
        ["started ", "placed ", "attempt_usage ", "failed timeout"],
        "the worker's measure goes with the failure"
    );
    let used = &s.run("t1")["steps"]["spin"]["usage"][0];
    let wall = figure(used, "wall_ms");
    assert!(
        (700..5_000).contains(&wall),
        "about the 1 s timeout: {used}"
    );
    match held {
        true => assert!(figure(used, "cpu_user_ms") > 0, "{used}"),
        false => assert!(used["cpu_user_ms"].is_null(), "{used}"),
    }
}

#[test]
fn a_step_killed_as_oom_runs_again_with_twice_the_memory_and_succeeds() {
    if !cgroups() {
        return;
    }
    let cli = Cli::new();
    let steps = r#"
[[steps]]
name = "grow"
idempotency = "natural"
limits = { memory = "256MiB" }
retry = { max_attempts = 3, initial = "10ms", class = { oom = { memory_factor = 2.0, memory_max = "2GiB" } } }
run = "python3 -c 'b = bytearray(400 << 20); b[::4096] = b\"x\" * len(b[::4096])'"
"#;
    let wf = cli.workflow("wf.toml", &format!("{HEAD}{steps}"));
    let out = cli.run_within(120, &["run", wf.to_str().unwrap(), "--run-id", "o1"]);
    let status = cli.status_json("o1");
    assert_eq!(out.code, 0, "{status}");
    let tries = used(&status, "grow");
    let limits: Vec<u64> = tries
        .iter()
        .map(|u| figure(u, "memory_limit_bytes"))
        .collect();
    assert_eq!(limits, [256 << 20, 512 << 20], "{status}");
    let failed = (cli.events_json("o1").into_iter())
        .find(|e| e["kind"] == "failed")
        .expect("the first attempt failed");
    assert_eq!(failed["class"], "oom", "{failed}");
    let text = cli.run(&["status", "o1"]).stdout;
    assert!(text.contains("limit 512.0 MiB"), "{text}");
}

#[test]
fn a_bad_memory_factor_or_ceiling_is_named_where_it_is_written() {
    let step = "[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n";
    let cases = [
        (
            "retry = { class = { oom = { memory_factor = 0.5 } } }",
            "wf.toml:11:27: retry class `oom`: `memory_factor` must be a number from 1 to 16",
        ),
        (
            "retry = { class = { oom = { memory_max = \"lots\" } } }",
            "wf.toml:11:27: retry class `oom`: `memory_max` must be a size such as \"2GiB\"",
        ),
    ];
    for (line, expected) in cases {
        let error = crate::validation::invalid(&format!("{HEAD}{step}{line}\n"));
        assert!(error.starts_with(expected), "{error}\nwanted {expected}");
    }
}
