//! Running, crashing, resuming, rolling back, pausing and overriding, through the binary.

use crate::harness::{gone, record, wait_for, Cli};

fn chain(steps: usize, slow: usize) -> String {
    let mut toml = String::from("[workflow]\nname = \"chain\"\n[defaults]\nretry = { max_attempts = 3, initial = \"10ms\" }\n");
    for i in 1..=steps {
        let deps = if i > 1 {
            format!("depends_on = [\"s{}\"]", i - 1)
        } else {
            String::new()
        };
        let run = if i == slow {
            format!("{}; if [ $APOLLO11_ATTEMPT = 1 ]; then echo $$ > slow.pid; touch slow.started; sleep 30; fi", record(&format!("s{i}")))
        } else {
            format!(
                "{}; echo '{{\\\"n\\\": {i}}}' > $APOLLO11_OUTPUT",
                record(&format!("s{i}"))
            )
        };
        toml.push_str(&format!(
            "[[steps]]\nname = \"s{i}\"\nrun = \"{run}\"\nidempotency = \"keyed\"\n{deps}\n"
        ));
    }
    toml
}

#[test]
fn a_happy_run_succeeds_with_the_designed_status_json() {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", &chain(3, 0));
    let out = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "happy"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("run happy (chain): succeeded"),
        "{}",
        out.stdout
    );
    let status = cli.status_json("happy");
    assert_eq!(status["run_id"], "happy");
    assert_eq!(status["state"], "succeeded");
    assert_eq!(
        (
            &status["steps"]["s2"]["state"],
            &status["steps"]["s2"]["attempt"]
        ),
        (&serde_json::json!("succeeded"), &serde_json::json!(1))
    );
    assert_eq!(cli.ledger(), ["s1 1", "s2 1", "s3 1"]);
    let events = cli.events_json("happy");
    // run_created, then s1's started, placed (its process group), what it used, and
    // succeeded.
    assert_eq!(events[2]["kind"], "placed");
    assert_eq!(events[3]["kind"], "attempt_usage");
    assert_eq!(
        events[4]["payload"],
        serde_json::json!({"n": 1}),
        "a step's JSON output is its payload"
    );
    assert_eq!(events[4]["kind"], "succeeded");
    let runs = cli.run(&["runs", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(runs.stdout.trim()).unwrap();
    assert_eq!(
        (
            listed["run_id"].as_str(),
            listed["state"].as_str(),
            listed["steps_done"].as_u64()
        ),
        (Some("happy"), Some("succeeded"), Some(3))
    );
    let table = cli.run(&["runs"]).stdout;
    assert!(
        table.lines().nth(1).is_some_and(|l| l.starts_with("happy")
            && l.contains("succeeded")
            && l.contains("3/3")),
        "{table}"
    );
}

#[test]
fn kill_9_during_step_3_then_resume_reruns_only_step_3() {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", &chain(5, 3));
    let mut child = cli.spawn(&["run", wf.to_str().unwrap(), "--run-id", "crash"]);
    wait_for(&cli.file("slow.started"));
    child.kill().unwrap();
    child.wait().unwrap();
    // The orphaned step of the killed engine is still sleeping; a real operator's machine
    // would reap it; the test does, to leave nothing behind.
    let orphan: i32 = std::fs::read_to_string(cli.file("slow.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(orphan),
        nix::sys::signal::Signal::SIGKILL,
    );
    let plan = cli.run(&["plan", "crash"]);
    assert!(
        plan.stdout.contains("mark s3 attempt 1 as interrupted")
            && plan.stdout.contains("rerun s3 as attempt 2"),
        "{}",
        plan.stdout
    );
    let out = cli.run(&["resume", "crash"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        cli.ledger(),
        ["s1 1", "s2 1", "s3 1", "s3 2", "s4 1", "s5 1"],
        "s1 and s2 are not rerun"
    );
    let s3 = &cli.status_json("crash")["steps"]["s3"];
    assert_eq!(
        (&s3["state"], &s3["attempt"]),
        (&serde_json::json!("succeeded"), &serde_json::json!(2))
    );
    let interrupted = cli
        .events_json("crash")
        .into_iter()
        .find(|e| e["kind"] == "interrupted")
        .unwrap();
    assert_eq!(
        (&interrupted["step"], &interrupted["attempt"]),
        (&serde_json::json!("s3"), &serde_json::json!(1))
    );
}

#[test]
fn rollback_on_a_diamond_records_compensations_in_reverse_order() {
    let cli = Cli::new();
    let step = |name: &str, deps: &str, run: &str| {
        format!("[[steps]]\nname = \"{name}\"\nrun = \"{run}\"\nidempotency = \"keyed\"\ncompensate = \"echo undo-{name} >> undo\"\ndepends_on = [{deps}]\n")
    };
    let toml = format!(
        "[workflow]\nname = \"diamond\"\non_failure = \"rollback\"\n{}{}{}{}[[steps]]\nname = \"e\"\nrun = \"exit 5\"\nidempotency = \"natural\"\nnon_retryable_exit_codes = [5]\ndepends_on = [\"d\"]\n",
        step("a", "", "true"),
        step("b", "\"a\"", "true"),
        step("c", "\"a\"", "true"),
        step("d", "\"b\", \"c\"", "true")
    );
    let wf = cli.workflow("wf.toml", &toml);
    let out = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "rb"]);
    assert_eq!(
        out.code, 1,
        "a rolled-back run exits 1: {}{}",
        out.stdout, out.stderr
    );
    assert_eq!(cli.status_json("rb")["state"], "rolled_back");
    let order: Vec<String> = cli
        .events_json("rb")
        .iter()
        .filter(|e| e["kind"] == "compensating" || e["kind"] == "compensated")
        .map(|e| {
            format!(
                "{}:{}",
                e["step"].as_str().unwrap(),
                e["kind"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(order[..2], ["d:compensating", "d:compensated"]);
    assert_eq!(
        order[2..4],
        ["b:compensating", "c:compensating"],
        "b and c in parallel"
    );
    assert_eq!(order[6..], ["a:compensating", "a:compensated"]);
    let undo = std::fs::read_to_string(cli.file("undo")).unwrap();
    assert!(
        undo.starts_with("undo-d\n") && undo.ends_with("undo-a\n"),
        "{undo}"
    );
}

#[test]
fn pause_then_override_then_resume_continues_downstream() {
    let cli = Cli::new();
    let toml = format!(
        "[workflow]\nname = \"p\"\non_failure = \"pause\"\n[[steps]]\nname = \"a\"\nrun = \"{}\"\nidempotency = \"natural\"\n[[steps]]\nname = \"b\"\nrun = \"exit 9\"\nidempotency = \"natural\"\nnon_retryable_exit_codes = [9]\ndepends_on = [\"a\"]\n[[steps]]\nname = \"c\"\nrun = \"{}\"\nidempotency = \"natural\"\ndepends_on = [\"b\"]\n",
        record("a"),
        record("c")
    );
    let wf = cli.workflow("wf.toml", &toml);
    let out = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "p1"]);
    assert_eq!(out.code, 1);
    assert_eq!(cli.status_json("p1")["state"], "paused");
    assert!(
        out.stdout.contains("exited with code 9"),
        "the failure is shown: {}",
        out.stdout
    );
    let over = cli.run(&[
        "override",
        "p1",
        "b",
        "--to",
        "succeeded",
        "--reason",
        "fixed the table by hand",
        "--by",
        "alice",
    ]);
    assert_eq!(over.code, 0, "{}", over.stderr);
    let out = cli.run(&["resume", "p1"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(cli.ledger(), ["a 1", "c 1"]);
    let events = cli.run(&["events", "p1"]).stdout;
    assert!(
        events.contains("manual_override(1) -> succeeded by alice: fixed the table by hand"),
        "{events}"
    );
}

#[test]
fn a_step_past_its_timeout_is_failed_and_its_process_group_killed() {
    let cli = Cli::new();
    let toml = "[workflow]\nname = \"t\"\n[[steps]]\nname = \"slow\"\nrun = \"sh -c 'echo $$ > child.pid; sleep 30' & echo $! > bg.pid; wait\"\nidempotency = \"natural\"\ntimeout = \"300ms\"\nretry = { max_attempts = 1 }\n";
    let wf = cli.workflow("wf.toml", toml);
    let out = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "t1"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let failed = cli
        .events_json("t1")
        .into_iter()
        .find(|e| e["kind"] == "failed")
        .unwrap();
    assert_eq!(failed["error"], "timeout");
    let grandchild: i32 = std::fs::read_to_string(cli.file("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        gone(grandchild),
        "the step's whole process group was killed"
    );
}

#[test]
fn a_second_run_on_a_busy_data_dir_exits_4_while_status_still_works() {
    let cli = Cli::new();
    let toml = "[workflow]\nname = \"busy\"\n[[steps]]\nname = \"hold\"\nrun = \"touch held; while [ ! -f release ]; do sleep 0.05; done\"\nidempotency = \"natural\"\n";
    let wf = cli.workflow("wf.toml", toml);
    let mut first = cli.spawn(&["run", wf.to_str().unwrap(), "--run-id", "first"]);
    wait_for(&cli.file("held"));
    let lock = |cli: &Cli| {
        use std::os::unix::fs::MetadataExt;
        let path = cli.data.path().join("LOCK");
        let meta = std::fs::metadata(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        (bytes, meta.mode(), meta.ctime(), meta.ctime_nsec())
    };
    let held = lock(&cli);
    let second = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "second"]);
    assert_eq!(second.code, 4, "{}", second.stderr);
    assert!(
        second.stderr.contains("locked by another writer"),
        "{}",
        second.stderr
    );
    // T8: the refused writer wrote nothing, not even a `chmod` of the lock file.
    assert!(lock(&cli) == held, "the refused writer touched LOCK");
    assert!(!cli.data.path().join("logs/second").exists());
    let status = cli.run(&["status", "first", "--json"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(status.stdout.contains("\"running\""), "{}", status.stdout);
    std::fs::write(cli.file("release"), "").unwrap();
    assert!(first.wait().unwrap().success());
}

/// Ctrl-C, SIGTERM (`timeout`, systemd, Kubernetes) and SIGHUP (the terminal was closed)
/// stop the steps' process groups and leave the run to `resume`, with exit 130.
fn a_signal_stops_the_steps_and_the_run_resumes(signal: nix::sys::signal::Signal) {
    let cli = Cli::new();
    let toml = format!(
        "[workflow]\nname = \"int\"\n[[steps]]\nname = \"long\"\nrun = \"{}; if [ $APOLLO11_ATTEMPT = 1 ]; then echo $$ > long.pid; touch long.started; sleep 30; fi\"\nidempotency = \"keyed\"\n",
        record("long")
    );
    let wf = cli.workflow("wf.toml", &toml);
    let child = cli.spawn(&["run", wf.to_str().unwrap(), "--run-id", "int"]);
    wait_for(&cli.file("long.started"));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let out = crate::harness::ran(child.wait_with_output().unwrap());
    assert_eq!(out.code, 130, "{signal}: {}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("apollo11 resume int"), "{}", out.stderr);
    let step_pid: i32 = std::fs::read_to_string(cli.file("long.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(gone(step_pid), "{signal}: the interrupted step was killed");
    assert_eq!(
        cli.status_json("int")["state"],
        "running",
        "left for resume"
    );
    let out = cli.run(&["resume", "int"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(cli.ledger(), ["long 1", "long 2"]);
}

#[test]
fn ctrl_c_stops_the_steps_and_the_run_resumes() {
    a_signal_stops_the_steps_and_the_run_resumes(nix::sys::signal::Signal::SIGINT);
}

#[test]
fn sigterm_stops_the_steps_and_the_run_resumes() {
    a_signal_stops_the_steps_and_the_run_resumes(nix::sys::signal::Signal::SIGTERM);
}

#[test]
fn sighup_stops_the_steps_and_the_run_resumes() {
    a_signal_stops_the_steps_and_the_run_resumes(nix::sys::signal::Signal::SIGHUP);
}

#[test]
fn twelve_hundred_independent_steps_under_max_concurrency_1500_all_run() {
    let cli = Cli::new();
    let mut toml = String::from("[workflow]\nname = \"wide\"\nmax_concurrency = 1500\n");
    for i in 0..1_200 {
        toml.push_str(&format!(
            "[[steps]]\nname = \"s{i:04}\"\nrun = \"true\"\nidempotency = \"natural\"\n"
        ));
    }
    let wf = cli.workflow("wf.toml", &toml);
    let out = cli.run_within(
        300,
        &["run", wf.to_str().unwrap(), "--run-id", "wide", "--json"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let status = cli.status_json("wide");
    assert_eq!(status["state"], "succeeded");
    let steps = status["steps"].as_object().unwrap();
    assert_eq!(steps.len(), 1_200);
    assert!(steps.values().all(|s| s["state"] == "succeeded"));
}
