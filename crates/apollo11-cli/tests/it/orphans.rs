//! What an interrupted or timed-out attempt leaves behind, with real processes and signals:
//! its checkpoint marker reaches the next attempt (Ctrl-C, `kill -9` of `apollo11`, a
//! timeout), and an orphan that a killed `apollo11` left running is stopped before its
//! step is rerun or compensated.

use crate::harness::{gone, wait_for, Cli};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::time::Duration;

/// A checkpoint step: attempt 1 writes its marker, then works for 30 s (or past a timeout);
/// every attempt writes what it was handed (variable and file) to `seen`.
fn checkpoint(timeout: &str) -> String {
    format!(
        r#"[workflow]
name = "ck"
[[steps]]
name = "ck"
idempotency = "checkpoint"
timeout = "{timeout}"
retry = {{ max_attempts = 3, initial = "10ms" }}
run = '''
if [ -n "$APOLLO11_PREVIOUS_PAYLOAD_FILE" ]; then f=$(cat "$APOLLO11_PREVIOUS_PAYLOAD_FILE"); else f=none; fi
echo "$APOLLO11_ATTEMPT ${{APOLLO11_PREVIOUS_PAYLOAD:-none}} $f" >> seen
if [ "$APOLLO11_ATTEMPT" = 1 ]; then printf '{{"chunks_done":7}}' > "$APOLLO11_OUTPUT"; echo $$ > ck.pid; touch ck.started; sleep 30; fi
'''
"#
    )
}

const MARKED: [&str; 2] = ["1 none none", r#"2 {"chunks_done":7} {"chunks_done":7}"#];

fn lines(cli: &Cli, name: &str) -> Vec<String> {
    std::fs::read_to_string(cli.file(name))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn pid(cli: &Cli, name: &str) -> i32 {
    std::fs::read_to_string(cli.file(name))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Whether any process of group `pgid` still runs (zombies have ended), after a bounded
/// moment for a SIGKILL to take effect.
fn group_runs(pgid: i32) -> bool {
    let runs = || {
        std::fs::read_dir("/proc").unwrap().any(|e| {
            let stat = std::fs::read_to_string(e.unwrap().path().join("stat")).unwrap_or_default();
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.get(2) == Some(&pgid.to_string().as_str()) && fields.first() != Some(&"Z")
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while runs() {
        if std::time::Instant::now() > deadline {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Starts `run`, waits for `started`, stops `apollo11` with `signal`, and returns its exit.
fn interrupt(cli: &Cli, wf: &str, run: &str, started: &str, signal: Signal) -> i32 {
    let child = cli.spawn(&["run", wf, "--run-id", run]);
    wait_for(&cli.file(started));
    kill(Pid::from_raw(child.id() as i32), signal).unwrap();
    crate::harness::ran(child.wait_with_output().unwrap()).code
}

fn marker_survives(signal: Signal, exit: i32) {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", &checkpoint("none"));
    let code = interrupt(&cli, wf.to_str().unwrap(), "ck", "ck.started", signal);
    assert_eq!(code, exit, "{signal}");
    let out = cli.run(&["resume", "ck"]);
    assert_eq!(out.code, 0, "{signal}: {}{}", out.stdout, out.stderr);
    assert_eq!(lines(&cli, "seen"), MARKED, "{signal}");
    assert!(gone(pid(&cli, "ck.pid")), "{signal}: attempt 1 was stopped");
    let interrupted = cli
        .events_json("ck")
        .into_iter()
        .find(|e| e["kind"] == "interrupted")
        .unwrap();
    assert_eq!(
        interrupted["payload"],
        serde_json::json!({"chunks_done": 7})
    );
}

#[test]
fn a_checkpoint_marker_survives_ctrl_c() {
    marker_survives(Signal::SIGINT, 130);
}

#[test]
fn a_checkpoint_marker_survives_kill_9_of_apollo11() {
    marker_survives(Signal::SIGKILL, -1);
}

#[test]
fn a_checkpoint_marker_survives_a_timeout() {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", &checkpoint("1s"));
    let out = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "ck"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(lines(&cli, "seen"), MARKED);
    let failed = cli
        .events_json("ck")
        .into_iter()
        .find(|e| e["kind"] == "failed")
        .unwrap();
    assert_eq!(failed["error"], "timeout");
    assert_eq!(failed["payload"], serde_json::json!({"chunks_done": 7}));
}

/// A payment: attempt 1 of `charge` takes 10 s (it is the one `apollo11` is killed in),
/// then appends `charge N` to `money`; its compensation appends `refund`.
const PAYMENT: &str = r#"[workflow]
name = "pay"
on_failure = "rollback"
[[steps]]
name = "charge"
idempotency = "compensate"
retry = { max_attempts = 3, initial = "10ms" }
run = '''
echo "start $APOLLO11_ATTEMPT" >> money
if [ "$APOLLO11_ATTEMPT" = 1 ]; then echo $$ > charge.pid; touch charge.started; sleep 10; fi
echo "charge $APOLLO11_ATTEMPT" >> money
'''
compensate = "echo refund >> money"
"#;

/// Kills `apollo11 -9` while attempt 1 of `charge` runs; returns the orphan's group.
fn orphaned_charge(cli: &Cli) -> i32 {
    let wf = cli.workflow("wf.toml", PAYMENT);
    interrupt(
        cli,
        wf.to_str().unwrap(),
        "pay",
        "charge.started",
        Signal::SIGKILL,
    );
    let orphan = pid(cli, "charge.pid");
    assert!(
        group_runs(orphan),
        "the orphan outlives the killed apollo11"
    );
    let placed = cli
        .events_json("pay")
        .into_iter()
        .find(|e| e["kind"] == "placed")
        .expect("the attempt's place is in the log");
    let handle: serde_json::Value =
        serde_json::from_str(placed["handle"].as_str().unwrap()).unwrap();
    assert_eq!(handle["pgid"], orphan);
    orphan
}

#[test]
fn after_kill_9_a_rollback_stops_the_orphan_before_the_refund() {
    let cli = Cli::new();
    let orphan = orphaned_charge(&cli);
    let out = cli.run(&["rollback", "pay", "--reason", "refund it"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = cli.run(&["resume", "pay"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert_eq!(cli.status_json("pay")["state"], "rolled_back");
    assert!(!group_runs(orphan), "the orphan was stopped");
    assert_eq!(lines(&cli, "money"), ["start 1", "refund"]);
}

#[test]
fn after_kill_9_a_resume_stops_the_orphan_before_the_rerun() {
    let cli = Cli::new();
    let orphan = orphaned_charge(&cli);
    let out = cli.run(&["resume", "pay"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(!group_runs(orphan), "the orphan was stopped");
    // `compensate` class: the interrupted attempt is undone before it is run again.
    assert_eq!(
        lines(&cli, "money"),
        ["start 1", "refund", "start 2", "charge 2"]
    );
}
