//! `gc --dry-run`: the runs the retention policy lets go, from flags over `[retention]` in
//! the data dir's `apollo11.toml`; never a paused run; nothing changed. `gc`: those runs moved
//! out of the live segments, every command answering about them as before; refused while
//! another process holds the data dir.

use crate::harness::Cli;

const OK: &str = "[workflow]\nname = \"ok\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n";

/// Three steps writing some output each, so that a run spans 4 KiB segments.
pub(crate) const THREE: &str = "[workflow]\nname = \"three\"\n[[steps]]\nname = \"a\"\nrun = \"head -c 900 /dev/zero | tr '\\\\0' a > $APOLLO11_OUTPUT\"\nidempotency = \"natural\"\n[[steps]]\nname = \"b\"\nrun = \"head -c 900 /dev/zero | tr '\\\\0' b > $APOLLO11_OUTPUT\"\nidempotency = \"natural\"\ndepends_on = [\"a\"]\n[[steps]]\nname = \"c\"\nrun = \"true\"\nidempotency = \"natural\"\ndepends_on = [\"b\"]\n";

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

/// A run only the archive holds (`gc` moved it out of the live log): `runs --all` lists it
/// marked, and `events`, `status --at` and `export` answer about it as before. (An archive
/// file copied in from another data dir holds ids the live log holds for other runs: damage.)
#[test]
fn an_archived_run_is_listed_by_runs_all_and_read_by_events_and_status() {
    let cli = Cli::new();
    cli.run_on_small_segments(THREE, &["old", "new", "newer"]);
    let events = cli.run(&["events", "old", "--json"]).stdout;
    let ids: Vec<u64> = (cli.events_json("old").iter())
        .map(|e| e["event_id"].as_u64().unwrap())
        .collect();
    let at = |id: u64| {
        let ran = cli.run(&["status", "old", "--at", &id.to_string(), "--json"]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        ran.stdout
    };
    let statuses: Vec<String> = ids.iter().map(|&id| at(id)).collect();
    let bundle = || {
        let file = cli.work.path().join("old.a11");
        // Before and after the gc: the second bundle replaces the first.
        let ran = cli.run(&["export", "old", "-o", file.to_str().unwrap(), "--force"]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        std::fs::read(file).unwrap()
    };
    let exported = bundle();
    let ran = cli.run(&["gc", "--keep-last", "2"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(ran.stdout.contains("archived old\n"), "{}", ran.stdout);

    let runs = cli.run(&["runs"]).stdout;
    assert_eq!(listed(&runs), ["newer", "new"], "{runs}");
    let all = cli.run(&["runs", "--all"]).stdout;
    assert_eq!(listed(&all), ["newer", "new", "old"], "{all}");
    assert!(all.lines().last().unwrap().ends_with("  archived"), "{all}");
    let json = cli.run(&["runs", "--all", "--json"]).stdout;
    let archived: Vec<serde_json::Value> = (json.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(archived[2]["run_id"], "old");
    assert_eq!(archived[2]["archived"], true);
    assert_eq!(cli.run(&["events", "old", "--json"]).stdout, events);
    let answered: Vec<String> = ids.iter().map(|&id| at(id)).collect();
    assert_eq!(answered, statuses);
    // It takes no more events: an action on it is refused as its state, finished, says (exit 2).
    let args = [
        "override", "old", "a", "--to", "pending", "--reason", "again",
    ];
    let refused = cli.run(&args);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("it is finished"),
        "{}",
        refused.stderr
    );
    // Its step files stay in the data dir: the bundle `export` writes of it is as before,
    // byte for byte.
    assert_eq!(bundle(), exported);
    let verified = cli.run(&["verify"]);
    assert_eq!(verified.code, 0, "{}", verified.stdout);
    assert!(
        verified.stdout.contains("archive/00000000000000000001.arc"),
        "{}",
        verified.stdout
    );
}

pub(crate) fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
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
    // Asked before and after a gc: the second bundle replaces the first.
    let ran = cli.run(&["export", run, "-o", file.to_str().unwrap(), "--force"]);
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
    // The next engine to open keeps nothing of the moved runs: `gc` saved a snapshot of the
    // view without them (the one before held all three runs).
    let engine = async {
        let log = apollo11_log::FileLog::open(cli.data.path(), Default::default()).unwrap();
        let engine = apollo11_runtime::Engine::open(std::sync::Arc::new(log), Default::default());
        engine.await.unwrap().runs_held().await.unwrap()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(runtime.block_on(engine), 1, "only new-1 is held");
    // Nothing more to move: the next gc archives nothing and changes nothing.
    let again = cli.run(&["gc", "--keep-last", "1"]);
    assert!(
        again.stdout.starts_with("archived 0 runs (0 events);"),
        "{}",
        again.stdout
    );
}

/// The count `verify` printed in its last line, `clean: N events and …`.
pub(crate) fn verified_events(stdout: &str) -> u64 {
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

/// The segment files of `dir` (`<base>.seg`), by name, with their bytes.
pub(crate) fn segments(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    (std::fs::read_dir(dir.join("segments")).unwrap())
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".seg"))
        .map(|name| {
            let bytes = std::fs::read(dir.join("segments").join(&name)).unwrap();
            (name, bytes)
        })
        .collect()
}

/// `archive/<generation>.gc` naming the segments of `bases` (docs/log-format.md, `gc`).
pub(crate) fn write_manifest(dir: &std::path::Path, generation: u64, bases: &[u64]) {
    let mut bytes = b"A11GCMAN".to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&generation.to_le_bytes());
    bytes.extend_from_slice(&(bases.len() as u32).to_le_bytes());
    for base in bases {
        bytes.extend_from_slice(&base.to_le_bytes());
    }
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    let path = dir.join(format!("archive/{generation:020}.gc"));
    std::fs::write(path, bytes).unwrap();
}

/// A `gc` swap left half done (its manifest there, one segment renamed over, the others
/// not, as a kill in the middle of its renames leaves it): the read-only commands say a gc
/// is in progress (exit 4), never that the data dir is damaged; a writing command finishes
/// the swap, and they answer again.
#[test]
fn read_commands_beside_a_half_done_gc_say_it_is_in_progress_not_damage() {
    let cli = Cli::new();
    // Runs of about 6 KiB: each spans two 4 KiB segments, so a segment renamed over without
    // the end of one run leaves its start in the next, not yet renamed.
    let wide = THREE.replace("head -c 900", "head -c 2000");
    cli.run_on_small_segments(&wide, &["old-1", "old-2", "new-1"]);
    let events = cli.run(&["events", "old-1", "--json"]).stdout;
    let old = segments(cli.data.path());
    let ran = cli.run(&["gc", "--keep-last", "1"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let rewritten: Vec<(&String, &Vec<u8>)> = (segments(cli.data.path()).into_iter())
        .filter(|(name, bytes)| old.get(name) != Some(bytes))
        .map(|(name, _)| old.get_key_value(&name).unwrap())
        .collect();
    assert!(
        rewritten.len() >= 2,
        "{} segments rewritten",
        rewritten.len()
    );
    for (name, bytes) in &rewritten[1..] {
        std::fs::write(cli.data.path().join("segments").join(name), bytes).unwrap();
    }
    let bases: Vec<u64> = (rewritten.iter())
        .map(|(name, _)| name.trim_end_matches(".seg").parse().unwrap())
        .collect();
    write_manifest(cli.data.path(), 1, &bases);

    let in_progress = "a gc is in progress (archive/00000000000000000001.gc); retry, or a writing open will finish it";
    for args in [&["status", "old-1"][..], &["runs"], &["verify"]] {
        let ran = cli.run(args);
        assert_eq!(ran.code, 4, "{args:?}: {}{}", ran.stdout, ran.stderr);
        assert!(ran.stderr.contains(in_progress), "{args:?}: {}", ran.stderr);
        assert!(!ran.stderr.contains("damaged"), "{args:?}: {}", ran.stderr);
    }
    let ran = cli.run(&["gc", "--keep-last", "1"]);
    assert_eq!(
        ran.code, 0,
        "the writing open finishes the swap: {}",
        ran.stderr
    );
    assert_eq!(cli.run(&["events", "old-1", "--json"]).stdout, events);
    assert_eq!(cli.run(&["verify"]).code, 0);
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

/// `gc` and `compact` rework a log: on a `--data-dir` that holds none (a typo) they exit 2
/// saying so, and create nothing there.
#[test]
fn gc_and_compact_refuse_a_data_dir_without_a_log_and_create_none() {
    let cli = Cli::new();
    for args in [&["gc", "--keep-last", "0"][..], &["compact"]] {
        let ran = cli.run_at(cli.work.path(), "typo", args);
        assert_eq!(ran.code, 2, "{args:?}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("holds no Apollo-11 data"),
            "{}",
            ran.stderr
        );
        assert!(
            !cli.work.path().join("typo").exists(),
            "{args:?} created it"
        );
    }
}
