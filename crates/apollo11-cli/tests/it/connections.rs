//! `apollo11 serve` under a flood of idle and slow connections, on a small file limit: the
//! server keeps answering `/healthz` (or refuses past its cap, never hangs), the run it
//! drives meanwhile finishes with every step run once, and the server closes the idle and
//! slow connections itself after `--header-timeout`.

use crate::harness::{record, serving_address, wait_until, Cli};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The server's file limit: a few hundred descriptors, so a thousand sockets exhaust it.
const FILE_LIMIT: u32 = 256;
const IDLE_SOCKETS: usize = 1_000;
const SLOW_SOCKETS: usize = 40;
const HEADER_TIMEOUT_S: u64 = 2;
const STEPS: usize = 5;
/// Concurrent reads of a run in a burst.
const READERS: usize = 300;

fn workflow() -> String {
    let mut toml = "[workflow]\nname = \"busy\"\n".to_owned();
    for n in 0..STEPS {
        let after = match n {
            0 => String::new(),
            _ => format!("depends_on = [\"s{}\"]\n", n - 1),
        };
        toml += &format!(
            "[[steps]]\nname = \"s{n}\"\nrun = \"sleep 0.4; ls > /dev/null; {}\"\n\
             idempotency = \"natural\"\nretry = {{ max_attempts = 3 }}\n{after}",
            record(&format!("s{n}"))
        );
    }
    toml
}

/// A server process, killed when dropped (a failed assertion included).
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `apollo11 serve` under `prlimit --nofile=LIMIT`, and its address; the test's own soft
/// file limit raised to its hard one, for the sockets it opens.
fn serve_limited(cli: &Cli, limit: u32) -> (Served, String) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    let serve = cli.command(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--workflows",
        cli.work.path().to_str().unwrap(),
    ]);
    let mut child = std::process::Command::new("prlimit")
        .arg(format!("--nofile={limit}:{limit}"))
        .arg("--")
        .arg(serve.get_program())
        .args(serve.get_args())
        .current_dir(cli.work.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("prlimit (util-linux) runs the server");
    let address = serving_address(&mut child);
    (Served(child), address)
}

/// A connection, or none if the server's backlog keeps it waiting over a second.
fn connect(address: &str) -> std::io::Result<TcpStream> {
    TcpStream::connect_timeout(&address.parse().unwrap(), Duration::from_secs(1))
}

/// One request on a connection of its own; the status, or why there is none within `wait`.
fn request(address: &str, head: &str, body: &str, wait: Duration) -> Result<u16, String> {
    let mut stream = connect(address).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(wait)).unwrap();
    let text = format!(
        "{head} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(text.as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| format!("read: {e}"))?;
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {answer:?}"))
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Sockets that send a request's head a byte at a time, never finishing it.
fn slow_sockets(address: &str) -> std::thread::JoinHandle<()> {
    let mut sockets: Vec<TcpStream> = (0..SLOW_SOCKETS)
        .map_while(|_| connect(address).ok())
        .collect();
    std::thread::spawn(move || {
        for byte in b"GET /healthz HTTP/1.1\r\nHost: slow\r\nX-Slow: "
            .iter()
            .cycle()
        {
            sockets.retain_mut(|s| s.write_all(&[*byte]).is_ok());
            if sockets.is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

#[test]
fn idle_and_slow_connections_neither_stall_the_server_nor_fail_its_steps() {
    let cli = Cli::new();
    cli.workflow("busy.toml", &workflow());
    let (server, address) = serve_limited(&cli, FILE_LIMIT);
    let pid = server.0.id();
    let baseline = open_fds(pid);
    let started = request(
        &address,
        "POST /api/v1/runs",
        r#"{"workflow": "busy", "run_id": "r"}"#,
        Duration::from_secs(5),
    );
    assert!(matches!(started, Ok(200..=299)), "{started:?}");

    let slow = slow_sockets(&address);
    let idle: Vec<TcpStream> = (0..IDLE_SOCKETS)
        .map_while(|_| connect(&address).ok())
        .collect();
    let (flooded, mut refused) = (Instant::now(), 0);
    while flooded.elapsed() < Duration::from_secs(HEADER_TIMEOUT_S + 1) {
        let asked = Instant::now();
        let health = request(&address, "GET /healthz", "", Duration::from_secs(3));
        assert!(
            matches!(health, Ok(200 | 503)),
            "/healthz under {} open sockets: {health:?} after {:?}",
            idle.len(),
            asked.elapsed()
        );
        refused += usize::from(health == Ok(503));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(refused > 0, "the cap was never reached");

    wait_until("the server closes the idle and slow sockets", || {
        open_fds(pid) <= baseline + 16
    });
    slow.join().unwrap();
    let mut first = &idle[0];
    first
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let ended = first.read_to_end(&mut Vec::new());
    assert!(
        ended.is_ok(),
        "an idle socket is closed by the server: {ended:?}"
    );
    wait_until("the run ends", || {
        cli.status_json("r")["state"] != "running"
    });
    assert_eq!(cli.status_json("r")["state"], "succeeded");
    let once: Vec<String> = (0..STEPS).map(|n| format!("s{n} 1")).collect();
    assert_eq!(cli.ledger(), once, "every step ran once, none failed");
    assert_eq!(
        request(&address, "GET /healthz", "", Duration::from_secs(3)),
        Ok(200)
    );
}

fn threads(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_burst_of_reads_starts_no_more_threads_than_the_blocking_pool_holds() {
    let cli = Cli::new();
    let busy = cli.workflow("busy.toml", &workflow().replace("sleep 0.4; ", ""));
    assert_eq!(
        cli.run(&["run", busy.to_str().unwrap(), "--run-id", "r"])
            .code,
        0
    );
    let (server, address) = serve_limited(&cli, 4 * FILE_LIMIT);
    let pid = server.0.id();
    let before = threads(pid);
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let address = address.clone();
            std::thread::spawn(move || {
                request(&address, "GET /api/v1/runs/r", "", Duration::from_secs(20))
            })
        })
        .collect();
    let mut peak = before;
    while readers.iter().any(|r| !r.is_finished()) {
        peak = peak.max(threads(pid));
        std::thread::sleep(Duration::from_millis(2));
    }
    // The allocator's purging threads (jemalloc starts up to one a core, when first needed)
    // may start during the burst too.
    let purgers = std::thread::available_parallelism().map_or(1, usize::from);
    let bound = before + apollo11_runtime::BLOCKING_THREADS_MAX + purgers;
    assert!(
        peak <= bound,
        "{peak} threads in the burst, {before} before"
    );
    for reader in readers {
        let read = reader.join().unwrap();
        assert!(matches!(read, Ok(200 | 503)), "{read:?}");
    }
}
