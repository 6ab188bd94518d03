//! Workers on hosts of their own: each `apollo11 worker` in a network namespace with its own
//! address, joined to the server's by a bridge, so that a link can be dropped and healed.
//! A worker cut off past the heartbeat timeout loses its try, which runs again on the other
//! worker; once healed, its late result is refused and its try, still at work, is killed.
//! Needs root (`ip netns`, veth, a bridge), as on the project's machines.

use crate::harness::{api, serving_address, wait_until, Cli, TOKEN, WORKER_TOKEN};
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};

const WORKFLOW: &str = r#"
[workflow]
name = "cut"

[[steps]]
name = "long"
run = "echo started $APOLLO11_ATTEMPT; exec sleep ${params.seconds}"
idempotency = "natural"
on = { role = "db" }
retry = { max_attempts = 3, initial = "100ms" }

[params.seconds]
type = "integer"
"#;

/// `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A bridge in this namespace and two worker hosts on it, each a namespace with a veth.
struct Hosts {
    tag: String,
    subnet: String,
}

impl Hosts {
    fn new() -> Hosts {
        // Apart per process and per test in it.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let nth = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = (std::process::id() * 4 + nth) % 200 + 20;
        let hosts = Hosts {
            tag: format!("a11p{n}"),
            subnet: format!("10.211.{n}"),
        };
        hosts.drop_all();
        let bridge = format!("{}br", hosts.tag);
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&[
            "addr",
            "add",
            &format!("{}.1/24", hosts.subnet),
            "dev",
            &bridge,
        ]);
        ip(&["link", "set", &bridge, "up"]);
        for i in 1..=2 {
            let (ns, outer, inner) = hosts.names(i);
            ip(&["netns", "add", &ns]);
            ip(&[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ]);
            ip(&["link", "set", &inner, "netns", &ns]);
            ip(&["link", "set", &outer, "master", &bridge]);
            ip(&["link", "set", &outer, "up"]);
            let address = format!("{}.{}/24", hosts.subnet, 10 + i);
            ip(&["-n", &ns, "addr", "add", &address, "dev", &inner]);
            ip(&["-n", &ns, "link", "set", &inner, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        hosts
    }

    /// Host `i`'s namespace and its veth's two ends.
    fn names(&self, i: u32) -> (String, String, String) {
        let tag = &self.tag;
        (
            format!("{tag}n{i}"),
            format!("{tag}o{i}"),
            format!("{tag}i{i}"),
        )
    }

    fn server_ip(&self) -> String {
        format!("{}.1", self.subnet)
    }

    /// Drops (`false`) or heals host `i`'s link.
    fn link(&self, i: u32, up: bool) {
        let (_, outer, _) = self.names(i);
        ip(&["link", "set", &outer, if up { "up" } else { "down" }]);
    }

    fn drop_all(&self) {
        for i in 1..=2 {
            let (ns, outer, _) = self.names(i);
            let _ = Command::new("ip").args(["link", "del", &outer]).output();
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        }
        let bridge = format!("{}br", self.tag);
        let _ = Command::new("ip").args(["link", "del", &bridge]).output();
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        self.drop_all();
    }
}

struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn call(address: &str, path: &str, body: Option<Value>) -> Value {
    api(address, TOKEN, path, body).json()
}

/// The pids of the `sleep` of this test's tries (their command line names the seconds).
fn sleeping(seconds: &str) -> usize {
    let out = Command::new("pgrep")
        .args(["-f", &format!("^sleep {seconds}$")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// A server on the bridge and a worker on each host.
struct Cluster {
    hosts: Hosts,
    cli: Cli,
    address: String,
    _children: Killed,
}

impl Cluster {
    fn new() -> Cluster {
        let hosts = Hosts::new();
        let cli = Cli::new();
        cli.workflow("cut.toml", WORKFLOW);
        std::fs::write(cli.file("token"), TOKEN).unwrap();
        std::fs::write(cli.file("worker-token"), WORKER_TOKEN).unwrap();
        let listen = format!("{}:0", hosts.server_ip());
        let workflows = cli.work.path().to_str().unwrap().to_owned();
        let log = std::fs::File::create(cli.file("server.log")).unwrap();
        let mut server = cli
            .command(&["--token-file", cli.file("token").to_str().unwrap(), "serve"])
            .args(["--listen", &listen, "--workflows", &workflows])
            .args(["--heartbeat-timeout", "3s", "--worker-token-file"])
            .arg(cli.file("worker-token"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let address = serving_address(&mut server);
        let mut children = Killed(vec![server]);
        for i in 1..=2u32 {
            children.0.push(worker(&hosts, &cli, &address, i));
        }
        wait_until("both workers connected", || {
            call(&address, "/api/v1/workers", None)["workers"]
                .as_array()
                .is_some_and(|w| w.len() == 2)
        });
        Cluster {
            hosts,
            cli,
            address,
            _children: children,
        }
    }

    fn step(&self, run: &str, field: &str) -> Value {
        call(&self.address, &format!("/api/v1/runs/{run}"), None)["steps"]["long"][field].clone()
    }

    /// Starts `run` with its step sleeping `seconds`, cuts the host its try went to once it
    /// started there, and waits until the try runs again on the other host; answers the
    /// host cut.
    fn cut_while_running(&self, run: &str, seconds: u32) -> u32 {
        let start = json!({"workflow": "cut", "run_id": run, "params": {"seconds": seconds}});
        call(&self.address, "/api/v1/runs", Some(start));
        let mut first = String::new();
        wait_until("the step placed", || {
            let handle = self.step(run, "placed")["handle"]
                .as_str()
                .map(str::to_owned);
            let handle: Option<Value> = handle.and_then(|h| serde_json::from_str(&h).ok());
            first = handle.map_or(String::new(), |h| {
                h["worker"].as_str().unwrap_or("").to_owned()
            });
            !first.is_empty()
        });
        let cut: u32 = first.trim_start_matches('w').parse().unwrap();
        self.hosts.link(cut, false);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !(self.step(run, "placed")["attempt"] == 2 && self.step(run, "state") == "running") {
            let events = call(&self.address, &format!("/api/v1/runs/{run}/events"), None);
            let workers = call(&self.address, "/api/v1/workers", None);
            assert!(
                std::time::Instant::now() < deadline,
                "the try never ran again on the other worker than w{cut}: {events} {workers}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let handle = self.step(run, "placed")["handle"]
            .as_str()
            .unwrap()
            .to_owned();
        let handle: Value = serde_json::from_str(&handle).unwrap();
        assert_ne!(handle["worker"], first.as_str());
        cut
    }

    /// The step's events of `run`, `kind(attempt)`.
    fn events(&self, run: &str) -> Vec<String> {
        let events = call(&self.address, &format!("/api/v1/runs/{run}/events"), None);
        (events["events"].as_array().unwrap().iter())
            .filter(|e| e["step"] == "long")
            .map(|e| format!("{}({})", e["kind"].as_str().unwrap(), e["attempt"]))
            .collect()
    }
}

fn worker(hosts: &Hosts, cli: &Cli, address: &str, i: u32) -> Child {
    let (ns, _, _) = hosts.names(i);
    Command::new("ip")
        .args(["netns", "exec", &ns, env!("CARGO_BIN_EXE_apollo11")])
        .arg("--token-file")
        .arg(cli.file("worker-token"))
        .args(["worker", "--server", &format!("http://{address}")])
        .args(["--name", &format!("w{i}"), "--labels", "role=db"])
        .args(["--heartbeat-every", "1s", "--work-dir"])
        .arg(cli.file(&format!("work-{i}")))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Seconds no other test sleeps, so that `pgrep` finds this test's tries only.
fn seconds(base: u32) -> u32 {
    base + std::process::id() % 7
}

#[test]
fn a_worker_cut_off_loses_its_try_which_runs_elsewhere_and_its_late_result_is_refused() {
    let c = Cluster::new();
    let seconds = seconds(6);
    let cut = c.cut_while_running("r1", seconds);
    wait_until("the cut-off try ended", || {
        sleeping(&seconds.to_string()) == 1
    });
    c.hosts.link(cut, true);
    wait_until("the run succeeded", || {
        call(&c.address, "/api/v1/runs/r1", None)["state"] == "succeeded"
    });
    let kinds = c.events("r1");
    assert_eq!(
        kinds,
        [
            "started(1)",
            "placed(1)",
            "failed(1)",
            "started(2)",
            "placed(2)",
            "attempt_usage(2)",
            "succeeded(2)"
        ]
    );
    wait_until("the late result refused", || {
        let log = std::fs::read_to_string(c.cli.file("server.log")).unwrap_or_default();
        log.contains("a try's result refused")
    });
    let listed = call(&c.address, "/api/v1/workers", None);
    assert_eq!(listed["lost"], 1, "{listed}");
    assert_eq!(
        listed["workers"].as_array().unwrap().len(),
        2,
        "the healed worker is back"
    );
}

#[test]
fn a_cut_off_worker_healed_while_its_try_runs_kills_it() {
    let c = Cluster::new();
    let seconds = seconds(40);
    let cut = c.cut_while_running("r1", seconds);
    assert_eq!(
        sleeping(&seconds.to_string()),
        2,
        "the cut-off try still runs beside the new one"
    );
    c.hosts.link(cut, true);
    wait_until(
        "the healed worker killed the try the server no longer wants",
        || sleeping(&seconds.to_string()) == 1,
    );
    let kinds = c.events("r1");
    assert_eq!(
        kinds,
        [
            "started(1)",
            "placed(1)",
            "failed(1)",
            "started(2)",
            "placed(2)"
        ]
    );
}
