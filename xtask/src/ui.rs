//! `cargo xtask ui [--paint]`: the web UI in a real browser. Builds the `apollo11` binary,
//! installs the browser test's one package (`npm ci`), starts `apollo11 serve` on a free
//! loopback port with a temporary data dir, the test's workflows and a token, waits for
//! `/healthz`, then runs `ui.test.mjs` (or, with `--paint`, `paint.mjs`, which prints its
//! figures as JSON) against it with Debian's Chromium; stops the server and removes the
//! temporary dir whatever happened. Screenshots land in `target/ui-screenshots/`.

use anyhow::{bail, ensure, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The browser test's folder, from the repository root.
const BROWSER: &str = "crates/apollo11-server/tests/browser";
/// The token the server is started with (the UI is asked for it on its first call).
const TOKEN: &str = "ui-test-token-0123456789";
/// How long the server may take to answer `/healthz`.
const READY: Duration = Duration::from_secs(30);

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let script = match args {
        [] => "ui.test.mjs",
        [flag] if flag == "--paint" => "paint.mjs",
        _ => bail!("usage: cargo xtask ui [--paint]"),
    };
    crate::cargo(&["build", "-p", "apollo11-cli", "--locked"])?;
    let browser = root.join(BROWSER);
    command(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&browser),
        "npm ci (node and npm: .ci/run installs them)",
    )?;
    let target = crate::tidy::target_dir(root)?;
    let scratch = Scratch::new()?;
    let workflows = scratch.0.join("workflows");
    command(
        Command::new("node")
            .arg("workflows.mjs")
            .arg(&workflows)
            .current_dir(&browser),
        "node workflows.mjs",
    )?;
    let server = Serve::start(&target.join("debug/apollo11"), &scratch.0, &workflows)?;
    command(
        Command::new("node")
            .arg(script)
            .arg(format!("http://{}", server.addr))
            .env("APOLLO11_UI_TOKEN", TOKEN)
            .env("APOLLO11_UI_SHOTS", target.join("ui-screenshots"))
            .current_dir(&browser),
        &format!("node {script}"),
    )
}

fn command(command: &mut Command, what: &str) -> Result<()> {
    eprintln!("$ {what}");
    let status = command
        .status()
        .with_context(|| format!("running {what}"))?;
    ensure!(status.success(), "{what} failed: {status}");
    Ok(())
}

/// A temporary dir, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("apollo11-ui-{}", std::process::id()));
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
struct Serve {
    child: Child,
    addr: String,
    /// Kept open: the server's stdout, which it may still write to.
    _stdout: BufReader<ChildStdout>,
}

impl Serve {
    fn start(apollo11: &Path, scratch: &Path, workflows: &Path) -> Result<Serve> {
        let token = scratch.join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).context("writing the token file")?;
        let mut child = Command::new(apollo11)
            .arg("--data-dir")
            .arg(scratch.join("data"))
            .args(["serve", "--listen", "127.0.0.1:0", "--workflows"])
            .arg(workflows)
            .arg("--token-file")
            .arg(&token)
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
