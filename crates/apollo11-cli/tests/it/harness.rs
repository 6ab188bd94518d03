//! Runs the `apollo11` binary on a fresh data dir and a fresh workflow folder.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Cli {
    pub data: tempfile::TempDir,
    pub work: tempfile::TempDir,
}

pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Cli {
    pub fn new() -> Cli {
        Cli {
            data: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_apollo11"));
        cmd.arg("--data-dir")
            .arg(self.data.path())
            .args(args)
            .env_remove("APOLLO11_DATA_DIR")
            .env_remove("APOLLO11_SEGMENT_BYTES");
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Ran {
        ran(self.command(args).stdin(Stdio::null()).output().unwrap())
    }

    /// Runs the binary from `cwd` with `--data-dir` as given (relative or not).
    pub fn run_at(&self, cwd: &Path, data_dir: &str, args: &[&str]) -> Ran {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_apollo11"));
        cmd.current_dir(cwd)
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .env_remove("APOLLO11_DATA_DIR")
            .env_remove("APOLLO11_SEGMENT_BYTES")
            .stdin(Stdio::null());
        ran(cmd.output().unwrap())
    }

    /// Runs the binary, killing it if it has not ended within `seconds`: for tests of what
    /// used to hang, so that they fail instead. Its output is read while it runs, so a
    /// child writing more than a pipe holds does not wait on the test.
    pub fn run_within(&self, seconds: u64, args: &[&str]) -> Ran {
        let mut child = self.spawn(args);
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let mut killed = false;
        while child.try_wait().unwrap().is_none() && !killed {
            if Instant::now() > deadline {
                child.kill().unwrap();
                killed = true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = child.wait().unwrap();
        let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
        assert!(
            !killed,
            "{args:?} still running after {seconds} s:\n{stdout}{stderr}"
        );
        Ran {
            code: status.code().unwrap_or(-1),
            stdout,
            stderr,
        }
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Writes a workflow file into the work folder and returns its path.
    pub fn workflow(&self, name: &str, toml: &str) -> PathBuf {
        let path = self.work.path().join(name);
        std::fs::write(&path, toml).unwrap();
        path
    }

    /// Runs the workflow `toml` once under each of `runs`, on 4 KiB segments (so that the
    /// runs seal several); each succeeds.
    pub fn run_on_small_segments(&self, toml: &str, runs: &[&str]) {
        let wf = self.workflow("wf.toml", toml);
        for run in runs {
            let args = [
                "--segment-bytes",
                "4096",
                "run",
                wf.to_str().unwrap(),
                "--run-id",
                run,
            ];
            let out = self.run(&args);
            assert_eq!(out.code, 0, "{}", out.stderr);
        }
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    /// `(step, attempt)` lines the steps appended to `ledger` in the work folder.
    pub fn ledger(&self) -> Vec<String> {
        std::fs::read_to_string(self.file("ledger"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub fn status_json(&self, run: &str) -> serde_json::Value {
        let out = self.run(&["status", run, "--json"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        serde_json::from_str(&out.stdout).unwrap()
    }

    pub fn events_json(&self, run: &str) -> Vec<serde_json::Value> {
        let out = self.run(&["events", run, "--json"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

pub fn ran(out: Output) -> Ran {
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Waits (bounded) for a file a step creates: the test's only view into another process.
pub fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (bounded) until `done` says so, polling: for states only visible through the log.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A step line that records its execution in `ledger`.
pub fn record(step: &str) -> String {
    format!("echo \\\"{step} $APOLLO11_ATTEMPT\\\" >> ledger")
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// Whether a process is gone, giving the kernel a bounded moment to finish a SIGKILL.
pub fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Checks that an exit-3 message points to `verify` and to `repair`, once each (the advice
/// is the CLI's, added once, never also carried by the library's error), and is no panic.
pub fn assert_damage_advice(args: &[&str], stderr: &str) {
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    for command in ["`apollo11 verify`", "`apollo11 repair`"] {
        assert_eq!(
            stderr.matches(command).count(),
            1,
            "{args:?} must point to {command} once: {stderr}"
        );
    }
}

/// Reads a child's pipe to its end on a thread of its own.
fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// The address a `serve` child prints on its first line of stdout (`serving … at http://ADDR/`).
pub fn serving_address(child: &mut Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned()
}

/// The operator's and the workers' tokens of the tests that serve with workers.
pub const TOKEN: &str = "operator-token-0123456789";
pub const WORKER_TOKEN: &str = "worker-token-0123456789ab";

/// `GET path` (no body) or `POST path` with `body` to the server at `address`, with `token`.
pub fn api(
    address: &str,
    token: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> apollo11_client::Answer {
    let client = apollo11_client::Client::new(address, Some(token.to_owned()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(async {
            match body {
                Some(body) => client.post(path, &body).await,
                None => client.get(path).await,
            }
        })
        .unwrap()
}
