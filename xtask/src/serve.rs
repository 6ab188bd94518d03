//! One `apollo11 serve` process for the xtasks that drive a server (`ui`, `soak`): started on
//! a port the system chose, its workers given a token of their own, ready once `/healthz`
//! answers, stopped (SIGTERM, then SIGKILL) when dropped; and a temporary dir removed when
//! dropped.

use anyhow::{ensure, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to answer `/healthz`.
const READY: Duration = Duration::from_secs(30);
/// How long a SIGTERM may take to stop it.
const STOP: Duration = Duration::from_secs(10);

/// A temporary dir, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// `$TMPDIR/apollo11-NAME-PID`, created.
    pub fn new(name: &str) -> Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("apollo11-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `apollo11 serve` on a port the system chose.
pub struct Serve {
    child: Child,
    pub addr: String,
    /// Kept open: the server's stdout, which it may still write to.
    _stdout: BufReader<ChildStdout>,
}

/// How to start a server: what [`Serve::start`] takes, and more arguments.
pub struct Launch<'a> {
    pub apollo11: &'a Path,
    pub data: &'a Path,
    pub workflows: &'a Path,
    pub token: Option<&'a Path>,
    /// Its stderr (its log) goes there, appended; inherited without one.
    pub log: Option<&'a Path>,
    /// More arguments of `serve`.
    pub extra: &'a [&'a str],
}

impl Serve {
    /// Starts `apollo11 --data-dir DATA serve --workflows WORKFLOWS [--token-file TOKEN]`,
    /// its stderr (its log) to `log` or inherited, and waits until it answers `/healthz`.
    pub fn start(
        apollo11: &Path,
        data: &Path,
        workflows: &Path,
        token: Option<&Path>,
        log: Option<&Path>,
    ) -> Result<Serve> {
        let launch = Launch {
            apollo11,
            data,
            workflows,
            token,
            log,
            extra: &[],
        };
        Serve::launch(&launch, "127.0.0.1:0")
    }

    /// Starts the server `launch` says on `listen`, and waits until it answers `/healthz`.
    /// With a token, workers get one of their own (`TOKEN.worker`): the operator's opens
    /// no worker route (and so no long poll for tries).
    pub fn launch(launch: &Launch<'_>, listen: &str) -> Result<Serve> {
        let mut command = Command::new(launch.apollo11);
        command
            .arg("--data-dir")
            .arg(launch.data)
            .args(["serve", "--listen", listen, "--workflows"])
            .arg(launch.workflows)
            .args(launch.extra);
        if let Some(token) = launch.token {
            let worker_token = worker_token(token);
            std::fs::write(&worker_token, "worker-token-of-xtask-serve\n")
                .with_context(|| format!("writing {}", worker_token.display()))?;
            command.arg("--token-file").arg(token);
            command.arg("--worker-token-file").arg(worker_token);
        }
        if let Some(log) = launch.log {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .with_context(|| format!("opening {}", log.display()))?;
            command.stderr(file);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} serve", launch.apollo11.display()))?;
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

    /// SIGKILL, and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `None` while the server runs; its exit status once it has exited.
    pub fn exited(&mut self) -> Result<Option<ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    /// SIGTERM, then SIGKILL after `STOP`; the exit status, `None` if it had to be killed.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        stop(&mut self.child)
    }
}

/// The file of the workers' token of a server started with the token file `token`.
pub fn worker_token(token: &Path) -> PathBuf {
    token.with_extension("worker")
}

/// SIGTERM, then SIGKILL after `STOP`; the exit status, `None` if it had to be killed.
pub fn stop(child: &mut Child) -> Option<ExitStatus> {
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let deadline = Instant::now() + STOP;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

impl Drop for Serve {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            self.stop();
        }
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

/// Runs `command`, failing with `what` unless it succeeds.
pub fn command(command: &mut Command, what: &str) -> Result<()> {
    eprintln!("$ {what}");
    let status = command
        .status()
        .with_context(|| format!("running {what}"))?;
    ensure!(status.success(), "{what} failed: {status}");
    Ok(())
}
