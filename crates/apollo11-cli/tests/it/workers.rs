//! Steps placed on `apollo11 worker` processes: labels choose the worker, logs and outputs
//! come back, a worker killed mid-step loses its try (retried elsewhere, or for a
//! `compensate` step, the run paused), a server killed mid-step adopts the try on restart
//! and records it once, a worker restarted mid-step finds its try's cgroup again and kills a
//! try it took up again once the server stops it, the worker token opens the worker routes
//! only, and a try no worker has taken says what it waits for in `status` and the run view.

use crate::harness::{api, serving_address, wait_until, Cli, TOKEN, WORKER_TOKEN};
use serde_json::{json, Value};
use std::process::{Child, Stdio};

const WORKFLOW: &str = r#"
[workflow]
name = "placed"

[[steps]]
name = "local"
run = "printf local > $APOLLO11_OUTPUT"
idempotency = "natural"

[[steps]]
name = "db"
run = "echo started $APOLLO11_ATTEMPT; sleep 2; printf \"$(cat $APOLLO11_INPUTS/local)+db\" > $APOLLO11_OUTPUT"
idempotency = "natural"
depends_on = ["local"]
on = { role = "db" }
retry = { max_attempts = 3, initial = "100ms" }

[[steps]]
name = "careful"
run = "sleep 2"
idempotency = "compensate"
compensate = "true"
depends_on = ["db"]
on = { role = "careful" }
"#;

pub(crate) struct Setup {
    pub(crate) cli: Cli,
    server: Child,
    address: String,
    workers: Vec<(String, Child)>,
}

impl Setup {
    fn new() -> Setup {
        Setup::with(WORKFLOW)
    }

    /// A server of `workflow` (named `placed`), no worker yet.
    pub(crate) fn with(workflow: &str) -> Setup {
        let cli = Cli::new();
        cli.workflow("placed.toml", workflow);
        std::fs::write(cli.file("token"), TOKEN).unwrap();
        std::fs::write(cli.file("worker-token"), WORKER_TOKEN).unwrap();
        let (server, address) = serve(&cli, "127.0.0.1:0");
        Setup {
            cli,
            server,
            address,
            workers: Vec::new(),
        }
    }

    pub(crate) fn worker(&mut self, name: &str, labels: &str) {
        let work_dir = self.cli.file(&format!("work-{name}"));
        let token = self.cli.file("worker-token");
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_apollo11"))
            .args([
                "--token-file",
                token.to_str().unwrap(),
                "worker",
                "--server",
            ])
            .arg(format!("http://{}", self.address))
            .args([
                "--name",
                name,
                "--labels",
                labels,
                "--heartbeat-every",
                "1s",
            ])
            .arg("--work-dir")
            .arg(work_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.workers.push((name.to_owned(), child));
    }

    pub(crate) fn start(&self, run: &str) {
        let body = json!({"workflow": "placed", "run_id": run});
        let answer = api(&self.address, TOKEN, "/api/v1/runs", Some(body));
        assert_eq!(answer.status, 201, "{}", answer.message());
    }

    pub(crate) fn run(&self, run: &str) -> Value {
        api(&self.address, TOKEN, &format!("/api/v1/runs/{run}"), None).json()
    }

    fn step(&self, run: &str, step: &str) -> Value {
        self.run(run)["steps"][step].clone()
    }

    /// The worker a step's current try was placed on, once it is.
    fn placed_on(&self, run: &str, step: &str) -> String {
        let mut worker = String::new();
        wait_until("the step placed", || {
            let handle = self.step(run, step)["placed"]["handle"]
                .as_str()
                .map(str::to_owned);
            let parsed: Option<Value> = handle.and_then(|h| serde_json::from_str(&h).ok());
            worker = parsed.map_or(String::new(), |h| {
                h["worker"].as_str().unwrap_or("").to_owned()
            });
            !worker.is_empty()
        });
        worker
    }

    fn kill_worker(&mut self, name: &str) {
        let at = self.workers.iter().position(|(n, _)| n == name).unwrap();
        let (_, mut child) = self.workers.remove(at);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let workers = self.workers.iter_mut().map(|(_, c)| c);
        for child in workers.chain([&mut self.server]) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn serve(cli: &Cli, listen: &str) -> (Child, String) {
    let workflows = cli.work.path().to_str().unwrap().to_owned();
    let token = cli.file("token");
    let worker_token = cli.file("worker-token");
    let mut child = cli
        .command(&[
            "--token-file",
            token.to_str().unwrap(),
            "serve",
            "--listen",
            listen,
        ])
        .args(["--workflows", &workflows, "--heartbeat-timeout", "3s"])
        .arg("--worker-token-file")
        .arg(worker_token)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let address = serving_address(&mut child);
    (child, address)
}

pub(crate) fn state_of(value: &Value) -> String {
    value["state"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_placed_step_runs_on_a_worker_with_its_labels_its_log_and_output_come_back() {
    let mut s = Setup::new();
    s.worker("w1", "role=db");
    s.worker("w2", "role=db");
    s.worker("w3", "role=careful");
    s.worker("web", "role=web");
    s.start("r1");
    wait_until("the run succeeded", || {
        state_of(&s.run("r1")) == "succeeded"
    });
    let db = s.step("r1", "db");
    let handle: Value = serde_json::from_str(db["placed"]["handle"].as_str().unwrap()).unwrap();
    assert!(
        ["w1", "w2"].contains(&handle["worker"].as_str().unwrap()),
        "{handle}"
    );
    let careful: Value = serde_json::from_str(
        s.step("r1", "careful")["placed"]["handle"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(careful["worker"], "w3");
    assert!(s.step("r1", "local")["placed"]["handle"]
        .as_str()
        .unwrap()
        .contains("pgid"));
    let events = s.cli.events_json("r1");
    let output = events
        .iter()
        .find(|e| e["step"] == "db" && e["kind"] == "succeeded")
        .unwrap();
    assert_eq!(output["payload"], "local+db", "{output}");
    let log = std::fs::read_to_string(s.cli.data.path().join("logs/r1/db/1.log")).unwrap();
    assert_eq!(log, "started 1\n");
    let listed = api(&s.address, TOKEN, "/api/v1/workers", None).json();
    let names: Vec<&str> = (listed["workers"].as_array().unwrap().iter())
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["w1", "w2", "w3", "web"]);
}

#[test]
fn a_worker_killed_mid_step_loses_its_try_retried_elsewhere_or_paused_for_a_compensate_step() {
    let mut s = Setup::new();
    s.worker("w1", "role=db");
    s.worker("w2", "role=db");
    s.worker("w3", "role=careful");
    s.start("r1");
    let first = s.placed_on("r1", "db");
    s.kill_worker(&first);
    wait_until("db retried and succeeded", || {
        state_of(&s.step("r1", "db")) == "succeeded"
    });
    s.placed_on("r1", "careful");
    s.kill_worker("w3");
    wait_until("the run paused", || state_of(&s.run("r1")) == "paused");
    let db = s.step("r1", "db");
    assert_eq!(db["attempt"], 2);
    let handle: Value = serde_json::from_str(db["placed"]["handle"].as_str().unwrap()).unwrap();
    assert_ne!(
        handle["worker"],
        first.as_str(),
        "retried on the other worker"
    );
    let careful = s.step("r1", "careful");
    assert_eq!(state_of(&careful), "failed");
    assert!(
        careful["error"].to_string().contains("worker_lost"),
        "{careful}"
    );
    let run = s.run("r1");
    assert!(run["paused"].to_string().contains("may still run"), "{run}");
    let events = s.cli.events_json("r1");
    let lost: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "failed" && e["error"].to_string().contains("worker_lost"))
        .collect();
    assert_eq!(lost.len(), 2, "{events:?}");
}

#[test]
fn a_server_killed_mid_step_adopts_the_try_on_restart_and_records_it_once() {
    let mut s = Setup::new();
    s.worker("w1", "role=db");
    s.worker("w2", "role=db");
    s.worker("w3", "role=careful");
    s.start("r1");
    s.placed_on("r1", "db");
    s.server.kill().unwrap();
    s.server.wait().unwrap();
    let (server, _) = serve(&s.cli, &s.address);
    s.server = server;
    wait_until("the run succeeded", || {
        state_of(&s.run("r1")) == "succeeded"
    });
    assert_eq!(s.step("r1", "db")["attempt"], 1, "adopted, not run again");
    assert_eq!(s.step("r1", "careful")["attempt"], 1);
    let log = std::fs::read_to_string(s.cli.data.path().join("logs/r1/db/1.log")).unwrap();
    assert_eq!(log.matches("started").count(), 1, "{log}");
}

#[test]
fn a_worker_restarted_mid_step_takes_its_try_up_again_and_reports_it_once() {
    let mut s = Setup::new();
    s.worker("w1", "role=db");
    s.worker("w3", "role=careful");
    s.start("r1");
    s.placed_on("r1", "db");
    s.kill_worker("w1");
    s.worker("w1", "role=db");
    wait_until("the run succeeded", || {
        state_of(&s.run("r1")) == "succeeded"
    });
    let db = s.step("r1", "db");
    assert_eq!(db["attempt"], 1, "taken up again, not lost: {db}");
    let events = s.cli.events_json("r1");
    let output = (events.iter())
        .find(|e| e["step"] == "db" && e["kind"] == "succeeded")
        .unwrap();
    assert_eq!(output["payload"], "local+db");
    let log = std::fs::read_to_string(s.cli.data.path().join("logs/r1/db/1.log")).unwrap();
    assert_eq!(log, "started 1\n");
    assert!(
        std::fs::read_dir(s.cli.file("work-w1/tries"))
            .unwrap()
            .next()
            .is_none(),
        "its folder is gone once reported"
    );
}

/// A step that outlives its timeout, on a worker.
const SLOW: &str = r#"
[workflow]
name = "placed"

[[steps]]
name = "slow"
run = "echo started; sleep 60"
idempotency = "natural"
timeout = "5s"
retry = { max_attempts = 1 }
on = { role = "db" }
"#;

/// How many processes of the group `pgid` still run (zombies left out: an orphan's may wait
/// for its reaper).
fn running_in_group(pgid: i64) -> usize {
    let entries = std::fs::read_dir("/proc").unwrap().filter_map(Result::ok);
    entries
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // The command name (field 2) may hold anything: fields count after its `)`.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            let fields: Vec<&str> = after.split_whitespace().collect();
            fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
        })
        .count()
}

#[test]
fn a_try_taken_up_by_a_restarted_worker_is_killed_there_once_the_server_stops_it() {
    let mut s = Setup::with(SLOW);
    s.worker("w1", "role=db");
    s.start("r1");
    s.placed_on("r1", "slow");
    let handle = s.step("r1", "slow")["placed"]["handle"].clone();
    let handle: Value = serde_json::from_str(handle.as_str().unwrap()).unwrap();
    let pgid = handle["group"]["pgid"].as_i64().unwrap();
    s.kill_worker("w1");
    assert!(running_in_group(pgid) > 0, "the try outlives its worker");
    s.worker("w1", "role=db");
    wait_until("the step failed", || {
        state_of(&s.step("r1", "slow")) == "failed"
    });
    let slow = s.step("r1", "slow");
    assert_eq!(slow["error_class"], "timeout", "{slow}");
    assert_eq!(slow["attempt"], 1, "taken up again, not lost: {slow}");
    wait_until("the try's processes killed by the worker", || {
        running_in_group(pgid) == 0
    });
    wait_until("its folder gone", || {
        std::fs::read_dir(s.cli.file("work-w1/tries")).map_or(true, |mut d| d.next().is_none())
    });
}

/// A step held by a cgroup (its memory limited) on a worker.
const HELD: &str = r#"
[workflow]
name = "placed"

[[steps]]
name = "mem"
idempotency = "natural"
on = { role = "mem" }
limits = { memory = "256MiB" }
run = "python3 -c 'import time; b = bytearray(64 << 20); b[::4096] = b\"x\" * len(b[::4096]); time.sleep(3)'"
"#;

/// The name of the cgroup the process `pid` is in under the `apollo11` parent, once it is.
pub(crate) fn cgroup_of(pid: &str) -> String {
    let mut name = String::new();
    wait_until("the try in its cgroup", || {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        name = (text.lines())
            .find_map(|l| l.rsplit(':').next()?.strip_prefix("/apollo11/"))
            .unwrap_or_default()
            .to_owned();
        !name.is_empty()
    });
    name
}

/// The folders named `name` under the `apollo11` parent of any cgroup controller.
pub(crate) fn cgroups_named(name: &str) -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new("/sys/fs/cgroup");
    let controllers = std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path()));
    (controllers.chain([root.to_path_buf()]))
        .map(|c| c.join("apollo11").join(name))
        .filter(|d| d.exists())
        .collect()
}

#[test]
fn a_worker_restarted_mid_step_finds_its_try_s_cgroup_again_measures_and_removes_it() {
    if !crate::limits::cgroups() {
        return;
    }
    let mut s = Setup::with(HELD);
    s.worker("w1", "role=mem");
    s.start("m1");
    s.placed_on("m1", "mem");
    let handle: Value =
        serde_json::from_str(s.step("m1", "mem")["placed"]["handle"].as_str().unwrap()).unwrap();
    let cgroup = cgroup_of(&handle["group"]["pgid"].to_string());
    s.kill_worker("w1");
    s.worker("w1", "role=mem");
    wait_until("the run succeeded", || {
        state_of(&s.run("m1")) == "succeeded"
    });
    let mem = s.step("m1", "mem");
    assert_eq!(mem["attempt"], 1, "taken up again: {mem}");
    let used = &mem["usage"][0];
    assert_eq!(used["isolation"], "cgroup", "{mem}");
    assert!(
        used["peak_memory_bytes"].as_u64() >= Some(64 << 20),
        "{used}"
    );
    assert_eq!(
        used["memory_limit_bytes"].as_u64(),
        Some(256 << 20),
        "{used}"
    );
    assert!(
        used["wall_ms"].as_u64() >= Some(3_000),
        "from its start: {used}"
    );
    assert_eq!(cgroups_named(&cgroup), Vec::<std::path::PathBuf>::new());
}

#[test]
fn the_worker_token_opens_the_worker_routes_and_nothing_else() {
    let s = Setup::new();
    let hello = json!({"name": "w", "labels": {}, "slots": 1, "version": "0"});
    let beat = json!({"worker": hello, "running": []});
    let as_worker =
        |path: &str, body: Option<Value>| api(&s.address, WORKER_TOKEN, path, body).status;
    assert_eq!(
        as_worker("/api/v1/worker/heartbeat", Some(beat.clone())),
        200
    );
    for path in [
        "/api/v1/runs",
        "/api/v1/workers",
        "/api/v1/runs/r1",
        "/metrics",
        "/api/v1/workflows",
    ] {
        assert_eq!(as_worker(path, None), 401, "{path}");
    }
    let start = json!({"workflow": "placed"});
    assert_eq!(as_worker("/api/v1/runs", Some(start)), 401);
    let as_operator = api(&s.address, TOKEN, "/api/v1/worker/heartbeat", Some(beat)).status;
    assert_eq!(as_operator, 401);
    let unknown = json!({"worker": "w", "outcome": {"ok": true}});
    let late = api(
        &s.address,
        WORKER_TOKEN,
        "/api/v1/worker/tries/00feed/result",
        Some(unknown),
    );
    assert_eq!(late.status, 503, "a try not known yet: report again");
    let wrong = s.cli.file("wrong-token");
    std::fs::write(&wrong, "not-the-worker-token-at-all").unwrap();
    let out = s.cli.run_within(
        20,
        &[
            "--token-file",
            wrong.to_str().unwrap(),
            "worker",
            "--server",
            &format!("http://{}", s.address),
        ],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("refused the worker token"),
        "{}",
        out.stderr
    );
}

const WAITS: &str = r#"
[workflow]
name = "waits"

[params]
role = { type = "string", default = "db" }

[[steps]]
name = "db"
run = "true"
idempotency = "natural"
on = { role = "${params.role}", zone = "a" }

[[steps]]
name = "hosts"
for_each = ["h1"]
run = "true"
idempotency = "natural"
on = { host = "${item}" }
"#;

#[test]
fn a_try_no_worker_took_says_what_it_waits_for_in_status_and_the_run_view() {
    let mut s = Setup::new();
    s.cli.workflow("waits.toml", WAITS);
    let reload = api(
        &s.address,
        TOKEN,
        "/api/v1/workflows/reload",
        Some(json!({})),
    );
    assert_eq!(reload.status, 200, "{}", reload.message());
    s.worker("web", "role=web");
    let body = json!({"workflow": "waits", "run_id": "r1"});
    assert_eq!(
        api(&s.address, TOKEN, "/api/v1/runs", Some(body)).status,
        201
    );
    let waiting = |s: &Setup, step: &str| s.step("r1", step)["unplaced"]["waiting_for"].clone();
    wait_until("both steps wait for a worker", || {
        waiting(&s, "db").is_string() && waiting(&s, "hosts[h1]").is_string()
    });
    assert_eq!(waiting(&s, "db"), "a worker with role=db, zone=a");
    assert_eq!(waiting(&s, "hosts[h1]"), "a worker with host=h1");
    assert_eq!(s.step("r1", "db")["state"], "running");

    let table = s.cli.run(&["status", "r1"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    for says in [
        "waiting for a worker with role=db, zone=a",
        "waiting for a worker with host=h1",
    ] {
        assert!(table.stdout.contains(says), "{says}: {}", table.stdout);
    }
    let json = s.cli.run(&["status", "r1", "--json"]);
    let view: Value = serde_json::from_str(&json.stdout).unwrap();
    let unplaced = &view["steps"]["db"]["unplaced"];
    assert_eq!(
        *unplaced,
        s.step("r1", "db")["unplaced"],
        "as the server says"
    );

    s.worker("w1", "role=db,zone=a");
    wait_until("db ran on w1", || {
        state_of(&s.step("r1", "db")) == "succeeded"
    });
    assert!(s.step("r1", "db")["unplaced"].is_null());
    assert_eq!(waiting(&s, "hosts[h1]"), "a worker with host=h1");
}

#[test]
fn worker_arguments_that_cannot_work_are_refused_by_name() {
    let cli = Cli::new();
    for (args, says) in [
        (
            vec!["worker", "--server", "https://x:1"],
            "--server https://x:1",
        ),
        (vec!["worker", "--server", "http://x"], "--server http://x"),
        (
            vec!["worker", "--server", "http://x:1", "--labels", "role"],
            "--labels: `role`",
        ),
        (
            vec!["worker", "--server", "http://x:1", "--slots", "0"],
            "--slots",
        ),
        (
            vec!["worker", "--server", "http://x:1", "--name", "a/b"],
            "--name a/b",
        ),
    ] {
        let out = cli.run(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn a_placed_step_run_without_a_server_fails_saying_only_serve_has_workers() {
    let cli = Cli::new();
    let file = cli.workflow("placed.toml", WORKFLOW);
    let out = cli.run(&["run", file.to_str().unwrap(), "--run-id", "r1"]);
    assert!(
        out.stdout
            .contains("no_worker: the step runs on a worker with role=db"),
        "{}",
        out.stdout
    );
    let db = cli.status_json("r1")["steps"]["db"].clone();
    assert_eq!(db["state"], "failed", "{db}");
    assert_eq!(db["attempt"], 1, "no retry can find a worker: {db}");
    assert_eq!(
        cli.status_json("r1")["steps"]["local"]["state"],
        "succeeded"
    );
}
