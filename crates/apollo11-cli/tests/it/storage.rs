//! Damaged logs through the binary: a torn tail is repaired at the next writing open; a
//! flipped bit in an old segment makes every command fail with a pointer to `verify`, and
//! `verify` names the file and offset (exit 3). Never a panic.

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
    let mut bytes = std::fs::read(&last).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).unwrap() + 1;
    bytes.truncate(end - 5);
    bytes.extend_from_slice(&[0xAB; 7]);
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

#[test]
fn a_flipped_bit_in_an_old_segment_fails_every_command_with_a_pointer_to_verify() {
    let cli = Cli::new();
    small_segments(&cli);
    let all = segments(&cli);
    assert!(all.len() >= 3, "{all:?}");
    let old = &all[1];
    let mut bytes = std::fs::read(old).unwrap();
    bytes[100] ^= 0x04;
    std::fs::write(old, &bytes).unwrap();
    for args in [
        &["status", "r0"][..],
        &["events", "r0"],
        &["runs"],
        &["plan", "r0"],
        &["resume", "r0"],
    ] {
        let out = cli.run(args);
        assert_eq!(out.code, 3, "{args:?}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains("apollo11 verify") && !out.stderr.contains("panicked"),
            "{args:?}: {}",
            out.stderr
        );
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
}
