//! Damaged logs through the binary: a torn tail is repaired at the next writing open; a
//! flipped bit in an old segment makes every command that reads it fail with a pointer to
//! `verify` (every command at all when the segment has no index file), and `verify` names
//! the file and offset (exit 3). Never a panic.

use crate::harness::Cli;

fn small_segments(cli: &Cli) {
    let toml = "[workflow]\nname = \"s\"\n[[steps]]\nname = \"a\"\nrun = \"head -c 3000 /dev/zero | tr '\\\\0' x > $APOLLO11_OUTPUT\"\nidempotency = \"natural\"\n";
    let wf = cli.workflow("wf.toml", toml);
    for i in 0..6 {
        let out = cli.run(&[
            "--segment-bytes",
            "4096",
            "run",
            wf.to_str().unwrap(),
            "--run-id",
            &format!("r{i}"),
        ]);
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
}

fn segments(cli: &Cli) -> Vec<std::path::PathBuf> {
    let mut s: Vec<_> = std::fs::read_dir(cli.data.path().join("segments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    s.sort();
    s
}

#[test]
fn a_torn_tail_is_reported_by_verify_and_repaired_by_the_next_run() {
    let cli = Cli::new();
    small_segments(&cli);
    let last = segments(&cli).pop().unwrap();
    // What a crash during a write leaves: part of a batch after the last complete one.
    let report: serde_json::Value =
        serde_json::from_str(&cli.run(&["verify", "--json"]).stdout).unwrap();
    let end = report["segments"].as_array().unwrap().last().unwrap()["bytes"]
        .as_u64()
        .unwrap() as usize;
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.resize(bytes.len().max(end + 7), 0);
    bytes[end..end + 7].copy_from_slice(&[0xAB; 7]);
    std::fs::write(&last, &bytes).unwrap();
    let verify = cli.run(&["verify"]);
    assert_eq!(
        verify.code, 0,
        "a torn tail is what a crash leaves, not damage: {}",
        verify.stdout
    );
    assert!(verify.stdout.contains("torn tail"), "{}", verify.stdout);
    let status = cli.run(&["status", "r5"]);
    assert_eq!(
        status.code, 0,
        "read-only commands stop at the last complete batch: {}",
        status.stderr
    );
    let wf = cli.file("wf.toml");
    assert_eq!(
        cli.run(&[
            "--segment-bytes",
            "4096",
            "run",
            wf.to_str().unwrap(),
            "--run-id",
            "after"
        ])
        .code,
        0
    );
    let verify = cli.run(&["verify", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&verify.stdout).unwrap();
    assert_eq!(
        (report["clean"].as_bool(), report["torn_tail"].is_null()),
        (Some(true), true)
    );
    assert_eq!(
        report["torn_files"].as_array().unwrap().len(),
        1,
        "the cut bytes are kept"
    );
}

/// Runs `args` and checks it fails with exit 3 and a pointer to `verify` and `repair`.
fn assert_points_to_verify(cli: &Cli, args: &[&str]) {
    let out = cli.run(args);
    assert_eq!(out.code, 3, "{args:?}: {}{}", out.stdout, out.stderr);
    crate::harness::assert_damage_advice(args, &out.stderr);
}

#[test]
fn a_flipped_bit_in_an_old_segment_fails_every_command_that_reads_it() {
    let cli = Cli::new();
    small_segments(&cli);
    let all = segments(&cli);
    assert!(all.len() >= 3, "{all:?}");
    let old = &all[1];
    let mut bytes = std::fs::read(old).unwrap();
    bytes[100] ^= 0x04;
    std::fs::write(old, &bytes).unwrap();
    // The segment is indexed, so only what reads the event that was hit fails: that run's
    // commands, and `runs`, which shows every run's state.
    let hit: Vec<String> = (0..6)
        .map(|i| format!("r{i}"))
        .filter(|run| cli.run(&["status", run]).code != 0)
        .collect();
    assert_eq!(hit.len(), 1, "one event was hit: {hit:?}");
    let run = hit[0].as_str();
    for args in [
        &["status", run][..],
        &["events", run],
        &["runs"],
        &["plan", run],
        &["resume", run],
    ] {
        assert_points_to_verify(&cli, args);
    }
    let verify = cli.run(&["verify"]);
    assert_eq!(verify.code, 3);
    let name = old.file_name().unwrap().to_str().unwrap();
    assert!(
        verify
            .stdout
            .contains(&format!("DAMAGE   segments/{name} at offset")),
        "{}",
        verify.stdout
    );
    // Without index files every open scans every segment: every command fails.
    for entry in std::fs::read_dir(cli.data.path().join("segments")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "idx") {
            std::fs::remove_file(path).unwrap();
        }
    }
    for args in [
        &["status", "r0"][..],
        &["events", "r0"],
        &["runs"],
        &["plan", "r0"],
        &["resume", "r0"],
    ] {
        assert_points_to_verify(&cli, args);
    }
}
