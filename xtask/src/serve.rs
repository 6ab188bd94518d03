//! `apollo11 serve` for the xtasks that drive a real server (`ui`, `api-fuzz`): a temporary
//! dir, the server started on a free loopback port with a token, waited for until `/healthz`
//! answers, and stopped (SIGTERM, then SIGKILL) when dropped.

use anyhow::{ensure, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to answer `/healthz`.
const READY: Duration = Duration::from_secs(30);

/// Runs `command`, failing with `what` unless it succeeds.
pub fn command(command: &mut Command, what: &str) -> Result<()> {
    eprintln!("$ {what}");
    let status = command
        .status()
        .with_context(|| format!("running {what}"))?;
    ensure!(status.success(), "{what} failed: {status}");
    Ok(())
}

/// A temporary dir, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh dir named for `what` and this process.
    pub fn new(what: &str) -> Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("apollo11-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `apollo11 serve` on a port the system chose, stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Serve {
    child: Child,
    /// Where it listens: `127.0.0.1:PORT`.
    pub addr: String,
    /// Kept open: the server's stdout, which it may still write to.
    _stdout: BufReader<ChildStdout>,
}

impl Serve {
    /// Starts `apollo11` on `scratch/data` with the workflows of `workflows`, requiring `token`.
    pub fn start(apollo11: &Path, scratch: &Path, workflows: &Path, token: &str) -> Result<Serve> {
        let token_file = scratch.join("token");
        std::fs::write(&token_file, format!("{token}\n")).context("writing the token file")?;
        let mut child = Command::new(apollo11)
            .arg("--data-dir")
            .arg(scratch.join("data"))
            .args(["serve", "--listen", "127.0.0.1:0", "--workflows"])
            .arg(workflows)
            .arg("--token-file")
            .arg(&token_file)
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} serve", apollo11.display()))?;
        let stdout = BufReader::new(child.stdout.take().context("the server's stdout")?);
        let mut server = Serve {
            child,
            addr: String::new(),
            _stdout: stdout,
        };
        server.addr = listening(&mut server._stdout)?;
        wait_healthy(&server.addr)?;
        eprintln!("apollo11 serve answers at http://{}/", server.addr);
        Ok(server)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address in the server's first line (`serving DIR at http://ADDR/ ...`).
fn listening(stdout: &mut BufReader<ChildStdout>) -> Result<String> {
    let mut line = String::new();
    stdout
        .read_line(&mut line)
        .context("reading the server's first line")?;
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .with_context(|| format!("the server said `{}`, not where it listens", line.trim()))?;
    Ok(addr.to_owned())
}

/// Polls `GET /healthz` until it answers 200.
fn wait_healthy(addr: &str) -> Result<()> {
    let deadline = Instant::now() + READY;
    loop {
        if healthz(addr).unwrap_or(false) {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "apollo11 serve at {addr} did not answer /healthz within {READY:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn healthz(addr: &str) -> Result<bool> {
    Ok(crate::http::request(addr, "GET", "/healthz", None)?.0 == 200)
}
