//! The processes of `cargo xtask failover`: `apollo11 serve` instances on one PostgreSQL
//! schema, each with its own data dir (step files), sharing a workflows folder and the steps
//! ledger; and the reads the test makes of them (`apollo11 runs --json`, the HTTP API).

use crate::http::request;
use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// Steps of the test's workflow.
pub const STEPS: usize = 10;
/// How long the runs of a scenario may take to finish.
const FINISH: Duration = Duration::from_secs(150);

/// A run as `apollo11 runs --json` lists it.
pub struct Row {
    pub run_id: String,
    pub state: String,
    pub steps_done: usize,
    /// The instance holding its lease, `-` for none.
    pub driver: String,
}

struct Instance {
    child: Child,
    addr: String,
    /// Its name in leases and events: `engine-PID`.
    id: String,
    /// Its stderr (its log).
    log: PathBuf,
}

/// The instances and where they keep their files.
pub struct Cluster {
    bin: PathBuf,
    url: String,
    schema: String,
    dir: PathBuf,
    ttl: Duration,
    instances: Vec<Instance>,
}

/// Milliseconds since the epoch, the clock of the events' `at_ms`.
pub fn ms_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Cluster {
    /// Builds `apollo11`, picks a fresh schema and writes the workflow folder.
    pub fn new(root: &Path, url: &str, ttl: Duration) -> Result<Cluster> {
        crate::build_loaded(root)?;
        let target = crate::tidy::target_dir(root)?;
        let schema = format!(
            "failover_{:x}",
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)?
                .as_nanos()
        );
        let dir = target.join("failover").join(&schema);
        std::fs::create_dir_all(dir.join("workflows"))?;
        std::fs::write(
            dir.join("workflows/failover.toml"),
            workflow(&dir.join("steps.ledger")),
        )?;
        println!("failover test: schema {schema}, files in {}", dir.display());
        Ok(Cluster {
            bin: target.join("debug/apollo11"),
            url: url.to_owned(),
            schema,
            dir,
            ttl,
            instances: Vec::new(),
        })
    }

    fn command(&self, data_dir: &str) -> Command {
        let mut command = Command::new(&self.bin);
        command
            .arg("--data-dir")
            .arg(self.dir.join(data_dir))
            .args(["--store", &self.url, "--store-schema", &self.schema]);
        command
    }

    /// Starts one more `apollo11 serve` and waits for the address it prints.
    pub fn spawn(&mut self) -> Result<()> {
        let n = self.instances.len();
        let out = self.dir.join(format!("serve{n}.out"));
        let log = self.dir.join(format!("serve{n}.err"));
        let ttl = format!("{}ms", self.ttl.as_millis());
        let child = self
            .command(&format!("data{n}"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--lease-ttl",
                &ttl,
                "--workflows",
            ])
            .arg(self.dir.join("workflows"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out)?)
            .stderr(std::fs::File::create(
                self.dir.join(format!("serve{n}.err")),
            )?)
            .spawn()
            .context("starting apollo11 serve")?;
        let id = format!("engine-{}", child.id());
        self.instances.push(Instance {
            child,
            addr: String::new(),
            id,
            log,
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(&out)?;
            if let Some(addr) = text
                .split("http://")
                .nth(1)
                .and_then(|r| r.split('/').next())
            {
                self.instances[n].addr = addr.to_owned();
                return Ok(());
            }
            if let Some(status) = self.instances[n].child.try_wait()? {
                bail!(
                    "apollo11 serve {n} exited ({status}); see {}",
                    out.with_extension("err").display()
                );
            }
            ensure!(
                Instant::now() < deadline,
                "apollo11 serve {n} printed no address in 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts `count` runs `PREFIX000…` through the API, in turn on each instance.
    pub fn start_runs(&self, prefix: &str, count: usize) -> Result<Vec<String>> {
        let mut runs = Vec::new();
        for i in 0..count {
            let run = format!("{prefix}{i:03}");
            let instance = &self.instances[i % self.instances.len()];
            let body = format!(r#"{{"workflow": "failover", "run_id": "{run}"}}"#);
            let (status, answer) = request(&instance.addr, "POST", "/api/v1/runs", Some(&body))?;
            ensure!(
                status == 201,
                "POST /api/v1/runs {run} on {}: {status} {answer}",
                instance.id
            );
            runs.push(run);
        }
        Ok(runs)
    }

    /// Every run, with its driver (`apollo11 runs --json`).
    pub fn rows(&self) -> Result<Vec<Row>> {
        let out = self.command("reader").args(["runs", "--json"]).output()?;
        ensure!(
            out.status.success(),
            "apollo11 runs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)?
            .lines()
            .map(|line| {
                let v: Value =
                    serde_json::from_str(line).with_context(|| format!("runs --json: {line}"))?;
                let text = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
                Ok(Row {
                    run_id: text("run_id"),
                    state: text("state"),
                    steps_done: v["steps_done"].as_u64().unwrap_or_default() as usize,
                    driver: text("driver"),
                })
            })
            .collect()
    }

    /// Polls until `steps` steps are done over every run; returns the rows then.
    pub fn wait_for_steps(&self, steps: usize) -> Result<Vec<Row>> {
        let deadline = Instant::now() + FINISH;
        loop {
            let rows = self.rows()?;
            if rows.iter().map(|r| r.steps_done).sum::<usize>() >= steps {
                return Ok(rows);
            }
            ensure!(
                Instant::now() < deadline,
                "{steps} steps were not done in {FINISH:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Polls until every run of `runs` has stopped running.
    pub fn wait_finished(&self, runs: &[String]) -> Result<()> {
        let deadline = Instant::now() + FINISH;
        loop {
            let rows = self.rows()?;
            let running = rows
                .iter()
                .filter(|r| runs.contains(&r.run_id) && r.state == "running")
                .count();
            if running == 0 {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "I4: {running} runs still running after {FINISH:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn instance(&self, id: &str) -> Result<&Instance> {
        self.instances
            .iter()
            .find(|i| i.id == id)
            .with_context(|| format!("no instance of this test is {id}"))
    }

    /// Sends `SIGNAL` (KILL, STOP, CONT) to the instance named `id`.
    pub fn signal(&self, id: &str, signal: &str) -> Result<()> {
        let pid = self.instance(id)?.child.id().to_string();
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()?;
        ensure!(status.success(), "kill -{signal} {pid} failed");
        Ok(())
    }

    /// Reaps a killed instance and leaves it out of the reads.
    pub fn forget(&mut self, id: &str) {
        if let Some(i) = self.instances.iter().position(|i| i.id == id) {
            let mut gone = self.instances.remove(i);
            let _ = gone.child.wait();
        }
    }

    fn get(&self, path: &str) -> Result<Value> {
        let addr = &self.instances.first().context("no instance left")?.addr;
        let (status, body) = request(addr, "GET", path, None)?;
        ensure!(status == 200, "GET {path}: {status} {body}");
        serde_json::from_str(&body).with_context(|| format!("GET {path}: {body}"))
    }

    /// A run's events, in order (the objects of `apollo11 events --json`).
    pub fn events(&self, run: &str) -> Result<Vec<Value>> {
        let page = self.get(&format!("/api/v1/runs/{run}/events?limit=10000"))?;
        ensure!(
            page["next_after"].is_null(),
            "{run} has more than 10,000 events"
        );
        page["events"]
            .as_array()
            .cloned()
            .context("an events page without events")
    }

    /// A run's view (`GET /api/v1/runs/{id}`).
    pub fn run_view(&self, run: &str) -> Result<Value> {
        self.get(&format!("/api/v1/runs/{run}"))
    }

    /// The value of a counter on an instance's `/metrics` (0 when not yet emitted).
    pub fn metric(&self, id: &str, name: &str) -> Result<u64> {
        let (status, text) = request(&self.instance(id)?.addr, "GET", "/metrics", None)?;
        ensure!(status == 200, "GET /metrics on {id}: {status}");
        Ok(text
            .lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64)
    }

    /// How many lines of an instance's log contain `needle`.
    pub fn log_lines(&self, id: &str, needle: &str) -> Result<usize> {
        let log = std::fs::read_to_string(&self.instance(id)?.log)?;
        Ok(log.lines().filter(|l| l.contains(needle)).count())
    }

    /// The steps ledger.
    pub fn ledger(&self) -> Result<String> {
        Ok(std::fs::read_to_string(self.dir.join("steps.ledger"))?)
    }

    /// Each instance left still runs and is ready.
    pub fn check_alive(&mut self) -> Result<()> {
        for i in &mut self.instances {
            if let Some(status) = i.child.try_wait()? {
                bail!("I5: instance {} exited ({status})", i.id);
            }
            let (status, body) = request(&i.addr, "GET", "/readyz", None)?;
            ensure!(
                status == 200,
                "instance {} is not ready: {status} {body}",
                i.id
            );
        }
        Ok(())
    }

    /// Kills every instance left.
    pub fn stop(&mut self) {
        for mut i in self.instances.drain(..) {
            let _ = i.child.kill();
            let _ = i.child.wait();
        }
    }

    /// Drops the test's schema.
    pub fn drop_schema(&self) -> Result<()> {
        crate::psql::drop_schema(&self.url, &self.schema)
    }

    /// Terminates every connection of the instances (named after the schema in
    /// `pg_stat_activity`); returns how many.
    pub fn terminate_connections(&self) -> Result<u64> {
        let sql = format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '{}'",
            self.schema
        );
        let out = crate::psql::psql(&self.url, &sql)?;
        out.trim()
            .parse()
            .with_context(|| format!("psql answered `{out}` to a count"))
    }
}

/// The workflow: a chain of `STEPS` keyed steps, each appending `run step attempt pid` to
/// the ledger, then sleeping 50 to 200 ms.
fn workflow(ledger: &Path) -> String {
    let mut text = String::from("[workflow]\nname = \"failover\"\n");
    for i in 0..STEPS {
        text += &format!(
            "[[steps]]\nname = \"s{i}\"\nrun = 'echo \"$APOLLO11_RUN_ID $APOLLO11_STEP $APOLLO11_ATTEMPT $$\" >> \"{}\" && sleep 0.{:02}'\nidempotency = \"keyed\"\nretry = {{ max_attempts = 20 }}\n",
            ledger.display(),
            5 + 5 * (i % 4)
        );
        if i > 0 {
            text += &format!("depends_on = [\"s{}\"]\n", i - 1);
        }
    }
    text
}
