//! `apollo11 serve` as a process, and the commands that reach it over its API when it holds
//! the data dir: `run`, `pause`, `resume`, `override`, `rollback`; read-only commands read
//! the data dir as before.

use crate::harness::{serving_address, wait_until, Cli};
use std::process::{Child, Stdio};

const GATED: &str = r#"[workflow]
name = "gated"
[[steps]]
name = "wait"
run = "while [ ! -f gate ]; do sleep 0.02; done"
idempotency = "natural"
[[steps]]
name = "after"
run = "true"
idempotency = "natural"
depends_on = ["wait"]
"#;

const STUCK: &str = r#"[workflow]
name = "stuck"
on_failure = "pause"
[[steps]]
name = "fails"
run = "exit 3"
idempotency = "natural"
retry = { max_attempts = 1 }
"#;

/// `apollo11 serve` on the test's data dir with its work folder as `--workflows`; returns
/// the process and its address.
pub fn serve(cli: &Cli) -> (Child, String) {
    serve_with(cli, &[])
}

/// [`serve`] with more arguments.
fn serve_with(cli: &Cli, more: &[&str]) -> (Child, String) {
    let workflows = cli.work.path().to_str().unwrap().to_owned();
    let mut args = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--workflows",
        &workflows,
    ];
    args.extend_from_slice(more);
    let mut child = cli
        .command(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let address = serving_address(&mut child);
    (child, address)
}

pub fn state(cli: &Cli, run: &str) -> String {
    cli.status_json(run)["state"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn run_pause_resume_override_and_rollback_reach_the_server_holding_the_data_dir() {
    let cli = Cli::new();
    let gated = cli.workflow("gated.toml", GATED);
    let stuck = cli.workflow("stuck.toml", STUCK);
    let (mut server, address) = serve(&cli);

    let following = cli.spawn(&["run", gated.to_str().unwrap(), "--run-id", "g"]);
    wait_until("g waits", || {
        cli.run(&["status", "g", "--json"]).code == 0
            && cli.status_json("g")["steps"]["wait"]["state"] == "running"
    });
    let paused = cli.run(&["pause", "g", "--reason", "hold", "--by", "tester"]);
    assert_eq!(paused.code, 0, "{}", paused.stderr);
    assert!(
        paused.stdout.contains("pause recorded, by tester (hold)"),
        "{}",
        paused.stdout
    );
    std::fs::write(cli.file("gate"), "").unwrap();
    let followed = crate::harness::ran(following.wait_with_output().unwrap());
    assert_eq!(
        followed.code, 1,
        "a paused run: {}{}",
        followed.stdout, followed.stderr
    );
    assert!(
        followed
            .stdout
            .contains(&format!("g: paused (driven by the server at {address})")),
        "{}",
        followed.stdout
    );
    let resumed = cli.run(&["resume", "g"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert!(
        resumed.stdout.contains("g: succeeded"),
        "{}",
        resumed.stdout
    );
    let late = cli.run(&["rollback", "g", "--reason", "too late"]);
    assert_eq!(late.code, 2, "{}", late.stderr);
    assert!(late.stderr.contains("finished"), "{}", late.stderr);

    let failed = cli.run(&["run", stuck.to_str().unwrap(), "--run-id", "s", "--json"]);
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    let shown: serde_json::Value = serde_json::from_str(&failed.stdout).unwrap();
    assert_eq!(shown["state"], "paused");
    assert_eq!(shown["steps"]["fails"]["state"], "failed");
    let fixed = cli.run(&[
        "override",
        "s",
        "fails",
        "--to",
        "succeeded",
        "--reason",
        "by hand",
    ]);
    assert_eq!(fixed.code, 0, "{}", fixed.stderr);
    wait_until("s succeeds", || state(&cli, "s") == "succeeded");
    let runs = cli.run(&["runs"]);
    assert_eq!(
        runs.code, 0,
        "read-only commands read the data dir: {}",
        runs.stderr
    );

    let second = cli.run(&["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(second.code, 4, "{}", second.stderr);
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn serve_refuses_a_non_loopback_address_without_a_token_and_a_short_token() {
    let cli = Cli::new();
    let open = cli.run(&["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(open.code, 2, "{}", open.stderr);
    assert!(open.stderr.contains("--token-file"), "{}", open.stderr);
    std::fs::write(cli.file("token"), "short\n").unwrap();
    let token = cli.file("token");
    let short = cli.run(&[
        "--token-file",
        token.to_str().unwrap(),
        "serve",
        "--listen",
        "0.0.0.0:0",
    ]);
    assert_eq!(short.code, 2, "{}", short.stderr);
    assert!(short.stderr.contains("at least 16"), "{}", short.stderr);
}

#[test]
fn serve_refuses_a_lease_ttl_that_is_not_a_duration_or_out_of_range() {
    let cli = Cli::new();
    for (ttl, says) in [
        ("soon", "--lease-ttl"),
        ("100ms", "300ms"),
        ("1year", "allowed"),
    ] {
        let out = cli.run(&["serve", "--listen", "127.0.0.1:0", "--lease-ttl", ttl]);
        assert_eq!(out.code, 2, "{ttl}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{ttl}: {}", out.stderr);
    }
}

const WHICH: &str = r#"[workflow]
name = "which"
[[steps]]
name = "say"
run = "echo served > said"
idempotency = "natural"
"#;

#[test]
fn run_of_a_file_the_server_defines_otherwise_is_refused_unless_the_served_one_is_asked_for() {
    let cli = Cli::new();
    cli.workflow("which.toml", WHICH);
    let elsewhere = cli.file("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let mine = elsewhere.join("which.toml");
    std::fs::write(&mine, WHICH.replace("echo served", "echo mine")).unwrap();
    let (mut server, address) = serve(&cli);

    let refused = cli.run(&["run", mine.to_str().unwrap(), "--run-id", "refused-run"]);
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);
    for says in [
        mine.to_str().unwrap(),
        "workflow `which`",
        &format!("the server at {address}"),
        "which.toml, definition digest",
        "--use-served",
    ] {
        assert!(refused.stderr.contains(says), "{says}: {}", refused.stderr);
    }
    assert!(
        !cli.run(&["runs"]).stdout.contains("refused-run"),
        "nothing was started"
    );

    let served = cli.run(&[
        "run",
        mine.to_str().unwrap(),
        "--run-id",
        "s",
        "--use-served",
    ]);
    assert_eq!(served.code, 0, "{}{}", served.stdout, served.stderr);
    assert_eq!(
        std::fs::read_to_string(cli.file("said")).unwrap(),
        "served\n"
    );
    assert!(
        !elsewhere.join("said").exists(),
        "the file's command never ran"
    );
    server.kill().unwrap();
    server.wait().unwrap();
}

/// The status of `GET /healthz` asked of `address` under the name `host`.
fn healthz_as(address: &str, host: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.get(9..12).unwrap_or_default().to_owned()
}

#[test]
fn serve_answers_under_the_names_of_allow_host_only_and_refuses_one_that_is_no_host() {
    let cli = Cli::new();
    let bad = cli.run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--allow-host",
        "http://x/",
    ]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("--allow-host `http://x/`"),
        "{}",
        bad.stderr
    );
    let (mut child, address) = serve_with(&cli, &["--allow-host", "apollo.internal"]);
    let address = address.as_str();
    let port = address.rsplit_once(':').unwrap().1;
    assert_eq!(healthz_as(address, address), "200");
    assert_eq!(healthz_as(address, "apollo.internal"), "200");
    assert_eq!(healthz_as(address, &format!("localhost:{port}")), "200");
    assert_eq!(
        healthz_as(address, &format!("attacker.example:{port}")),
        "403"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
