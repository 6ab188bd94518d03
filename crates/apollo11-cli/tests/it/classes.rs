//! Failure classes and retry by class, with real shell steps: an author's class retried on
//! its own policy, a failure that repeats itself stopped, a command not found never retried,
//! the class shown by `status` and `events`, and the delay a step or a compensation's try
//! asks for.

use crate::harness::Cli;

const HEAD: &str = "[workflow]\nname = \"classes\"\non_failure = \"pause\"\n";

/// Runs `toml` as run `run` and returns its status JSON.
fn run(cli: &Cli, toml: &str, run: &str) -> (i32, serde_json::Value) {
    let wf = cli.workflow("wf.toml", toml);
    let out = cli.run_within(60, &["run", wf.to_str().unwrap(), "--run-id", run]);
    (out.code, cli.status_json(run))
}

/// The `failed` events of a run, as `events --json` shows them.
fn failures(cli: &Cli, run: &str) -> Vec<serde_json::Value> {
    (cli.events_json(run).into_iter())
        .filter(|e| e["kind"] == "failed")
        .collect()
}

#[test]
fn a_connection_refused_five_times_is_retried_on_the_transient_policy_and_succeeds() {
    let cli = Cli::new();
    let toml = format!(
        r#"{HEAD}
[[classify]]
class = "transient"
exit_codes = [75]
stderr = "connection refused|503"

[defaults.retry]
max_attempts = 2
initial = "10ms"

[defaults.retry.class.transient]
max_attempts = 10
backoff = "fixed"
initial = "10ms"
same_failure_max = 0

[[steps]]
name = "fetch"
idempotency = "natural"
run = '''
if [ "$APOLLO11_ATTEMPT" -le 5 ]; then
  echo "curl: (7) Failed to connect to db port 5432: connection refused" >&2
  exit 7
fi
echo fetched
'''
"#
    );
    let (code, status) = run(&cli, &toml, "t1");
    assert_eq!(
        (code, &status["state"]),
        (0, &"succeeded".into()),
        "{status}"
    );
    assert_eq!(status["steps"]["fetch"]["attempt"], 6);
    let failed = failures(&cli, "t1");
    assert_eq!(failed.len(), 5);
    assert!(
        failed
            .iter()
            .all(|e| e["class"] == "transient" && e["note"].is_null()),
        "{failed:?}"
    );
}

#[test]
fn the_same_error_every_time_stops_after_two_attempts_of_ten_with_the_reason() {
    let cli = Cli::new();
    let toml = format!(
        r#"{HEAD}
[[steps]]
name = "migrate"
idempotency = "natural"
retry = {{ max_attempts = 10, initial = "10ms" }}
run = "echo \"$(date +%s%N) error: column users.email does not exist\" >&2; exit 3"
"#
    );
    let (code, status) = run(&cli, &toml, "d1");
    assert_eq!((code, &status["state"]), (1, &"paused".into()), "{status}");
    let step = &status["steps"]["migrate"];
    assert_eq!(
        (&step["attempt"], &step["error_class"]),
        (&2.into(), &"exit:3".into())
    );
    let paused = &status["paused"];
    assert_eq!(paused["class"], "exit:3");
    let stopped = paused["stopped"].as_str().unwrap();
    assert!(stopped.starts_with("the same failure repeated"), "{paused}");
    let failed = failures(&cli, "d1");
    assert_eq!(failed[0]["note"], serde_json::Value::Null);
    let note = failed[1]["note"].as_str().unwrap();
    assert!(note.starts_with("the same failure repeated"), "{note}");
    let events = cli.run(&["events", "d1"]).stdout;
    assert!(
        events.contains("[exit:3]") && events.contains("stopped: the same failure repeated"),
        "{events}"
    );
    let text = cli.run(&["status", "d1"]).stdout;
    assert!(
        text.contains("class exit:3") && text.contains("[exit:3] exited with code 3"),
        "{text}"
    );
}

#[test]
fn a_command_not_found_is_class_spawn_and_never_retried() {
    let cli = Cli::new();
    let toml = format!(
        "{HEAD}[[steps]]\nname = \"deploy\"\nidempotency = \"natural\"\nretry = {{ max_attempts = 5, initial = \"10ms\" }}\nrun = \"no-such-deploy-tool --now\"\n"
    );
    let (code, status) = run(&cli, &toml, "s1");
    assert_eq!((code, &status["state"]), (1, &"paused".into()), "{status}");
    let step = &status["steps"]["deploy"];
    assert_eq!(
        (&step["attempt"], &step["error_class"]),
        (&1.into(), &"spawn".into())
    );
    assert_eq!(
        status["paused"]["stopped"],
        "class spawn is never retried by default"
    );
    let text = cli.run(&["status", "s1"]).stdout;
    assert!(text.contains("[spawn]"), "{text}");
}

#[test]
fn an_author_class_may_be_never_retried_and_a_missing_folder_is_spawn() {
    let cli = Cli::new();
    let toml = format!(
        r#"{HEAD}
[[classify]]
class = "fatal"
stderr = "(?i)permission denied"

[defaults]
retry = {{ max_attempts = 5, initial = "10ms", class = {{ fatal = "never" }} }}

[[steps]]
name = "write"
idempotency = "natural"
run = "echo 'open /etc/x: Permission denied' >&2; exit 1"

[[steps]]
name = "elsewhere"
idempotency = "natural"
cwd = "missing-folder"
run = "true"
"#
    );
    let (_, status) = run(&cli, &toml, "f1");
    let write = &status["steps"]["write"];
    assert_eq!(
        (&write["attempt"], &write["error_class"]),
        (&1.into(), &"fatal".into()),
        "{status}"
    );
    let elsewhere = &status["steps"]["elsewhere"];
    assert_eq!(elsewhere["error_class"], "spawn", "{status}");
}

#[test]
fn class_rules_and_class_retries_are_checked_where_they_are_written() {
    let cli = Cli::new();
    let step = "[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n";
    let cases = [
        (
            format!("{HEAD}[[classify]]\nclass = \"transient\"\nstderr = \"refused(\"\n{step}"),
            "wf.toml:6:10: class `transient`: `stderr` is not a regular expression that compiles",
        ),
        (
            format!("{HEAD}[[classify]]\nclass = \"timeout\"\nexit_codes = [75]\n{step}"),
            "wf.toml:5:9: class `timeout` is a built-in class",
        ),
        (
            format!("{HEAD}[[classify]]\nclass = \"Transient\"\nexit_codes = [75]\n{step}"),
            "wf.toml:5:9: class `Transient`: a class name is",
        ),
        (
            format!("{HEAD}[[classify]]\nclass = \"t\"\nexit_codes = [0]\n{step}"),
            "wf.toml:6:15: class `t`: exit code 0 is not one a failure exits with",
        ),
        (
            format!("{HEAD}[[classify]]\nclass = \"t\"\n{step}"),
            "wf.toml:4:1: class `t` has neither `exit_codes` nor `stderr`",
        ),
        (
            format!("{HEAD}{step}retry = {{ class = {{ transient = \"never\" }} }}\n"),
            "wf.toml:8:33: retry class `transient` is neither a built-in class",
        ),
        (
            format!("{HEAD}{step}retry = {{ class = {{ spawn = \"sometimes\" }} }}\n"),
            "wf.toml:8:29: retry class `spawn`: write \"never\" or a table",
        ),
        (
            format!("{HEAD}{step}retry = {{ class = {{ timeout = {{ tries = 3 }} }} }}\n"),
            "wf.toml:8:31: retry class `timeout`: `tries` is not a key",
        ),
    ];
    for (toml, expected) in cases {
        let wf = cli.workflow("wf.toml", &toml);
        let out = cli.run(&["validate", wf.to_str().unwrap()]);
        let line = out
            .stderr
            .trim()
            .strip_prefix("apollo11: ")
            .unwrap_or(&out.stderr)
            .replace(wf.to_str().unwrap(), "wf.toml");
        assert_eq!(out.code, 2, "{toml}\n{line}");
        assert!(
            line.starts_with(expected),
            "got   {line}\nwant  {expected}…"
        );
    }
}

#[test]
fn a_step_asks_for_its_next_attempts_delay_in_its_retry_after_file() {
    let cli = Cli::new();
    let toml = format!(
        r#"{HEAD}
[[steps]]
name = "poll"
idempotency = "natural"
retry = {{ max_attempts = 3, backoff = "fixed", initial = "1h", max = "1h" }}
run = '''
if [ "$APOLLO11_ATTEMPT" -eq 1 ]; then
  echo 200ms > "$APOLLO11_RETRY_AFTER_FILE"
  echo "not ready yet, attempt $APOLLO11_ATTEMPT" >&2
  exit 1
fi
'''
"#
    );
    let (code, status) = run(&cli, &toml, "r1");
    assert_eq!(
        (code, &status["state"]),
        (0, &"succeeded".into()),
        "{status}"
    );
    let failed = failures(&cli, "r1");
    assert_eq!(failed[0]["note"], "retry after 200 ms, as the step asked");
}

#[test]
fn a_compensations_try_asks_for_the_next_ones_delay_in_its_retry_after_file() {
    let cli = Cli::new();
    let toml = r#"
[workflow]
name = "undo"
on_failure = "rollback"

[[steps]]
name = "a"
idempotency = "keyed"
run = "true"
retry = { max_attempts = 3, backoff = "fixed", initial = "10ms", max = "5s" }
compensate = '''
if [ ! -e undo-tried ]; then
  touch undo-tried
  echo 2 > "$APOLLO11_RETRY_AFTER_FILE"
  echo "bucket locked" >&2
  exit 1
fi
'''

[[steps]]
name = "b"
idempotency = "natural"
depends_on = ["a"]
run = "exit 5"
non_retryable_exit_codes = [5]
"#;
    let (_, status) = run(&cli, toml, "c1");
    assert_eq!(status["state"], "rolled_back", "{status}");
    let events = cli.events_json("c1");
    let of_a = |kind: &str| -> Vec<&serde_json::Value> {
        (events.iter())
            .filter(|e| e["step"] == "a" && e["kind"] == kind)
            .collect()
    };
    let failed = of_a("compensation_failed");
    assert_eq!(failed.len(), 1, "{events:?}");
    assert_eq!(failed[0]["note"], "retry after 2000 ms, as the step asked");
    assert_eq!(failed[0]["class"], "exit:1");
    let tries = of_a("compensating");
    let at = |e: &serde_json::Value| e["at_ms"].as_u64().unwrap();
    let waited = at(tries[1]) - at(failed[0]);
    assert!(
        waited >= 1_800,
        "the second try {waited} ms after the first failed"
    );
}
