//! Waiting steps through `apollo11 serve` and the command line: 1,000 runs waiting on a
//! signal hold no process and no slot, survive `kill -9` of the server and each finishes
//! once its signal arrives; a timer survives a restart in the middle and fires once; a
//! signal's data reaches the dependent step; a signal to a step not waiting is refused
//! (exit 2) and appends nothing.

use crate::harness::{wait_until, Cli};
use crate::serve::{serve, state};
use apollo11_client::Client;
use serde_json::{json, Value};
use std::process::Child;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `gate` waits for a signal while `other` runs in the one slot; `use` appends the
/// signal's data to the file `waves`.
const APPROVE: &str = r#"[workflow]
name = "approve"
max_concurrency = 1
[[steps]]
name = "gate"
wait = "approval"
[[steps]]
name = "other"
run = "true"
idempotency = "natural"
[[steps]]
name = "use"
run = "echo ${steps.gate.output} >> waves"
idempotency = "natural"
depends_on = ["gate"]
"#;

/// `gate` waits for a signal; nothing else.
const GATE: &str = r#"[workflow]
name = "gate"
[[steps]]
name = "gate"
wait = "signal"
"#;

const TIMER: &str = r#"[workflow]
name = "timer"
[[steps]]
name = "nap"
wait = { timer = "3s" }
[[steps]]
name = "after"
run = "true"
idempotency = "natural"
depends_on = ["nap"]
"#;

const RUNS: usize = 1_000;

/// Sends every request of `requests` (path, body) to the server at `address`, 50 at a time,
/// and returns the status codes.
fn post_all(address: &str, requests: Vec<(String, Value)>) -> Vec<u16> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = std::sync::Arc::new(Client::new(address, None));
    runtime.block_on(async {
        let mut codes = Vec::new();
        for chunk in requests.chunks(50) {
            let sent: Vec<_> = (chunk.iter().cloned())
                .map(|(path, body)| {
                    let client = client.clone();
                    tokio::spawn(async move { client.post(&path, &body).await.unwrap().status })
                })
                .collect();
            for answer in sent {
                codes.push(answer.await.unwrap());
            }
        }
        codes
    })
}

/// The state of every run, from `runs --json`.
fn run_states(cli: &Cli) -> Vec<String> {
    let listed = cli.run(&["runs", "--json"]);
    (listed.stdout.lines())
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["state"].to_string())
        .collect()
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> usize {
    let parent_is = |stat: String| {
        // `pid (comm) state ppid …`: the name may hold spaces, so read after its `)`.
        let after = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .to_owned();
        after.split_whitespace().nth(1) == Some(pid.to_string().as_str())
    };
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| parent_is(stat.clone()))
        .count()
}

fn kill_9(server: &mut Child) {
    server.kill().unwrap(); // SIGKILL
    server.wait().unwrap();
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_thousand_runs_waiting_on_a_signal_survive_kill_9_and_each_finishes_on_its_signal() {
    let cli = Cli::new();
    cli.workflow("gate.toml", GATE);
    let (mut server, address) = serve(&cli);
    let began = std::time::Instant::now();
    let starts = (0..RUNS)
        .map(|i| {
            (
                "/api/v1/runs".to_owned(),
                json!({"workflow": "gate", "run_id": format!("w{i}")}),
            )
        })
        .collect();
    assert!(post_all(&address, starts).iter().all(|&c| c == 201));
    let started = began.elapsed();
    wait_until("every run waits", || {
        cli.status_json(&format!("w{}", RUNS - 1))["steps"]["gate"]["state"] == "running"
    });
    assert_eq!(children(server.id()), 0, "a waiting run holds no process");
    kill_9(&mut server);

    let (mut server, address) = serve(&cli);
    let began = std::time::Instant::now();
    let signals = (0..RUNS)
        .map(|i| {
            let path = format!("/api/v1/runs/w{i}/steps/gate/signal");
            (path, json!({"data": {"n": i}, "by": "ada", "reason": "go"}))
        })
        .collect();
    assert!(post_all(&address, signals).iter().all(|&c| c == 202));
    wait_until("every run ends", || {
        run_states(&cli).iter().all(|s| s == "\"succeeded\"")
    });
    eprintln!(
        "{RUNS} runs: started in {:.2?}, signalled and finished after kill -9 in {:.2?}",
        started,
        began.elapsed()
    );
    assert_eq!(run_states(&cli).len(), RUNS);
    let events = cli.events_json("w7");
    let signalled: Vec<&Value> = events.iter().filter(|e| e["kind"] == "signalled").collect();
    assert_eq!(signalled.len(), 1);
    assert_eq!(signalled[0]["payload"], json!({"n": 7}));
    assert_eq!(signalled[0]["by"], "ada");
    kill_9(&mut server);
}

#[test]
fn a_signal_s_data_reaches_the_dependent_step_and_a_step_not_waiting_refuses_one() {
    let cli = Cli::new();
    cli.workflow("approve.toml", APPROVE);
    let (mut server, address) = serve(&cli);
    for run in ["p", "q"] {
        let body = json!({"workflow": "approve", "run_id": run});
        assert_eq!(
            post_all(&address, vec![("/api/v1/runs".into(), body)]),
            [201]
        );
    }
    wait_until("p waits, other ran beside it", || {
        let steps = &cli.status_json("p")["steps"];
        steps["gate"]["state"] == "running" && steps["other"]["state"] == "succeeded"
    });
    let status = cli.run(&["status", "p"]);
    assert!(
        status.stdout.contains("waiting for a signal"),
        "{}",
        status.stdout
    );
    assert_eq!(
        cli.status_json("p")["steps"]["gate"]["waiting"]["for"],
        "signal"
    );

    let before = cli.events_json("p").len();
    let refused = cli.run(&["signal", "p", "use", "--by", "ada", "--reason", "early"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("not waiting for a signal"),
        "{}",
        refused.stderr
    );
    let body = json!({"data": 1, "by": "ada", "reason": "early"});
    let http = post_all(
        &address,
        vec![("/api/v1/runs/p/steps/other/signal".into(), body)],
    );
    assert_eq!(http, [409], "a step that runs code");
    let bad = cli.run(&[
        "signal", "p", "gate", "--data", "{", "--by", "ada", "--reason", "x",
    ]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert_eq!(cli.events_json("p").len(), before, "nothing appended");

    let sent = cli.run(&[
        "signal",
        "p",
        "gate",
        "--data",
        r#"{"wave":2}"#,
        "--by",
        "ada",
        "--reason",
        "wave 1 ok",
    ]);
    assert_eq!(sent.code, 0, "{}", sent.stderr);
    wait_until("p ends", || state(&cli, "p") != "running");
    assert_eq!(state(&cli, "p"), "succeeded");
    let waves = std::fs::read_to_string(cli.work.path().join("waves")).unwrap();
    assert_eq!(waves, "{\"wave\":2}\n");

    // With no server, a signal is appended here and `resume` carries it out.
    kill_9(&mut server);
    let approved = cli.run(&["approve", "q", "gate", "--by", "bob", "--reason", "fine"]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    let again = cli.run(&["approve", "q", "gate", "--by", "bob", "--reason", "twice"]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(again.stderr.contains("it is succeeded"), "{}", again.stderr);
    let resumed = cli.run(&["resume", "q"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    let waves = std::fs::read_to_string(cli.work.path().join("waves")).unwrap();
    assert_eq!(waves, "{\"wave\":2}\n{\"approved\":true}\n");
}

#[test]
fn a_timer_survives_a_restart_in_the_middle_and_fires_once() {
    let cli = Cli::new();
    cli.workflow("timer.toml", TIMER);
    let (mut server, address) = serve(&cli);
    let body = json!({"workflow": "timer", "run_id": "t"});
    assert_eq!(
        post_all(&address, vec![("/api/v1/runs".into(), body)]),
        [201]
    );
    wait_until("t naps", || {
        cli.run(&["status", "t", "--json"]).code == 0
            && cli.status_json("t")["steps"]["nap"]["state"] == "running"
    });
    std::thread::sleep(Duration::from_millis(1_000));
    kill_9(&mut server);
    let restarted = now_ms();
    let (mut server, _) = serve(&cli);
    wait_until("t ends", || state(&cli, "t") != "running");
    assert_eq!(state(&cli, "t"), "succeeded");
    let nap: Vec<(String, u64)> = (cli.events_json("t").into_iter())
        .filter(|e| e["step"] == "nap")
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_owned(),
                e["at_ms"].as_u64().unwrap(),
            )
        })
        .collect();
    let [(started_kind, started), (fired_kind, fired)] = &nap[..] else {
        panic!("one start, one firing: {nap:?}")
    };
    assert_eq!(
        (started_kind.as_str(), fired_kind.as_str()),
        ("started", "succeeded")
    );
    assert!(fired - started >= 3_000, "{nap:?}");
    assert!(
        *fired < restarted + 3_000,
        "the timer kept the first start's instant, not the restart's: {nap:?}, restarted at {restarted}"
    );
    kill_9(&mut server);
}
