//! `cargo xtask soak-workers [--faults N] [--seed S]`: a real `apollo11 serve` and three real
//! `apollo11 worker`s running placed steps of runs started one after another, while faults
//! hit them every ~2 s, each drawn from the seed: a worker killed (-9) and started again at
//! once (it takes its tries up again) or after the heartbeat timeout (its tries were lost:
//! their late results are refused); a worker stopped (SIGSTOP) past the heartbeat timeout
//! and let go (a partition: its heartbeats stop, its tries run on); the server killed (-9)
//! and started again on its address (its drivers adopt the tries on workers). Runs a
//! `compensate` step pauses are resumed by the soak, as an operator would.
//!
//! Then every run must have succeeded; each step succeeded once in the log and started no
//! more after that; each placed step's success comes from an execution that ended in the
//! steps' ledger with that attempt, and none started after it; each rerun of the
//! `compensate` step came after its previous attempt was undone. Figures: runs, faults by
//! kind, tries, tries lost with their worker, adoptions, late results refused, tries taken
//! up again by a restarted worker.

use crate::http::authorized;
use crate::serve::{Launch, Scratch, Serve};
use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: cargo xtask soak-workers [--faults N] [--seed S]";
const TOKEN: &str = "operator-token-of-the-workers-soak";
/// Runs in flight at once.
const IN_FLIGHT: usize = 4;
/// Between faults (and as long as a stopped or dead worker stays away, when it does).
const FAULT_EVERY: Duration = Duration::from_secs(2);
const HEARTBEAT_TIMEOUT: &str = "2s";
/// How long every run may take to end once the faults stop.
const DRAIN: Duration = Duration::from_secs(120);

const WORKFLOW: &str = r#"
[workflow]
name = "fleet"
max_concurrency = 16

[params.items]
type = "list"
default = ["a", "b", "c", "d", "e", "f"]

[params.ledger]
type = "string"
required = true

[[steps]]
name = "prepare"
run = "true"
idempotency = "natural"

[[steps]]
name = "work"
for_each = "${params.items}"
depends_on = ["prepare"]
run = 'echo "$APOLLO11_RUN_ID $APOLLO11_STEP $APOLLO11_ATTEMPT start" >> ${params.ledger}; sleep 0.$(( $$ % 8 + 1 )); echo "$APOLLO11_RUN_ID $APOLLO11_STEP $APOLLO11_ATTEMPT end" >> ${params.ledger}'
idempotency = "natural"
on = { pool = "fleet" }
retry = { max_attempts = 20, initial = "100ms", max = "1s" }

[[steps]]
name = "careful"
depends_on = ["work"]
run = 'echo "$APOLLO11_RUN_ID $APOLLO11_STEP $APOLLO11_ATTEMPT start" >> ${params.ledger}; sleep 1; echo "$APOLLO11_RUN_ID $APOLLO11_STEP $APOLLO11_ATTEMPT end" >> ${params.ledger}'
compensate = 'echo "$APOLLO11_RUN_ID $APOLLO11_STEP $APOLLO11_ATTEMPT undo" >> ${params.ledger}'
idempotency = "compensate"
on = { pool = "fleet" }
retry = { max_attempts = 20, initial = "100ms", max = "1s" }

[[steps]]
name = "finish"
depends_on = ["careful"]
run = "true"
idempotency = "natural"
"#;

struct Args {
    faults: u32,
    seed: u64,
}

impl Args {
    fn parse(args: &[String]) -> Result<Args> {
        let mut parsed = Args {
            faults: 100,
            seed: 1,
        };
        let mut rest = args.iter();
        while let Some(flag) = rest.next() {
            let value = rest
                .next()
                .with_context(|| format!("{flag} needs a value; {USAGE}"))?;
            let number: u64 = value
                .parse()
                .with_context(|| format!("{flag} `{value}` is not a number; {USAGE}"))?;
            match flag.as_str() {
                "--faults" => parsed.faults = u32::try_from(number)?,
                "--seed" => parsed.seed = number,
                other => bail!("unknown argument `{other}`; {USAGE}"),
            }
        }
        Ok(parsed)
    }
}

/// The faults, as counted in the figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    WorkerKilledBackAtOnce,
    WorkerKilledBackLate,
    WorkerCutOff,
    ServerKilled,
}

/// A small deterministic generator (xorshift64*): the seed says which faults hit what.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

struct Fleet<'a> {
    launch: Launch<'a>,
    server: Serve,
    workers: Vec<Option<Child>>,
    dir: &'a Path,
    apollo11: &'a Path,
}

impl Fleet<'_> {
    fn worker(&self, i: usize) -> Result<Child> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("worker-{i}.log")))?;
        Command::new(self.apollo11)
            .arg("--token-file")
            .arg(self.dir.join("token.worker"))
            .args([
                "worker",
                "--server",
                &format!("http://{}", self.server.addr),
            ])
            .args([
                "--name",
                &format!("w{i}"),
                "--labels",
                "pool=fleet",
                "--slots",
                "4",
            ])
            .args(["--heartbeat-every", "1s", "--work-dir"])
            .arg(self.dir.join(format!("work-{i}")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting a worker")
    }

    fn kill_worker(&mut self, i: usize) {
        if let Some(mut child) = self.workers[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal(&self, i: usize, signal: &str) {
        if let Some(child) = &self.workers[i] {
            let _ = Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status();
        }
    }

    fn hit(&mut self, fault: Fault, i: usize) -> Result<()> {
        match fault {
            Fault::WorkerKilledBackAtOnce => {
                self.kill_worker(i);
                self.workers[i] = Some(self.worker(i)?);
            }
            Fault::WorkerKilledBackLate => {
                self.kill_worker(i);
                std::thread::sleep(FAULT_EVERY);
                self.workers[i] = Some(self.worker(i)?);
            }
            Fault::WorkerCutOff => {
                self.signal(i, "-STOP");
                std::thread::sleep(FAULT_EVERY + Duration::from_millis(500));
                self.signal(i, "-CONT");
            }
            Fault::ServerKilled => {
                let addr = self.server.addr.clone();
                self.server.kill();
                self.server = Serve::launch(&self.launch, &addr)?;
            }
        }
        Ok(())
    }

    fn call(&self, method: &str, path: &str, body: Option<&str>) -> Result<Value> {
        let (status, text) = authorized(&self.server.addr, TOKEN, method, path, body)?;
        ensure!(status < 300, "{method} {path}: {status} {text}");
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

impl Drop for Fleet<'_> {
    fn drop(&mut self) {
        for i in 0..self.workers.len() {
            self.signal(i, "-CONT");
            self.kill_worker(i);
        }
    }
}

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let args = Args::parse(args)?;
    // The server says when it adopts a try (at info); the figures count those lines.
    std::env::set_var("RUST_LOG", "warn,apollo11_runtime=info");
    crate::build_loaded(root)?;
    let apollo11 = crate::tidy::target_dir(root)?.join("debug/apollo11");
    let scratch = Scratch::new("soak-workers")?;
    let dir = scratch.0.clone();
    let workflows = dir.join("workflows");
    std::fs::create_dir_all(&workflows)?;
    std::fs::write(workflows.join("fleet.toml"), WORKFLOW)?;
    std::fs::write(dir.join("token"), format!("{TOKEN}\n"))?;
    let ledger = dir.join("ledger");
    let (data, token, log) = (dir.join("data"), dir.join("token"), dir.join("server.log"));
    let extra = ["--heartbeat-timeout", HEARTBEAT_TIMEOUT];
    let launch = Launch {
        apollo11: &apollo11,
        data: &data,
        workflows: &workflows,
        token: Some(&token),
        log: Some(&log),
        extra: &extra,
    };
    let server = Serve::launch(&launch, "127.0.0.1:0")?;
    let mut fleet = Fleet {
        launch,
        server,
        workers: Vec::new(),
        dir: &dir,
        apollo11: &apollo11,
    };
    for i in 0..3 {
        let worker = fleet.worker(i)?;
        fleet.workers.push(Some(worker));
    }
    let started = Instant::now();
    let mut runs = Runs::default();
    let mut draw = Draw(args.seed.max(1));
    let mut faults: BTreeMap<Fault, u32> = BTreeMap::new();
    for _ in 0..args.faults {
        runs.keep_going(&fleet, &ledger)?;
        std::thread::sleep(FAULT_EVERY);
        let fault = [
            Fault::WorkerKilledBackAtOnce,
            Fault::WorkerKilledBackLate,
            Fault::WorkerCutOff,
            Fault::ServerKilled,
        ][draw.below(4) as usize];
        let i = draw.below(3) as usize;
        fleet.hit(fault, i)?;
        *faults.entry(fault).or_default() += 1;
    }
    let deadline = Instant::now() + DRAIN;
    while runs.keep(&fleet)? > 0 {
        ensure!(
            Instant::now() < deadline,
            "runs still not done {DRAIN:?} after the faults: {:?}",
            runs.open
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let figures = check(&fleet, &runs.all, &ledger, &dir)?;
    println!(
        "soak-workers: {} runs, {} faults {:?} in {:.0} s; {figures}",
        runs.all.len(),
        args.faults,
        faults,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The runs started, and those not ended yet.
#[derive(Default)]
struct Runs {
    all: Vec<String>,
    open: Vec<String>,
}

impl Runs {
    /// Starts runs up to [`IN_FLIGHT`] open ones.
    fn keep_going(&mut self, fleet: &Fleet<'_>, ledger: &Path) -> Result<()> {
        self.keep(fleet)?;
        while self.open.len() < IN_FLIGHT {
            let run = format!("r{}", self.all.len() + 1);
            let body = json!({"workflow": "fleet", "run_id": run, "params": {"ledger": ledger}});
            fleet.call("POST", "/api/v1/runs", Some(&body.to_string()))?;
            self.all.push(run.clone());
            self.open.push(run);
        }
        Ok(())
    }

    /// Forgets the runs that ended, resumes those paused (a `compensate` try lost with its
    /// worker: its old process ends within a second); answers how many are still open.
    fn keep(&mut self, fleet: &Fleet<'_>) -> Result<usize> {
        let mut open = Vec::new();
        for run in std::mem::take(&mut self.open) {
            let state = fleet.call("GET", &format!("/api/v1/runs/{run}"), None)?;
            match state["state"].as_str().unwrap_or_default() {
                "succeeded" => {}
                "paused" => {
                    std::thread::sleep(Duration::from_millis(1500));
                    let note = r#"{"by": "soak", "reason": "the old try ended"}"#;
                    fleet.call("POST", &format!("/api/v1/runs/{run}/resume"), Some(note))?;
                    open.push(run);
                }
                "running" | "pausing" => open.push(run),
                other => bail!("run {run} ended {other}: {state}"),
            }
        }
        self.open = open;
        Ok(self.open.len())
    }
}

/// The checks over every run's events and the ledger; the figures.
fn check(fleet: &Fleet<'_>, runs: &[String], ledger: &Path, dir: &Path) -> Result<String> {
    let lines = std::fs::read_to_string(ledger).context("reading the ledger")?;
    let lines: Vec<Vec<&str>> = lines.lines().map(|l| l.split(' ').collect()).collect();
    let (mut tries, mut lost) = (0, 0);
    for run in runs {
        let events = fleet.call(
            "GET",
            &format!("/api/v1/runs/{run}/events?limit=1000"),
            None,
        )?;
        let events = events["events"].as_array().cloned().unwrap_or_default();
        let mut succeeded: BTreeMap<String, u64> = BTreeMap::new();
        for e in &events {
            let step = e["step"].as_str().unwrap_or_default().to_owned();
            let attempt = e["attempt"].as_u64().unwrap_or(0);
            match e["kind"].as_str().unwrap_or_default() {
                "started" if succeeded.contains_key(&step) => {
                    bail!("{run}/{step}: started again after its success")
                }
                "started" if step != "prepare" && step != "finish" => tries += 1,
                "succeeded" if succeeded.insert(step.clone(), attempt).is_some() => {
                    bail!("{run}/{step}: succeeded twice")
                }
                "failed" if e.to_string().contains("worker_lost") => lost += 1,
                _ => {}
            }
        }
        for (step, attempt) in succeeded
            .iter()
            .filter(|(s, _)| s.starts_with("work") || *s == "careful")
        {
            let attempts = |what: &str| -> Vec<u64> {
                (lines.iter())
                    .filter(|l| l.len() == 4 && l[0] == run && l[1] == step && l[3] == what)
                    .filter_map(|l| l[2].parse().ok())
                    .collect()
            };
            ensure!(
                attempts("end").contains(attempt),
                "{run}/{step}: succeeded with attempt {attempt}, which never ended in the ledger"
            );
            ensure!(
                attempts("start").iter().all(|a| a <= attempt),
                "{run}/{step}: an attempt after {attempt} started"
            );
        }
        undone_before_rerun(&lines, run)?;
    }
    let count = |file: &Path, what: &str| {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .matches(what)
            .count()
    };
    let adopted = count(&dir.join("server.log"), "adopting a try");
    let refused = count(&dir.join("server.log"), "a try's result refused");
    let taken_up: usize = (0..3)
        .map(|i| count(&dir.join(format!("worker-{i}.log")), "taking up again"))
        .sum();
    Ok(format!(
        "{tries} tries, {lost} lost with their worker, {adopted} adopted, {refused} late results refused, {taken_up} taken up again by a restarted worker; 0 steps run again after their success, 0 results lost"
    ))
}

/// Each rerun of `careful` (attempt k > 1) came after attempt k - 1 was undone.
fn undone_before_rerun(lines: &[Vec<&str>], run: &str) -> Result<()> {
    for (at, line) in lines.iter().enumerate() {
        if line.len() != 4 || line[0] != run || line[1] != "careful" || line[3] != "start" {
            continue;
        }
        let attempt: u64 = line[2].parse().unwrap_or(0);
        if attempt <= 1 {
            continue;
        }
        let previous = (attempt - 1).to_string();
        let undone = lines[..at].iter().any(|l| {
            l.len() == 4 && l[0] == run && l[1] == "careful" && l[2] == previous && l[3] == "undo"
        });
        ensure!(
            undone,
            "{run}/careful: attempt {attempt} started before attempt {previous} was undone"
        );
    }
    Ok(())
}
