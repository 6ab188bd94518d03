//! `apollo11 rerun`: a step (and the steps after it) run again, compensated first in reverse
//! topological order; `plan --rerun` says so first; refused while a step of the set runs;
//! carried out exactly once across a kill -9.

use crate::harness::{api, wait_until, Cli, TOKEN};
use crate::killed::kill_9_once;
use crate::serve::{serve, state};

/// `a`, then `b` and `c`, then `d`; each appends `run-STEP` to `log` and, but `c`, has a
/// compensation that appends `undo-STEP`. `d`'s attempts after the first touch `d.N` and
/// wait for the file `gate`.
const DIAMOND: &str = r#"[workflow]
name = "diamond"
[defaults]
retry = { max_attempts = 1 }
[[steps]]
name = "a"
idempotency = "keyed"
run = "echo run-a >> log"
compensate = "echo undo-a >> log"
[[steps]]
name = "b"
depends_on = ["a"]
idempotency = "keyed"
run = "echo run-b >> log"
compensate = "echo undo-b >> log"
[[steps]]
name = "c"
depends_on = ["a"]
idempotency = "natural"
run = "echo run-c >> log"
[[steps]]
name = "d"
depends_on = ["b", "c"]
idempotency = "keyed"
run = '''
echo run-d >> log
if [ "$APOLLO11_ATTEMPT" -gt 1 ]; then touch "d.$APOLLO11_ATTEMPT"; while [ ! -f gate ]; do sleep 0.02; done; fi
'''
compensate = "echo undo-d >> log"
"#;

fn log(cli: &Cli) -> Vec<String> {
    let text = std::fs::read_to_string(cli.file("log")).unwrap_or_default();
    text.lines().map(str::to_owned).collect()
}

/// Runs `DIAMOND` as run `r` to its success, then asks a downstream rerun of `a`.
fn succeeded_then_rerun(cli: &Cli) {
    let wf = cli.workflow("diamond.toml", DIAMOND);
    let out = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "r"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let asked = cli.run(&[
        "rerun",
        "r",
        "a",
        "--downstream",
        "--reason",
        "bad input",
        "--by",
        "alice",
    ]);
    assert_eq!(asked.code, 0, "{}", asked.stderr);
    assert!(
        asked
            .stdout
            .contains("rerun of a recorded, by alice (bad input)"),
        "{}",
        asked.stdout
    );
}

/// The log after the first run: compensations of `d`, `b`, `a` (the DAG's reverse), then
/// `a`, `b` and `c` (either order), `d`, each once.
fn assert_rerun_once(cli: &Cli) {
    let log = log(cli);
    assert_eq!(log.len(), 4 + 3 + 4, "{log:?}");
    let (undo, again) = log[4..].split_at(3);
    assert_eq!(undo, ["undo-d", "undo-b", "undo-a"], "{log:?}");
    let mut middle = again[1..3].to_vec();
    middle.sort();
    assert_eq!(
        (again[0].as_str(), middle, again[3].as_str()),
        (
            "run-a",
            vec!["run-b".to_owned(), "run-c".to_owned()],
            "run-d"
        ),
        "{log:?}"
    );
    assert_eq!(state(cli, "r"), "succeeded");
}

#[test]
fn a_downstream_rerun_of_a_succeeded_run_compensates_in_reverse_order_then_runs_again() {
    let cli = Cli::new();
    std::fs::write(cli.file("gate"), "").unwrap();
    let wf = cli.workflow("diamond.toml", DIAMOND);
    assert_eq!(
        cli.run(&["run", wf.to_str().unwrap(), "--run-id", "r"])
            .code,
        0
    );
    let plan = cli.run(&["plan", "r", "--rerun", "a", "--downstream"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    for wanted in [
        "`apollo11 rerun r a --downstream` would:",
        "compensate, in this order: d, b, a",
        "run again, each with a fresh budget of attempts: a, b, c, d",
        "(nothing was changed)",
    ] {
        assert!(
            plan.stdout.contains(wanted),
            "{wanted:?} in {}",
            plan.stdout
        );
    }
    let alone = cli.run(&["plan", "r", "--rerun", "c"]).stdout;
    assert!(!alone.contains("compensate"), "{alone}");
    let asked = cli.run(&["rerun", "r", "a", "--downstream", "--reason", "bad input"]);
    assert_eq!(asked.code, 0, "{}", asked.stderr);
    let out = cli.run(&["resume", "r"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_rerun_once(&cli);
    let events = cli.run(&["events", "r"]).stdout;
    assert!(
        events.contains(
            "rerun_requested(0) by operator: bad input; runs again: a, b, c, d, compensated first: d, b, a"
        ),
        "{events}"
    );
    let steps = &cli.status_json("r")["steps"];
    for step in ["a", "b", "c", "d"] {
        assert_eq!(steps[step]["attempt"], 2, "{step}");
    }
}

#[test]
fn a_rerun_cut_by_a_kill_9_is_finished_once_by_resume() {
    let cli = Cli::new();
    succeeded_then_rerun(&cli);
    kill_9_once(&cli, &["resume", "r"], "d.2");
    std::fs::write(cli.file("gate"), "").unwrap();
    let out = cli.run(&["resume", "r"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let log = log(&cli);
    assert_eq!(log.last().map(String::as_str), Some("run-d"), "{log:?}");
    // `d` ran again after the kill (its interrupted attempt is not spent); nothing else did.
    let mut once = log.clone();
    once.remove(log.len() - 2);
    std::fs::write(cli.file("log"), once.join("\n") + "\n").unwrap();
    assert_rerun_once(&cli);
    let reruns = cli.events_json("r");
    let reruns = reruns.iter().filter(|e| e["kind"] == "rerun_requested");
    assert_eq!(reruns.count(), 1);
}

#[test]
fn a_rerun_is_refused_while_a_step_of_its_set_runs_and_reaches_the_server() {
    let cli = Cli::new();
    let wf = cli.workflow("diamond.toml", DIAMOND);
    assert_eq!(
        cli.run(&["run", wf.to_str().unwrap(), "--run-id", "r"])
            .code,
        0
    );
    let (mut server, address) = serve(&cli);
    let asked = cli.run(&["rerun", "r", "d", "--reason", "again"]);
    assert_eq!(asked.code, 0, "{}", asked.stderr);
    assert!(
        asked.stdout.contains("the server drives the run on"),
        "{}",
        asked.stdout
    );
    wait_until("d runs again", || cli.file("d.2").exists());
    let refused = cli.run(&["rerun", "r", "b", "--downstream", "--reason", "x"]);
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.contains(
            "cannot rerun step `b` of run `r`: step `d` is running: wait until it is done"
        ),
        "{}",
        refused.stderr
    );
    let plan = |path: &str| {
        let answer = api(&address, TOKEN, path, None);
        let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
        (answer.status, body)
    };
    let (status, body) = plan("/api/v1/runs/r/steps/b/rerun?downstream=true");
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &"step_at_work".into())
    );
    let (status, body) = plan("/api/v1/runs/r/steps/a/rerun");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        serde_json::json!({"steps": ["a"], "compensate": ["a"]})
    );
    std::fs::write(cli.file("gate"), "").unwrap();
    wait_until("r succeeds", || state(&cli, "r") == "succeeded");
    let log = log(&cli);
    assert_eq!(log[4..], ["undo-d", "run-d"], "{log:?}");
    server.kill().unwrap();
}
