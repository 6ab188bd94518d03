//! Schedules fired by `apollo11 serve` processes on the real clock, every second: on time,
//! after a `kill -9` and a restart as `catch_up` says, one run per fire under `overlap`,
//! and on three instances sharing a PostgreSQL database.

use crate::harness::{gone, serving_address, wait_until, Cli};
use apollo11_schedule::Cron;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A workflow of three schedules firing every second, one per `catch_up` (the one that
/// catches up every fire queues them: under `skip`, a fire due while a caught-up run goes
/// would be skipped).
const TICK: &str = r#"[workflow]
name = "tick"
[params]
at = { type = "string", default = "" }
[[steps]]
name = "s"
run = "true"
idempotency = "natural"
[schedules.all]
cron = "* * * * * *"
catch_up = "all"
overlap = "queue"
params = { at = "${schedule.fire_time}" }
[schedules.latest]
cron = "* * * * * *"
catch_up = "latest"
[schedules.none]
cron = "* * * * * *"
catch_up = "none"
"#;

/// `serve` on the test's data dir with its log (at `info`) in `log`.
pub(crate) fn serve_logged(cli: &Cli, log: &str) -> (Child, String) {
    serve_on(cli, cli.data.path(), log, &[])
}

/// `serve` on `data` with its log in `log` and `more` arguments.
pub(crate) fn serve_on(cli: &Cli, data: &Path, log: &str, more: &[&str]) -> (Child, String) {
    let workflows = cli.work.path().to_str().unwrap().to_owned();
    let mut args = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--workflows",
        &workflows,
    ];
    args.extend_from_slice(more);
    let log = std::fs::File::create(cli.work.path().join(log)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_apollo11"));
    let mut child = child
        .arg("--data-dir")
        .arg(data)
        .args(&args)
        .env_remove("APOLLO11_DATA_DIR")
        .env("RUST_LOG", "apollo11_server=info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    let address = serving_address(&mut child);
    (child, address)
}

pub(crate) fn stop(mut child: Child) {
    let pid = child.id() as i32;
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(gone(pid));
}

/// The runs of `runs --json` (with `more` arguments first) of schedule `schedule` of
/// `workflow`: each with its fire time (ms), created_at and updated_at, by fire time.
pub(crate) fn fired(
    cli: &Cli,
    more: &[&str],
    workflow: &str,
    schedule: &str,
) -> Vec<(u64, u64, u64)> {
    let mut args = more.to_vec();
    args.extend(["runs", "--json"]);
    let ran = cli.run(&args);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let cron = Cron::parse("* * * * * *", "UTC").unwrap();
    let prefix = format!("{workflow}-{schedule}-");
    let mut runs: Vec<(u64, u64, u64)> = (ran.stdout.lines())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter_map(|r| {
            let stamp = r["run_id"].as_str()?.strip_prefix(&prefix)?.to_owned();
            let fire = cron.at_stamp(&stamp).unwrap().ms;
            Some((fire, r["created_at"].as_u64()?, r["updated_at"].as_u64()?))
        })
        .collect();
    runs.sort_unstable();
    runs
}

/// Whether the fire times are every second from the first to the last.
fn contiguous(runs: &[(u64, u64, u64)]) -> bool {
    runs.windows(2).all(|w| w[1].0 == w[0].0 + 1_000)
}

#[test]
fn fires_land_on_time_and_a_restart_catches_up_as_each_schedule_says() {
    let cli = Cli::new();
    cli.workflow("tick.toml", TICK);
    let (server, _) = serve_logged(&cli, "first.log");
    std::thread::sleep(Duration::from_millis(2_500));
    stop(server);
    for schedule in ["all", "latest", "none"] {
        let runs = fired(&cli, &[], "tick", schedule);
        assert!(runs.len() >= 2, "{schedule}: {runs:?}");
        assert!(contiguous(&runs), "{schedule}: {runs:?}");
        for (fire, created, _) in &runs {
            assert!(
                (*fire..*fire + 1_000).contains(created),
                "{schedule}: late: {runs:?}"
            );
        }
    }
    let before = fired(&cli, &[], "tick", "all").len();
    std::thread::sleep(Duration::from_millis(5_000)); // five fire times missed, at least
    let (server, _) = serve_logged(&cli, "second.log");
    let gaps = |schedule: &str| {
        let runs = fired(&cli, &[], "tick", schedule);
        runs.windows(2).filter(|w| w[1].0 > w[0].0 + 1_000).count()
    };
    // `none` and `latest` fire again only at the next fire time after the restart.
    wait_until("the caught-up runs and a fire after the restart", || {
        fired(&cli, &[], "tick", "all").len() >= before + 6
            && gaps("latest") > 0
            && gaps("none") > 0
    });
    stop(server);
    let all = fired(&cli, &[], "tick", "all");
    assert!(
        contiguous(&all),
        "catch_up all starts every missed fire: {all:?}"
    );
    let log = std::fs::read_to_string(cli.work.path().join("second.log")).unwrap();
    let caught: Vec<&str> = (log.lines())
        .filter(|l| l.contains("fire times missed while down"))
        .collect();
    let line = |schedule: &str| {
        let tag = format!("schedule={schedule} ");
        *caught
            .iter()
            .find(|l| l.contains(&tag))
            .unwrap_or_else(|| panic!("{log}"))
    };
    assert!(line("latest").contains("starting=1 "), "{log}");
    assert!(line("none").contains("starting=0 "), "{log}");
    assert!(line("all").contains("missed=0"), "{log}");
    let started = |l: &str| -> usize {
        let tail = &l[l.find("starting=").expect("a count") + "starting=".len()..];
        tail.split(' ').next().unwrap().parse().unwrap()
    };
    assert!(started(line("all")) >= 5, "every missed fire starts: {log}");
    for schedule in ["latest", "none"] {
        let runs = fired(&cli, &[], "tick", schedule);
        assert_eq!(
            gaps(schedule),
            1,
            "{schedule}: one gap, the downtime: {runs:?}"
        );
    }
    // The run records what started it, with the values its params read of the fire time.
    let (fire, ..) = all[0];
    let cron = Cron::parse("* * * * * *", "UTC").unwrap();
    let fire = cron.next_after(fire - 1).unwrap();
    let run = format!("tick-all-{}", fire.stamp());
    let status = cli.status_json(&run);
    assert_eq!(status["started_by"]["schedule"], "all", "{status}");
    assert_eq!(
        status["started_by"]["fire_time"],
        fire.utc_text(),
        "{status}"
    );
    assert_eq!(status["arguments"]["at"], fire.utc_text(), "{status}");
    let text = cli.run(&["status", &run]).stdout;
    assert!(text.contains("started by fire_time "), "{text}");
}

#[test]
fn overlap_skip_starts_nothing_while_the_last_run_is_running() {
    let cli = Cli::new();
    cli.workflow(
        "slow.toml",
        "[workflow]\nname = \"slow\"\n[[steps]]\nname = \"s\"\nrun = \"sleep 1.6\"\n\
         idempotency = \"natural\"\n[schedules.tick]\ncron = \"* * * * * *\"\noverlap = \"skip\"\n",
    );
    let (server, address) = serve_logged(&cli, "serve.log");
    std::thread::sleep(Duration::from_millis(2_400));
    let server_url = format!("http://{address}");
    let listed = cli.run(&["schedules", "--server", &server_url, "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let listed: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    let tick = &listed["schedules"][0];
    assert_eq!(
        (&tick["workflow"], &tick["name"]),
        (&"slow".into(), &"tick".into())
    );
    assert_eq!(tick["next_fires"].as_array().unwrap().len(), 5, "{tick}");
    let last = tick["last_fire"]["run_id"].as_str().unwrap();
    assert!(last.starts_with("slow-tick-"), "{tick}");
    let state = tick["last_fire"]["state"].as_str().unwrap();
    assert!(["running", "succeeded"].contains(&state), "{tick}");
    // A fire may come between the two listings: the table shows the last run as it is then.
    let table = cli.run(&["schedules", "--server", &server_url]).stdout;
    assert!(
        table.contains("slow/tick") && table.contains(" slow-tick-"),
        "{table}"
    );
    std::thread::sleep(Duration::from_millis(2_400));
    stop(server);
    let runs = fired(&cli, &[], "slow", "tick");
    assert!((2..=3).contains(&runs.len()), "{runs:?}");
    for pair in runs.windows(2) {
        let (earlier, later) = (pair[0], pair[1]);
        assert!(later.1 >= earlier.2, "runs overlap: {runs:?}");
        assert!(
            later.0 >= earlier.0 + 2_000,
            "a fire was not skipped: {runs:?}"
        );
    }
}

#[test]
fn validate_shows_the_next_five_fire_times_in_the_zone_and_in_utc() {
    let cli = Cli::new();
    let file = cli.workflow(
        "daily.toml",
        "[workflow]\nname = \"daily\"\n[[steps]]\nname = \"s\"\nrun = \"true\"\n\
         idempotency = \"natural\"\n[schedules.d]\ncron = \"30 2 * * *\"\nzone = \"America/New_York\"\n",
    );
    let ran = cli.run(&["validate", file.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stdout
            .contains("schedule d: cron `30 2 * * *` in America/New_York"),
        "{}",
        ran.stdout
    );
    let fires: Vec<&str> = (ran.stdout.lines())
        .filter(|l| l.starts_with("  20"))
        .collect();
    assert_eq!(fires.len(), 5, "{}", ran.stdout);
    assert!(
        fires
            .iter()
            .all(|l| l.contains("T02:30:00-0") && l.contains(":30:00Z)")),
        "{fires:?}"
    );
    let bad = cli.workflow(
        "bad.toml",
        "[workflow]\nname = \"bad\"\n[[steps]]\nname = \"s\"\nrun = \"true\"\n\
         idempotency = \"natural\"\n[schedules.d]\ncron = \"30 2 * * *\"\nzone = \"America/NewYork\"\n",
    );
    let ran = cli.run(&["validate", bad.to_str().unwrap()]);
    assert_eq!(ran.code, 2);
    assert!(
        ran.stderr
            .contains("bad.toml:9:8: schedule `d`: zone `America/NewYork`"),
        "{}",
        ran.stderr
    );
}

/// Sixty seconds of fires on three instances sharing one schema; one of them is killed (-9)
/// a third of the way in and started again ten seconds later.
#[test]
fn three_instances_on_one_database_start_each_fire_once_across_a_kill() {
    let Ok(url) = std::env::var("APOLLO11_TEST_PG_URL") else {
        eprintln!("skipped: APOLLO11_TEST_PG_URL is not set");
        return;
    };
    let cli = Cli::new();
    cli.workflow(
        "shared.toml",
        "[workflow]\nname = \"shared\"\n[[steps]]\nname = \"s\"\nrun = \"true\"\n\
         idempotency = \"natural\"\n[schedules.tick]\ncron = \"* * * * * *\"\ncatch_up = \"none\"\n",
    );
    let folder = cli.data.path().file_name().unwrap().to_string_lossy();
    let tag: String = folder.chars().filter(char::is_ascii_alphanumeric).collect();
    let schema = format!("sched_{}_{}", std::process::id(), tag.to_lowercase());
    let store = ["--store", url.as_str(), "--store-schema", schema.as_str()];
    let data = |i: usize| cli.work.path().join(format!("data{i}"));
    let mut servers: Vec<Child> = (0..3)
        .map(|i| serve_on(&cli, &data(i), &format!("i{i}.log"), &store).0)
        .collect();
    std::thread::sleep(Duration::from_secs(20));
    stop(servers.remove(0));
    std::thread::sleep(Duration::from_secs(10));
    servers.push(serve_on(&cli, &data(0), "i3.log", &store).0);
    std::thread::sleep(Duration::from_secs(30));
    for server in servers {
        stop(server);
    }
    let runs = fired(&cli, &store, "shared", "tick");
    let _ = std::process::Command::new("psql")
        .args([
            url.as_str(),
            "-qc",
            &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
        ])
        .output();
    assert!(runs.len() >= 55, "{} fires in 60 s: {runs:?}", runs.len());
    assert!(contiguous(&runs), "a fire was lost: {runs:?}");
    let creations: usize = (0..4)
        .map(|i| std::fs::read_to_string(cli.work.path().join(format!("i{i}.log"))).unwrap())
        .map(|log| log.matches("schedule fired").count())
        .sum();
    assert!(
        (1..=runs.len()).contains(&creations),
        "{creations} creations of {} runs",
        runs.len()
    );
    for (fire, created, _) in &runs {
        assert!(*created < fire + 2_000, "late: {runs:?}");
    }
}

#[test]
fn backfill_starts_each_missing_fire_once_bounded_and_is_idempotent() {
    let cli = Cli::new();
    cli.workflow(
        "past.toml",
        "[workflow]\nname = \"past\"\n[[steps]]\nname = \"s\"\nrun = \"sleep 0.4\"\n\
         idempotency = \"natural\"\n[schedules.tick]\ncron = \"* * * * * *\"\nenabled = false\n",
    );
    let (server, address) = serve_logged(&cli, "serve.log");
    let url = format!("http://{address}");
    let cron = Cron::parse("* * * * * *", "UTC").unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let from = cron.latest_at_or_before(now - 60_000).unwrap();
    let to = cron.next_after(from.ms + 4_000 - 1).unwrap();
    let (from, to) = (from.utc_text(), to.utc_text());
    let backfill = |more: &[&str]| {
        let mut args = vec![
            "backfill", "past", "--from", &from, "--to", &to, "--server", &url,
        ];
        args.extend_from_slice(more);
        args.push("--json");
        let ran = cli.run(&args);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        serde_json::from_str::<serde_json::Value>(&ran.stdout).unwrap()
    };
    let dry = backfill(&["--dry-run"]);
    assert_eq!(
        (dry["fires"].as_u64(), dry["starting_count"].as_u64()),
        (Some(5), Some(5)),
        "{dry}"
    );
    assert!(
        fired(&cli, &[], "past", "tick").is_empty(),
        "a dry run starts nothing"
    );
    let started = backfill(&["--max-parallel", "2"]);
    assert_eq!(started["starting"], dry["starting"], "{started}");
    wait_until("the backfilled runs", || {
        let runs = fired(&cli, &[], "past", "tick");
        runs.len() == 5 && runs.iter().all(|r| r.2 > r.1 + 300)
    });
    let again = backfill(&[]);
    assert_eq!(
        (again["existing"].as_u64(), again["starting_count"].as_u64()),
        (Some(5), Some(0))
    );
    let wide = cli.run(&[
        "backfill",
        "past",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-01T03:00:00Z",
        "--server",
        &url,
    ]);
    assert_eq!(wide.code, 2, "{}", wide.stderr);
    assert!(
        wide.stderr.contains("10801 fire times") && wide.stderr.contains("yes"),
        "{}",
        wide.stderr
    );
    stop(server);
    let runs = fired(&cli, &[], "past", "tick");
    assert!(contiguous(&runs), "{runs:?}");
    // At each run's start, the runs then running (started, not yet ended), itself included.
    for (fire, created, _) in &runs {
        let running = runs
            .iter()
            .filter(|r| r.1 <= *created && *created < r.2)
            .count();
        assert!(
            running <= 2,
            "more than 2 at once when {fire} started: {runs:?}"
        );
    }
}

/// Thirty days of a daily schedule backfilled through the server, then the same backfill
/// again: every day's run once, the second time nothing new.
#[test]
fn a_thirty_day_backfill_of_a_daily_schedule_rerun_starts_nothing_new() {
    let cli = Cli::new();
    cli.workflow(
        "daily.toml",
        "[workflow]\nname = \"daily\"\n[[steps]]\nname = \"s\"\nrun = \"true\"\n\
         idempotency = \"natural\"\n[schedules.night]\ncron = \"0 3 * * *\"\n\
         zone = \"Europe/Paris\"\nenabled = false\n",
    );
    let (server, address) = serve_logged(&cli, "serve.log");
    let url = format!("http://{address}");
    let backfill = || {
        let ran = cli.run(&[
            "backfill",
            "daily",
            "--from",
            "2026-10-01T00:00:00Z",
            "--to",
            "2026-10-31T00:00:00Z",
            "--server",
            &url,
            "--json",
        ]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        serde_json::from_str::<serde_json::Value>(&ran.stdout).unwrap()
    };
    let first = backfill();
    // 03:00 in Paris from October 1st to 30th: thirty fires, across the end of summer time.
    assert_eq!(
        (first["fires"].as_u64(), first["starting_count"].as_u64()),
        (Some(30), Some(30)),
        "{first}"
    );
    let runs = || -> Vec<serde_json::Value> {
        let ran = cli.run(&["runs", "--json"]);
        (ran.stdout.lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    wait_until("the backfilled runs", || {
        runs().iter().filter(|r| r["state"] == "succeeded").count() == 30
    });
    let again = backfill();
    assert_eq!(
        (again["existing"].as_u64(), again["starting_count"].as_u64()),
        (Some(30), Some(0)),
        "{again}"
    );
    stop(server);
    let listed = runs();
    let ids: std::collections::BTreeSet<&str> =
        listed.iter().filter_map(|r| r["run_id"].as_str()).collect();
    assert_eq!(
        (listed.len(), ids.len()),
        (30, 30),
        "one run a day: {listed:?}"
    );
}
