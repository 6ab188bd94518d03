//! `apollo11 schedule pause|resume` through real `serve` processes, on a schedule firing
//! every second: a paused schedule fires nothing, across a `kill -9` and a restart and on
//! another instance sharing a PostgreSQL database; resumed, it fires again.

use crate::harness::{wait_until, Cli};
use crate::schedules::{fired, serve_logged, serve_on, stop};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const BEAT: &str = "[workflow]\nname = \"beat\"\n[[steps]]\nname = \"s\"\nrun = \"true\"\n\
    idempotency = \"natural\"\n[schedules.tick]\ncron = \"* * * * * *\"\ncatch_up = \"none\"\n";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `apollo11 schedule VERB beat/tick` through `url`, with `more` arguments.
fn toggle(cli: &Cli, verb: &str, url: &str, more: &[&str]) -> crate::harness::Ran {
    let mut args = vec!["schedule", verb, "beat/tick", "--server", url];
    args.extend_from_slice(more);
    cli.run(&args)
}

/// The fire times of the runs of `beat/tick` after `ms`.
fn fires_after(cli: &Cli, store: &[&str], ms: u64) -> Vec<u64> {
    let runs = fired(cli, store, "beat", "tick");
    runs.into_iter().map(|r| r.0).filter(|&f| f > ms).collect()
}

#[test]
fn a_paused_schedule_fires_nothing_across_a_kill_9_until_resumed() {
    let cli = Cli::new();
    cli.workflow("beat.toml", BEAT);
    let (server, address) = serve_logged(&cli, "first.log");
    let url = format!("http://{address}");
    wait_until("a first fire", || {
        !fired(&cli, &[], "beat", "tick").is_empty()
    });
    let paused = toggle(
        &cli,
        "pause",
        &url,
        &["--reason", "disk full", "--by", "alice"],
    );
    assert_eq!(paused.code, 0, "{}", paused.stderr);
    assert!(
        paused.stdout.contains("paused by alice since"),
        "{}",
        paused.stdout
    );
    let paused_at = now_ms();
    let again = toggle(&cli, "pause", &url, &["--reason", "twice"]);
    assert_eq!(again.code, 3, "{}", again.stdout);
    assert!(
        again
            .stderr
            .contains("already paused: by alice (disk full)"),
        "{}",
        again.stderr
    );
    stop(server); // kill -9
    let (server, address) = serve_logged(&cli, "second.log");
    let url = format!("http://{address}");
    std::thread::sleep(Duration::from_millis(2_000));
    let listed = cli.run(&["schedules", "--server", &url]);
    assert!(
        listed.stdout.contains("paused by alice since"),
        "{}",
        listed.stdout
    );
    assert!(listed.stdout.contains("disk full"), "{}", listed.stdout);
    let json = cli.run(&["schedules", "--server", &url, "--json"]);
    let body: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let shown = &body["schedules"][0];
    assert_eq!(
        (&shown["paused"], &shown["pause"]["by"]),
        (&true.into(), &"alice".into())
    );
    let resumed_at = now_ms();
    let resumed = toggle(
        &cli,
        "resume",
        &url,
        &["--reason", "disk freed", "--by", "bob"],
    );
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(
        resumed.stdout.contains("resumed by bob"),
        "{}",
        resumed.stdout
    );
    wait_until("a fire after the resume", || {
        !fires_after(&cli, &[], resumed_at).is_empty()
    });
    stop(server);
    let during: Vec<u64> = (fires_after(&cli, &[], paused_at + 1_000).into_iter())
        .filter(|&f| f <= resumed_at)
        .collect();
    assert!(
        during.is_empty(),
        "fired while paused (catch_up none): {during:?}"
    );
}

#[test]
fn pausing_an_unknown_schedule_or_without_a_reason_is_refused() {
    let cli = Cli::new();
    cli.workflow("beat.toml", BEAT);
    let (server, address) = serve_logged(&cli, "serve.log");
    let url = format!("http://{address}");
    let unknown = cli.run(&[
        "schedule",
        "pause",
        "beat/nope",
        "--reason",
        "r",
        "--server",
        &url,
    ]);
    assert_eq!(unknown.code, 2, "{}", unknown.stdout);
    assert!(
        unknown
            .stderr
            .contains("no schedule `beat/nope` is registered"),
        "{}",
        unknown.stderr
    );
    let no_reason = cli.run(&["schedule", "pause", "beat/tick", "--server", &url]);
    assert_eq!(no_reason.code, 2);
    assert!(
        no_reason.stderr.contains("--reason"),
        "{}",
        no_reason.stderr
    );
    let bad = cli.run(&[
        "schedule", "resume", "beat", "--reason", "r", "--server", &url,
    ]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("give WORKFLOW/NAME"), "{}", bad.stderr);
    let not_paused = toggle(&cli, "resume", &url, &["--reason", "r"]);
    assert_eq!(not_paused.code, 3);
    assert!(
        not_paused.stderr.contains("`beat/tick` is not paused"),
        "{}",
        not_paused.stderr
    );
    stop(server);
}

#[test]
fn a_pause_through_one_instance_stops_the_other_on_one_database() {
    let Ok(url) = std::env::var("APOLLO11_TEST_PG_URL") else {
        eprintln!("skipped: APOLLO11_TEST_PG_URL is not set");
        return;
    };
    let cli = Cli::new();
    cli.workflow("beat.toml", BEAT);
    let folder = cli.data.path().file_name().unwrap().to_string_lossy();
    let tag: String = folder.chars().filter(char::is_ascii_alphanumeric).collect();
    let schema = format!("pause_{}_{}", std::process::id(), tag.to_lowercase());
    let store = ["--store", url.as_str(), "--store-schema", schema.as_str()];
    let (a, address) = serve_on(&cli, &cli.work.path().join("a"), "a.log", &store);
    let (b, b_address) = serve_on(&cli, &cli.work.path().join("b"), "b.log", &store);
    wait_until("a first fire", || {
        !fired(&cli, &store, "beat", "tick").is_empty()
    });
    let paused = toggle(
        &cli,
        "pause",
        &format!("http://{address}"),
        &["--reason", "r"],
    );
    assert_eq!(paused.code, 0, "{}", paused.stderr);
    let paused_at = now_ms();
    stop(a); // only b is left to fire, and it never received the pause
    std::thread::sleep(Duration::from_millis(2_500));
    let after = fires_after(&cli, &store, paused_at + 1_000);
    // b fires again once resumed (through it): it was alive, held back by the pause alone.
    let resumed_at = now_ms();
    let resumed = toggle(
        &cli,
        "resume",
        &format!("http://{b_address}"),
        &["--reason", "r"],
    );
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    wait_until("a fire after the resume", || {
        !fires_after(&cli, &store, resumed_at).is_empty()
    });
    stop(b);
    let _ = std::process::Command::new("psql")
        .args([
            url.as_str(),
            "-qc",
            &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
        ])
        .output();
    assert!(after.is_empty(), "fired while paused: {after:?}");
}

#[test]
fn backfill_names_the_flag_of_a_bad_range() {
    let cli = Cli::new();
    let backfill = |from: &str, to: &str| {
        cli.run(&[
            "backfill",
            "beat",
            "--from",
            from,
            "--to",
            to,
            "--server",
            "http://127.0.0.1:9",
        ])
    };
    let cases = [
        ("yesterday", "2026-01-01T00:00:00Z", "--from `yesterday`"),
        ("2026-01-01T00:00:00Z", "soon", "--to `soon`"),
        (
            "2026-01-02T00:00:00Z",
            "2026-01-01T00:00:00Z",
            "--to `2026-01-01T00:00:00Z` is before --from",
        ),
    ];
    for (from, to, said) in cases {
        let ran = backfill(from, to);
        assert_eq!(ran.code, 2, "{from} {to}: {}", ran.stderr);
        assert!(ran.stderr.contains(said), "{from} {to}: {}", ran.stderr);
    }
}
