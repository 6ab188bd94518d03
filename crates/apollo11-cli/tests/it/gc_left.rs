//! What a `gc` left behind, through the binary: `repair --yes` finishes a swap a crash
//! interrupted (as docs/log-format.md says) rather than refuse it; a damaged archive file,
//! which stops every writing command, is set aside by `repair` (never removed), and its
//! counts are events, not the last id.

use crate::gc::{copy_dir, segments, verified_events, write_manifest, THREE};
use crate::harness::Cli;
use std::path::Path;

/// The file names of `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = (std::fs::read_dir(dir).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A data dir where `gc --keep-last 1` archived old-1 and old-2, and a copy of it from before.
fn gc_and_before() -> (Cli, Cli) {
    let cli = Cli::new();
    cli.run_on_small_segments(THREE, &["old-1", "old-2", "new-1"]);
    let before = Cli::new();
    copy_dir(cli.data.path(), before.data.path());
    let ran = cli.run(&["gc", "--keep-last", "1"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    (cli, before)
}

#[test]
fn repair_yes_finishes_a_gc_swap_a_crash_interrupted() {
    let (done, crashed) = gc_and_before();
    // What a crash right after the manifest's write leaves: the archive file and the manifest
    // in place, no segment renamed yet.
    let old = segments(crashed.data.path());
    let rewritten: Vec<u64> = (segments(done.data.path()).into_iter())
        .filter(|(name, bytes)| old.get(name) != Some(bytes))
        .map(|(name, _)| name.trim_end_matches(".seg").parse().unwrap())
        .collect();
    assert!(!rewritten.is_empty());
    let archive = crashed.data.path().join("archive");
    std::fs::create_dir_all(&archive).unwrap();
    let arc = "00000000000000000001.arc";
    std::fs::copy(
        done.data.path().join("archive").join(arc),
        archive.join(arc),
    )
    .unwrap();
    write_manifest(crashed.data.path(), 1, &rewritten);
    // Planning alone cannot finish it (no lock): refused as any invalid request, nothing
    // changed.
    let planned = crashed.run(&["repair"]);
    assert_eq!(planned.code, 2, "{}", planned.stderr);
    let repaired = crashed.run(&["repair", "--yes"]);
    assert_eq!(repaired.code, 0, "{}{}", repaired.stdout, repaired.stderr);
    assert!(
        repaired.stdout.starts_with("nothing to repair"),
        "{}",
        repaired.stdout
    );
    assert_eq!(names(&archive), [arc], "the manifest removed");
    for cli in [&done, &crashed] {
        let all = cli.run(&["runs", "--all"]).stdout;
        assert_eq!(
            all.lines().filter(|l| l.ends_with("  archived")).count(),
            2,
            "{all}"
        );
    }
    let verified = crashed.run(&["verify"]);
    assert_eq!(verified.code, 0, "{}", verified.stdout);
}

#[test]
fn a_damaged_archive_file_is_set_aside_by_repair_and_writing_commands_work_again() {
    let (cli, _) = gc_and_before();
    let events = verified_events(&cli.run(&["verify"]).stdout);
    // Intact: the count is the events', not the last id.
    let intact = cli.run(&["repair"]);
    assert_eq!(
        intact.stdout.trim(),
        format!("nothing to repair: the log is intact ({events} events)"),
    );
    let json = cli.run(&["verify", "--json"]).stdout;
    assert!(json.contains(&format!("\"events\":{events},")), "{json}");
    let archive = "archive/00000000000000000001.arc";
    let path = cli.data.path().join(archive);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 10;
    bytes[at] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let wf = cli.workflow("after.toml", THREE);
    let refused = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "after-1"]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    let plan = cli.run(&["repair"]);
    assert_eq!(plan.code, 2, "{}{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout
            .contains(&format!("set aside  {archive} as {archive}.damaged")),
        "{}",
        plan.stdout
    );
    let repaired = cli.run(&["repair", "--yes"]);
    assert_eq!(repaired.code, 0, "{}{}", repaired.stdout, repaired.stderr);
    assert!(
        repaired
            .stdout
            .contains(&format!("set aside {archive}.damaged")),
        "{}",
        repaired.stdout
    );
    assert!(cli.data.path().join(format!("{archive}.damaged")).exists());
    let ran = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "after-1"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let verified = cli.run(&["verify"]);
    assert_eq!(verified.code, 0, "{}", verified.stdout);
}
