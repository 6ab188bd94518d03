//! `cargo xtask api-fuzz [--examples N] [--seed S]`: the HTTP API against its own OpenAPI
//! document with schemathesis (`st`, pinned and installed by `.ci/run`). Builds the
//! `apollo11` binary, starts `apollo11 serve` on a temporary data dir with a token and the
//! browser test's `flaky` workflow, starts a few runs and waits until they pause (its first
//! try fails on purpose), then runs `st run openapi.json` with the token: every response must
//! be no 5xx, its status one the document lists and its body match the document's schema.
//! Its JUnit report (and st's cache) land in `target/api-fuzz/`.

use crate::serve::{command, Scratch, Serve};
use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The schemathesis release `.ci/run` installs; `st --version` must print it.
pub const SCHEMATHESIS: &str = "4.32.5";
/// The API's OpenAPI document, from the repository root.
const OPENAPI: &str = "crates/apollo11-server/src/openapi.json";
/// The browser test's workflows: `flaky` pauses a run on its first try.
const WORKFLOWS: &str = "crates/apollo11-server/tests/browser/workflows";
/// What every response is checked for.
const CHECKS: &str = "not_a_server_error,status_code_conformance,response_schema_conformance";
/// The token the server is started with.
const TOKEN: &str = "api-fuzz-token-0123456789";
/// Runs started before schemathesis (its stateful phase starts more).
const RUNS: usize = 3;
/// How long the runs may take to pause.
const SETTLE: Duration = Duration::from_secs(30);

/// Test cases per operation and phase, and the seed (a fresh one when not given).
struct Args {
    examples: u32,
    seed: Option<u64>,
}

impl Args {
    fn parse(args: &[String]) -> Result<Args> {
        let mut parsed = Args {
            examples: 5,
            seed: None,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let value = args.next();
            let number = |what: &str| -> Result<u64> {
                let value = value.with_context(|| format!("{arg} takes {what}"))?;
                value
                    .parse()
                    .with_context(|| format!("{arg} takes {what}, not `{value}`"))
            };
            match arg.as_str() {
                "--examples" => parsed.examples = u32::try_from(number("a count")?)?,
                "--seed" => parsed.seed = Some(number("a number")?),
                other => bail!(
                    "unknown argument `{other}`; usage: cargo xtask api-fuzz [--examples N] [--seed S]"
                ),
            }
        }
        Ok(parsed)
    }
}

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let args = Args::parse(args)?;
    require_schemathesis()?;
    crate::build_loaded(root)?;
    let target = crate::tidy::target_dir(root)?;
    let scratch = Scratch::new("api-fuzz")?;
    let apollo11 = target.join("debug/apollo11");
    let token = scratch.0.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).context("writing the token file")?;
    let server = Serve::start(
        &apollo11,
        &scratch.0.join("data"),
        &root.join(WORKFLOWS),
        Some(&token),
        None,
    )?;
    start_runs(&server.addr)?;
    let reports = target.join("api-fuzz");
    std::fs::create_dir_all(&reports).with_context(|| format!("creating {}", reports.display()))?;
    let mut st = Command::new("st");
    // Run from target/: st keeps a cache (.schemathesis/) in its working dir.
    st.current_dir(&reports)
        .arg("run")
        .arg(root.join(OPENAPI))
        .args(["--url", &format!("http://{}", server.addr)])
        .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--checks", CHECKS])
        .args(["--max-examples", &args.examples.to_string()])
        .args(["--no-color", "--report", "junit", "--report-dir"])
        .arg(&reports);
    if let Some(seed) = args.seed {
        st.args(["--seed", &seed.to_string()]);
    }
    command(&mut st, "st run openapi.json (schemathesis)")
}

/// Fails with what to install unless `st` is the pinned schemathesis.
fn require_schemathesis() -> Result<()> {
    let install = format!("pip install schemathesis=={SCHEMATHESIS}");
    let output = Command::new("st")
        .arg("--version")
        .output()
        .with_context(|| format!("running st --version (schemathesis: {install})"))?;
    let version = String::from_utf8_lossy(&output.stdout);
    ensure!(
        version.trim().ends_with(SCHEMATHESIS),
        "st --version says `{}`, not {SCHEMATHESIS}: {install}",
        version.trim()
    );
    Ok(())
}

/// Starts [`RUNS`] runs of `flaky` and waits until each has paused.
fn start_runs(addr: &str) -> Result<()> {
    let body = r#"{"workflow":"flaky"}"#;
    let mut ids = Vec::new();
    for _ in 0..RUNS {
        let (status, answer) =
            crate::http::authorized(addr, TOKEN, "POST", "/api/v1/runs", Some(body))?;
        ensure!(status == 201, "starting a run of flaky: {status} {answer}");
        let answer: Value =
            serde_json::from_str(&answer).context("the answer to POST /api/v1/runs")?;
        ids.push(answer["run_id"].as_str().context("no run_id")?.to_owned());
    }
    let deadline = Instant::now() + SETTLE;
    for id in &ids {
        while state(addr, id)? != "paused" {
            ensure!(
                Instant::now() < deadline,
                "run {id} did not pause within {SETTLE:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

/// The state of run `id`.
fn state(addr: &str, id: &str) -> Result<String> {
    let (status, answer) =
        crate::http::authorized(addr, TOKEN, "GET", &format!("/api/v1/runs/{id}"), None)?;
    ensure!(status == 200, "GET /api/v1/runs/{id}: {status} {answer}");
    let run: Value = serde_json::from_str(&answer)
        .with_context(|| format!("the answer to GET /api/v1/runs/{id}"))?;
    Ok(run["state"]
        .as_str()
        .context("a run without a state")?
        .to_owned())
}
