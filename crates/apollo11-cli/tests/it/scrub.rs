//! `verify` prints everything its report holds (ignored index files, blobs hashed, damaged
//! blobs with the run, step and event that need them), in text and JSON, and names what is
//! damaged; `repair` removes what it can (damaged snapshots) and says what it cannot.

use crate::harness::{assert_damage_advice, Cli};

/// A run whose step output is a blob (over the 4 KiB inline limit), on small segments.
fn with_blob(cli: &Cli) {
    let toml = "[workflow]\nname = \"b\"\n[[steps]]\nname = \"big\"\nrun = \"head -c 10000 /dev/zero | tr '\\\\0' b > $APOLLO11_OUTPUT\"\nidempotency = \"natural\"\n";
    cli.run_on_small_segments(toml, &["b1", "b2"]);
}

fn only_blob(cli: &Cli) -> (std::path::PathBuf, String) {
    let mut blobs: Vec<_> = std::fs::read_dir(cli.data.path().join("blobs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(blobs.len(), 1, "both runs wrote the same bytes: {blobs:?}");
    let blob = blobs.pop().unwrap();
    let sha = blob.file_name().unwrap().to_str().unwrap().to_owned();
    (blob, sha)
}

fn verify_json(cli: &Cli) -> (i32, serde_json::Value) {
    let out = cli.run(&["verify", "--json"]);
    (out.code, serde_json::from_str(&out.stdout).unwrap())
}

#[test]
fn verify_names_a_damaged_blob_and_every_event_that_needs_it_in_text_and_json() {
    let cli = Cli::new();
    with_blob(&cli);
    let (code, clean) = verify_json(&cli);
    assert_eq!(code, 0);
    assert_eq!(
        (
            clean["blobs"].as_u64(),
            clean["blob_problems"].as_array().map(Vec::len)
        ),
        (Some(1), Some(0))
    );
    let text = cli.run(&["verify"]).stdout;
    assert!(text.contains("blobs    1 files hashed"), "{text}");
    assert!(text.contains("clean: "), "{text}");
    let (blob, sha) = only_blob(&cli);
    std::fs::remove_file(&blob).unwrap();
    let out = cli.run(&["verify"]);
    assert_eq!(out.code, 3, "{}", out.stdout);
    assert_damage_advice(&["verify"], &out.stderr);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("BLOB"))
        .unwrap_or_else(|| panic!("no blob line: {}", out.stdout));
    for expected in [
        &format!("blobs/{sha}: missing") as &str,
        "run b1 step big event",
        "run b2 step big event",
    ] {
        assert!(line.contains(expected), "{expected}: {line}");
    }
    let last = out.stdout.lines().last().unwrap();
    assert!(
        last.starts_with("damaged: 1 blob (the log itself is intact"),
        "not 'damaged snapshots': {last}"
    );
    let (code, report) = verify_json(&cli);
    assert_eq!((code, report["clean"].as_bool()), (3, Some(false)));
    let problems = report["blob_problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{report}");
    assert_eq!(problems[0]["file"], format!("blobs/{sha}"));
    assert_eq!(problems[0]["problem"], "missing");
    let users: Vec<(&str, &str)> = problems[0]["used_by"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            assert!(u["event_id"].as_u64().unwrap() > 0, "{u}");
            (u["run_id"].as_str().unwrap(), u["step"].as_str().unwrap())
        })
        .collect();
    assert_eq!(users, [("b1", "big"), ("b2", "big")]);
    // No cut of the log brings a blob back: repair says so and changes nothing.
    let repair = cli.run(&["repair", "--yes"]);
    assert_eq!(repair.code, 3, "{}{}", repair.stdout, repair.stderr);
    assert!(
        repair.stdout.contains("nothing to repair") && repair.stderr.contains("restore it"),
        "{}{}",
        repair.stdout,
        repair.stderr
    );
}

#[test]
fn verify_lists_ignored_index_files_and_stays_clean() {
    let cli = Cli::new();
    with_blob(&cli);
    let index = std::fs::read_dir(cli.data.path().join("segments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "idx"))
        .expect("the log rolled or closed: it has an index file");
    let mut bytes = std::fs::read(&index).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&index, bytes).unwrap();
    let name = format!("segments/{}", index.file_name().unwrap().to_str().unwrap());
    let out = cli.run(&["verify"]);
    assert_eq!(out.code, 0, "derived data: {}", out.stdout);
    assert!(
        out.stdout.contains(&format!("index    {name}")) && out.stdout.contains("ignored: "),
        "{}",
        out.stdout
    );
    let (code, report) = verify_json(&cli);
    assert_eq!(code, 0);
    let ignored = report["ignored_index_files"].as_array().unwrap();
    assert_eq!(ignored.len(), 1, "{report}");
    assert_eq!(ignored[0]["file"], name.as_str());
    assert!(ignored[0]["reason"].as_str().unwrap().contains("checksum"));
}

#[test]
fn a_damaged_snapshot_is_reported_as_such_and_repair_removes_it_only_with_yes() {
    let cli = Cli::new();
    with_blob(&cli);
    let snapshot = std::fs::read_dir(cli.data.path().join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .next()
        .expect("a closing engine saves a snapshot");
    let mut bytes = std::fs::read(&snapshot).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&snapshot, bytes).unwrap();
    let name = format!(
        "snapshots/{}",
        snapshot.file_name().unwrap().to_str().unwrap()
    );
    let out = cli.run(&["verify"]);
    assert_eq!(out.code, 3);
    let last = out.stdout.lines().last().unwrap();
    assert!(
        last.starts_with("damaged: 1 snapshot (the log itself is intact"),
        "{last}"
    );
    let dry = cli.run(&["repair"]);
    assert_eq!(dry.code, 2, "{}{}", dry.stdout, dry.stderr);
    assert!(
        dry.stdout.contains(&format!("remove     {name}")),
        "{}",
        dry.stdout
    );
    assert!(snapshot.exists(), "nothing changes without --yes");
    let done = cli.run(&["repair", "--yes"]);
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    assert!(
        done.stdout.contains(&format!("removed  {name}")),
        "{}",
        done.stdout
    );
    assert_eq!(cli.run(&["verify"]).code, 0);
    let again = cli.run(&["repair"]);
    assert_eq!(again.code, 0);
    assert!(
        again.stdout.contains("nothing to repair"),
        "{}",
        again.stdout
    );
}

#[test]
fn compact_compresses_sealed_segments_that_verify_reports_and_runs_still_read() {
    let cli = Cli::new();
    let toml = "[workflow]\nname = \"c\"\n[[steps]]\nname = \"s\"\nrun = \"true\"\nidempotency = \"natural\"\n";
    let runs = ["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9"];
    cli.run_on_small_segments(toml, &runs);
    let before = cli.events_json("b1");
    let out = cli.run(&["compact"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("compressed "), "{}", out.stdout);
    assert!(!out.stdout.starts_with("compressed 0 "), "{}", out.stdout);
    let (code, report) = verify_json(&cli);
    assert_eq!(code, 0, "{report}");
    let segments = report["segments"].as_array().unwrap();
    let compressed = segments
        .iter()
        .filter(|s| s["stored_bytes"].is_u64())
        .count();
    assert_eq!(compressed, segments.len() - 1, "all but the last: {report}");
    let text = cli.run(&["verify"]).stdout;
    assert!(text.contains("compressed (zstd) to "), "{text}");
    assert_eq!(cli.events_json("b1"), before);
    let again = cli.run(&["compact"]);
    assert!(
        again.stdout.starts_with("compressed 0 segments"),
        "{}",
        again.stdout
    );
}
