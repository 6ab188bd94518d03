//! `cargo xtask ui [--paint]`: the web UI in a real browser. Builds the `apollo11` binary,
//! installs the browser test's one package (`npm ci`), starts `apollo11 serve` on a free
//! loopback port with a temporary data dir, the test's workflows and a token, waits for
//! `/healthz`, starts one `apollo11 worker` for it (`WORKER`, with the workers' token), then
//! runs `ui.test.mjs` (or, with `--paint`, `paint.mjs`, which prints its
//! figures as JSON) against it with Debian's Chromium; then (not with `--paint`)
//! `attack.test.mjs`, other sites' pages against a second server, without a token; stops the
//! servers, the worker and removes the temporary dir whatever happened. Screenshots land in
//! `target/ui-screenshots/`.

use crate::serve::{command, stop, worker_token, Scratch, Serve};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The browser test's folder, from the repository root.
const BROWSER: &str = "crates/apollo11-server/tests/browser";
/// The token the server is started with (the UI is asked for it on its first call).
const TOKEN: &str = "ui-test-token-0123456789";
/// The name of the test's one worker (the test reads it from `APOLLO11_UI_WORKER`).
const WORKER: &str = "ui-w1";
/// Its labels: `role=ui`, which the `placed` workflow's step needs by default, and a value
/// the workers page must show as text.
const WORKER_LABELS: &str = r#"role=ui,note=<b>bold</b> <script>window.pwned = 1</script> "it's""#;

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let script = match args {
        [] => "ui.test.mjs",
        [flag] if flag == "--paint" => "paint.mjs",
        _ => bail!("usage: cargo xtask ui [--paint]"),
    };
    crate::build_loaded(root)?;
    let browser = root.join(BROWSER);
    command(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&browser),
        "npm ci (node and npm: .ci/run installs them)",
    )?;
    let target = crate::tidy::target_dir(root)?;
    let scratch = Scratch::new("ui")?;
    let token = scratch.0.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).context("writing the token file")?;
    let workflows = scratch.0.join("workflows");
    command(
        Command::new("node")
            .arg("workflows.mjs")
            .arg(&workflows)
            .current_dir(&browser),
        "node workflows.mjs",
    )?;
    let server = Serve::start(
        &target.join("debug/apollo11"),
        &scratch.0.join("data"),
        &workflows,
        Some(&token),
        None,
    )?;
    let _worker = worker(&target.join("debug/apollo11"), &server, &token, &scratch.0)?;
    command(
        Command::new("node")
            .arg(script)
            .arg(format!("http://{}", server.addr))
            .env("APOLLO11_UI_TOKEN", TOKEN)
            .env("APOLLO11_UI_WORKER", WORKER)
            .env("APOLLO11_UI_SHOTS", target.join("ui-screenshots"))
            .current_dir(&browser),
        &format!("node {script}"),
    )?;
    if script == "ui.test.mjs" {
        attacks(
            &target.join("debug/apollo11"),
            &scratch.0,
            &workflows,
            &browser,
        )?;
    }
    Ok(())
}

/// An `apollo11 worker` process, stopped when dropped.
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        stop(&mut self.0);
    }
}

/// Starts the test's worker for `server` (started with the token file `token`), its tries'
/// files under `scratch`.
fn worker(apollo11: &Path, server: &Serve, token: &Path, scratch: &Path) -> Result<Worker> {
    let child = Command::new(apollo11)
        .arg("--token-file")
        .arg(worker_token(token))
        .args(["worker", "--server", &format!("http://{}", server.addr)])
        .args(["--name", WORKER, "--labels", WORKER_LABELS, "--slots", "2"])
        .args(["--heartbeat-every", "1s", "--work-dir"])
        .arg(scratch.join("worker"))
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {} worker", apollo11.display()))?;
    Ok(Worker(child))
}

/// `attack.test.mjs` against a server of its own without a token: the one a page of another
/// site could reach with no secret to guess.
fn attacks(apollo11: &Path, scratch: &Path, workflows: &Path, browser: &Path) -> Result<()> {
    let server = Serve::start(apollo11, &scratch.join("open"), workflows, None, None)?;
    command(
        Command::new("node")
            .arg("attack.test.mjs")
            .arg(format!("http://{}", server.addr))
            .current_dir(browser),
        "node attack.test.mjs",
    )
}
