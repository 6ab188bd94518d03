//! `gc --dry-run`: the runs the retention policy lets go, from flags over `[retention]` in
//! the data dir's `apollo11.toml`; never a paused run; nothing changed. `gc`: those runs moved
//! out of the live segments, every command answering about them as before; refused while
//! another process holds the data dir.

use crate::harness::Cli;

const OK: &str = "[workflow]\nname = \"ok\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n";

/// Three steps writing some output each, so that a run spans 4 KiB segments.
const THREE: &str = "[workflow]\nname = \"three\"\n[[steps]]\nname = \"a\"\nrun = \"head -c 900 /dev/zero | tr '\\\\0' a > $APOLLO11_OUTPUT\"\nidempotency = \"natural\"\n[[steps]]\nname = \"b\"\nrun = \"head -c 900 /dev/zero | tr '\\\\0' b > $APOLLO11_OUTPUT\"\nidempotency = \"natural\"\ndepends_on = [\"a\"]\n[[steps]]\nname = \"c\"\nrun = \"true\"\nidempotency = \"natural\"\ndepends_on = [\"b\"]\n";

/// The run ids `gc --dry-run` lists, after its first line.
fn listed(stdout: &str) -> Vec<String> {
    (stdout.lines().skip(1))
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect()
}

#[test]
fn a_dry_run_lists_finished_runs_past_the_policy_and_changes_nothing() {
    let cli = Cli::new();
    let ok = cli.workflow("ok.toml", OK);
    let stuck = cli.workflow("stuck.toml", crate::operator::UNDO_FAILS);
    for run in ["ok-1", "ok-2", "ok-3"] {
        let ran = cli.run(&["run", ok.to_str().unwrap(), "--run-id", run]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
    }
    let ran = cli.run(&["run", stuck.to_str().unwrap(), "--run-id", "stuck-1"]);
    assert_eq!(ran.code, 1, "paused: {}", ran.stderr);
    assert_eq!(cli.status_json("stuck-1")["state"], "paused");
    let before = cli.run(&["runs", "--json"]).stdout;

    // Every run ended just now: keeping 0 days lets every finished run go, the paused one
    // stays.
    let ran = cli.run(&["gc", "--dry-run", "--keep-days", "0"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stdout
            .starts_with("would archive 3 runs; keeping 1 running, paused or failed"),
        "{}",
        ran.stdout
    );
    assert_eq!(listed(&ran.stdout), ["ok-3", "ok-2", "ok-1"]);

    // The config file's rule, a flag over it: the newest of each workflow stays.
    std::fs::write(
        cli.data.path().join("apollo11.toml"),
        "[retention]\nkeep_last = 2\n",
    )
    .unwrap();
    let ran = cli.run(&["gc", "--dry-run"]);
    assert_eq!(listed(&ran.stdout), ["ok-1"], "{}", ran.stderr);
    let ran = cli.run(&["gc", "--dry-run", "--keep-last", "1"]);
    assert_eq!(listed(&ran.stdout), ["ok-2", "ok-1"], "{}", ran.stderr);
    // A week keeps everything that ended today.
    let ran = cli.run(&["gc", "--dry-run", "--keep-last", "0", "--keep-days", "7"]);
    assert_eq!(listed(&ran.stdout), Vec::<String>::new(), "{}", ran.stdout);

    assert_eq!(
        cli.run(&["runs", "--json"]).stdout,
        before,
        "nothing changed"
    );
}

#[test]
fn no_policy_a_bad_config_file_and_a_database_store_are_refused() {
    let cli = Cli::new();
    let ran = cli.run(&["gc", "--dry-run"]);
    assert_eq!(ran.code, 2);
    assert!(ran.stderr.contains("no retention policy"), "{}", ran.stderr);

    std::fs::write(
        cli.data.path().join("apollo11.toml"),
        "[retention]\nkeep_days = \"soon\"\n",
    )
    .unwrap();
    let ran = cli.run(&["gc", "--dry-run"]);
    assert_eq!(ran.code, 2);
    assert!(ran.stderr.contains("apollo11.toml"), "{}", ran.stderr);

    let ran = cli.run(&[
        "--store",
        "postgres://nobody@127.0.0.1:1/none",
        "gc",
        "--dry-run",
        "--keep-days",
        "1",
    ]);
    assert_eq!(ran.code, 2);
    assert!(ran.stderr.contains("with --store"), "{}", ran.stderr);
}

/// A run only the archive holds (as after `gc` moved it out of the live log; here its archive
/// file, written from another data dir, is copied in): `runs --all` lists it marked, and
/// `events` and `status --at` answer about it as the source did.
#[test]
fn an_archived_run_is_listed_by_runs_all_and_read_by_events_and_status() {
    let (source, target) = (Cli::new(), Cli::new());
    let ok = source.workflow("ok.toml", OK);
    let ran = source.run(&["run", ok.to_str().unwrap(), "--run-id", "old"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let events = source.run(&["events", "old", "--json"]).stdout;
    let ids: Vec<u64> = (source.events_json("old").iter())
        .map(|e| e["event_id"].as_u64().unwrap())
        .collect();
    let at = |cli: &Cli, id: u64| {
        let ran = cli.run(&["status", "old", "--at", &id.to_string(), "--json"]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        ran.stdout
    };
    let statuses: Vec<String> = ids.iter().map(|&id| at(&source, id)).collect();
    let log =
        apollo11_log::FileLog::open(source.data.path(), apollo11_log::Options::default()).unwrap();
    let written = log
        .write_archive(&[apollo11_core::RunId::from("old")])
        .unwrap();
    drop(log);

    let ok = target.workflow("ok.toml", OK);
    let ran = target.run(&["run", ok.to_str().unwrap(), "--run-id", "new"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    std::fs::create_dir(target.data.path().join("archive")).unwrap();
    std::fs::copy(
        source.data.path().join(&written.file),
        target.data.path().join(&written.file),
    )
    .unwrap();
    let runs = target.run(&["runs"]).stdout;
    assert_eq!(listed(&runs), ["new"], "{runs}");
    let all = target.run(&["runs", "--all"]).stdout;
    assert_eq!(listed(&all), ["new", "old"], "{all}");
    assert!(all.lines().last().unwrap().ends_with("  archived"), "{all}");
    let json = target.run(&["runs", "--all", "--json"]).stdout;
    let archived: Vec<serde_json::Value> = (json.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(archived[1]["run_id"], "old");
    assert_eq!(archived[1]["archived"], true);
    assert_eq!(target.run(&["events", "old", "--json"]).stdout, events);
    let answered: Vec<String> = ids.iter().map(|&id| at(&target, id)).collect();
    assert_eq!(answered, statuses);
    // It takes no more events: an action on it is refused as the run's state would (exit 2).
    let args = [
        "override", "old", "a", "--to", "pending", "--reason", "again",
    ];
    let refused = target.run(&args);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("archived"), "{}", refused.stderr);
    // Its step files stay in the data dir `gc` runs in: copied with the archive here, the
    // bundle `export` writes of it is the source's, byte for byte.
    copy_dir(
        &source.data.path().join("logs/old"),
        &target.data.path().join("logs/old"),
    );
    let bundle = |cli: &Cli| {
        let file = cli.work.path().join("old.a11");
        let ran = cli.run(&["export", "old", "-o", file.to_str().unwrap()]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        std::fs::read(file).unwrap()
    };
    assert_eq!(bundle(&target), bundle(&source));
    let verified = target.run(&["verify"]);
    assert_eq!(verified.code, 0, "{}", verified.stdout);
    assert!(
        verified.stdout.contains(&written.file),
        "{}",
        verified.stdout
    );
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The bytes of the data dir's segment files.
fn live_bytes(cli: &Cli) -> u64 {
    (std::fs::read_dir(cli.data.path().join("segments")).unwrap())
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// What every read command answers about `run`: its events, its status at each event, its
/// export bundle.
fn answers(cli: &Cli, run: &str) -> (String, Vec<String>, Vec<u8>) {
    let events = cli.run(&["events", run, "--json"]).stdout;
    let statuses = (cli.events_json(run).iter())
        .map(|e| e["event_id"].as_u64().unwrap().to_string())
        .map(|id| cli.run(&["status", run, "--at", &id, "--json"]).stdout)
        .collect();
    let file = cli.work.path().join(format!("{run}.a11"));
    let ran = cli.run(&["export", run, "-o", file.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    (events, statuses, std::fs::read(file).unwrap())
}

#[test]
fn gc_moves_the_runs_out_of_the_live_segments_and_every_command_reads_them_as_before() {
    let cli = Cli::new();
    cli.run_on_small_segments(THREE, &["old-1", "old-2", "new-1"]);
    let before: Vec<_> = ["old-1", "old-2"]
        .iter()
        .map(|r| answers(&cli, r))
        .collect();
    let all_before = cli.run(&["runs", "--all"]).stdout;
    let bytes_before = live_bytes(&cli);
    let events_before = verified_events(&cli.run(&["verify"]).stdout);

    let ran = cli.run(&["gc", "--keep-last", "1"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stdout.starts_with("archived 2 runs ("),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains(&format!("{bytes_before} bytes before")),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("archived old-1\narchived old-2\n"),
        "{}",
        ran.stdout
    );
    assert!(live_bytes(&cli) < bytes_before, "the live segments shrank");

    let after: Vec<_> = ["old-1", "old-2"]
        .iter()
        .map(|r| answers(&cli, r))
        .collect();
    assert_eq!(after, before, "events, status --at and export as before");
    assert_eq!(listed(&cli.run(&["runs"]).stdout), ["new-1"]);
    let all = cli.run(&["runs", "--all"]).stdout;
    assert_eq!(listed(&all), listed(&all_before), "{all}");
    assert!(
        all.lines().filter(|l| l.ends_with("  archived")).count() == 2,
        "{all}"
    );
    let verified = cli.run(&["verify"]);
    assert_eq!(verified.code, 0, "{}", verified.stdout);
    let moved = number_after(&ran.stdout, "archived 2 runs (");
    assert_eq!(
        verified_events(&verified.stdout),
        events_before - moved,
        "verify counts the events left, not the last id: {}",
        verified.stdout
    );
    // Nothing more to move: the next gc archives nothing and changes nothing.
    let again = cli.run(&["gc", "--keep-last", "1"]);
    assert!(
        again.stdout.starts_with("archived 0 runs (0 events);"),
        "{}",
        again.stdout
    );
}

/// The count `verify` printed in its last line, `clean: N events and …`.
fn verified_events(stdout: &str) -> u64 {
    number_after(stdout, "clean: ")
}

/// The number right after the first `prefix` in `text`.
fn number_after(text: &str, prefix: &str) -> u64 {
    let at = text
        .find(prefix)
        .unwrap_or_else(|| panic!("no `{prefix}` in {text}"))
        + prefix.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after `{prefix}` in {text}"))
}

#[test]
fn gc_is_refused_while_another_process_holds_the_data_dir_naming_it() {
    let cli = Cli::new();
    let ok = cli.workflow("ok.toml", OK);
    let ran = cli.run(&["run", ok.to_str().unwrap(), "--run-id", "ok-1"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let held =
        apollo11_log::FileLog::open(cli.data.path(), apollo11_log::Options::default()).unwrap();
    let ran = cli.run(&["gc", "--keep-days", "0"]);
    assert_eq!(ran.code, 4, "{}", ran.stderr);
    let pid = format!("pid {}", std::process::id());
    assert!(ran.stderr.contains(&pid), "{}", ran.stderr);
    drop(held);
    assert_eq!(
        listed(&cli.run(&["runs"]).stdout),
        ["ok-1"],
        "nothing moved"
    );
}

#[test]
fn serve_gc_every_needs_a_policy_and_a_second_or_more() {
    let cli = Cli::new();
    let ran = cli.run(&["serve", "--listen", "127.0.0.1:0", "--gc-every", "1h"]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("no retention policy"), "{}", ran.stderr);
    let ran = cli.run(&["serve", "--gc-every", "10ms"]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("1s at least"), "{}", ran.stderr);
}
