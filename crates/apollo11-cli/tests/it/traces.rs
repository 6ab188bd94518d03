//! The engine's traces: on stderr, filtered by `RUST_LOG` (default `warn`), escaped like
//! every other message, and never on stdout.

use crate::harness::{ran, Cli, Ran};
use std::process::Stdio;

/// `a` succeeds and its compensation fails for good; `b` fails: the run rolls back, the
/// compensation fails (a warning), and the run ends paused.
const UNDO_FAILS: &str = r#"[workflow]
name = "undo"
on_failure = "rollback"
[[steps]]
name = "a"
run = "true"
compensate = "exit 3"
idempotency = "keyed"
retry = { max_attempts = 1 }
[[steps]]
name = "b"
depends_on = ["a"]
run = "exit 1"
idempotency = "natural"
retry = { max_attempts = 1 }
"#;

/// Runs the workflow with `RUST_LOG` as given (unset with `None`) on data dir `data`.
fn run_undo(cli: &Cli, data: &str, rust_log: Option<&str>) -> Ran {
    let wf = cli.workflow("undo.toml", UNDO_FAILS);
    let wf = wf.to_str().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_apollo11"));
    cmd.arg("--data-dir")
        .arg(cli.data.path().join(data))
        .args(["run", wf, "--json"])
        .env_remove("APOLLO11_DATA_DIR")
        .env_remove("APOLLO11_SEGMENT_BYTES");
    match rust_log {
        Some(filter) => cmd.env("RUST_LOG", filter),
        None => cmd.env_remove("RUST_LOG"),
    };
    ran(cmd.stdin(Stdio::null()).output().unwrap())
}

/// The JSON status on stdout, alone: no trace line may reach it.
fn paused_json(out: &Ran) -> serde_json::Value {
    let json: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not only the status: {e}\n{}", out.stdout));
    assert_eq!(json["state"], "paused", "{json}");
    json
}

#[test]
fn traces_go_to_stderr_at_the_level_rust_log_asks_and_warnings_by_default() {
    let cli = Cli::new();
    let quiet = run_undo(&cli, "quiet", None);
    assert_eq!(quiet.code, 1, "{}", quiet.stderr);
    paused_json(&quiet);
    assert!(quiet.stderr.contains("WARN"), "{}", quiet.stderr);
    assert!(
        quiet.stderr.contains("compensation failed"),
        "{}",
        quiet.stderr
    );
    assert!(
        !quiet.stderr.contains("INFO"),
        "warn by default: {}",
        quiet.stderr
    );
    let loud = run_undo(&cli, "loud", Some("apollo11_runtime=info"));
    paused_json(&loud);
    assert!(loud.stderr.contains("engine opened"), "{}", loud.stderr);
    assert!(
        loud.stderr.contains("run{run_id=") && loud.stderr.contains("run finished status=paused"),
        "{}",
        loud.stderr
    );
    let silent = run_undo(&cli, "silent", Some("off"));
    paused_json(&silent);
    assert_eq!(silent.stderr, "", "RUST_LOG=off");
}

#[test]
fn traces_name_a_steps_log_inside_the_data_dir_and_print_no_control_character() {
    let cli = Cli::new();
    // A data dir whose name holds an escape sequence: traces never name it.
    let out = run_undo(&cli, "d\u{1b}[2J\u{7}", None);
    paused_json(&out);
    assert!(out.stderr.contains("compensation failed"), "{}", out.stderr);
    assert!(
        !out.stderr.chars().any(|c| c.is_control() && c != '\n'),
        "{:?}",
        out.stderr
    );
    assert!(
        out.stderr.contains(".compensate.log in the data dir"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("[2J"), "{}", out.stderr);
}

#[test]
fn a_bad_rust_log_is_named_and_the_command_still_runs() {
    let cli = Cli::new();
    let out = run_undo(&cli, "data", Some("foo=["));
    paused_json(&out);
    assert!(
        out.stderr
            .contains(r#"apollo11: RUST_LOG="foo=[" is not a valid filter"#),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(r#"using "warn""#), "{}", out.stderr);
}
