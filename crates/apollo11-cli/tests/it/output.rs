//! What the commands print and create: capped and escaped text, quiet ends on a closed
//! stdout, private files, clear errors for bad arguments and damaged data dirs.

use crate::harness::{gone, ran, Cli};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

/// Control characters a terminal acts on; none may reach the output.
fn has_control(text: &str) -> bool {
    text.chars().any(|c| c.is_control() && c != '\n')
}

#[test]
fn status_events_and_runs_cap_and_escape_what_steps_and_paths_put_in_them() {
    let cli = Cli::new();
    // A data dir whose path holds escape sequences: it is in every error of a failed step.
    let data = cli.data.path().join("d\u{1b}[2J\u{7}");
    let data = data.to_str().unwrap();
    let toml = "[workflow]\nname = \"loud\"\n[[steps]]\nname = \"a\"\nrun = \"head -c 5000000 /dev/zero | tr '\\\\0' x; printf '\\\\n\\\\033[31mred\\\\033]0;title\\\\007\\\\n'; exit 1\"\nidempotency = \"natural\"\nretry = { max_attempts = 1 }\n";
    let wf = cli.workflow("wf.toml", toml);
    let work = cli.work.path();
    let out = cli.run_at(work, data, &["run", wf.to_str().unwrap(), "--run-id", "r"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    for args in [
        &["status", "r"][..],
        &["events", "r"],
        &["runs"],
        &["plan", "r"],
    ] {
        let out = cli.run_at(work, data, args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert!(!has_control(&out.stdout), "{args:?}: {:?}", out.stdout);
        assert!(
            out.stdout.len() < 16 * 1024,
            "{args:?}: {} bytes",
            out.stdout.len()
        );
    }
    assert!(!has_control(&out.stdout) && out.stdout.len() < 16 * 1024);
    let status = cli.run_at(work, data, &["status", "r"]).stdout;
    assert!(
        status.contains("\\u{1b}[31mred"),
        "escaped, not dropped: {status}"
    );
    assert!(status.contains("xxx…"), "the 5 MB line is cut: {status}");
}

#[test]
fn by_and_reason_with_control_characters_empty_or_too_long_are_usage_errors() {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", "[workflow]\nname = \"p\"\n[[steps]]\nname = \"a\"\nrun = \"exit 9\"\nidempotency = \"natural\"\nnon_retryable_exit_codes = [9]\n");
    assert_eq!(
        cli.run(&["run", wf.to_str().unwrap(), "--run-id", "p"])
            .code,
        1
    );
    let long_by = "b".repeat(257);
    let long_reason = "r".repeat(2049);
    let cases: [(&str, &str); 6] = [
        (
            "alice\n2026-01-01T00:00:00Z  #99 a manual_override(1) -> succeeded by root",
            "ok",
        ),
        ("alice", "fixed\u{1b}[2J"),
        ("", "ok"),
        ("alice", " "),
        (&long_by, "ok"),
        ("alice", &long_reason),
    ];
    for (by, reason) in cases {
        let out = cli.run(&[
            "override",
            "p",
            "a",
            "--to",
            "succeeded",
            "--by",
            by,
            "--reason",
            reason,
        ]);
        assert_eq!(out.code, 2, "{by:?} {reason:?}: {}", out.stderr);
        assert!(!has_control(out.stderr.trim_end()), "{:?}", out.stderr);
    }
    let events = cli.events_json("p");
    assert!(
        events.iter().all(|e| e["kind"] != "manual_override"),
        "nothing was appended"
    );
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let cli = Cli::new();
    let toml = "[workflow]\nname = \"q\"\n[[steps]]\nname = \"a\"\nrun = \"echo $$ > a.pid; touch a.started; sleep 5\"\nidempotency = \"natural\"\n";
    let wf = cli.workflow("wf.toml", toml);
    let wf = wf.to_str().unwrap();
    // `run | head` where head has gone: the run stops its steps and is left for resume.
    let mut child = cli.spawn(&["run", wf, "--run-id", "q"]);
    drop(child.stdout.take());
    let out = ran(child.wait_with_output().unwrap());
    assert_eq!(out.code, 130, "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    assert!(out.stderr.contains("apollo11 resume q"), "{}", out.stderr);
    if cli.file("a.started").exists() {
        let pid: i32 = std::fs::read_to_string(cli.file("a.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(gone(pid), "the step was stopped");
    }
    for args in [
        &["events", "q"][..],
        &["events", "q", "--json"],
        &["status", "q"],
        &["runs"],
        &["plan", "q"],
        &["verify"],
        &["validate", wf],
    ] {
        let mut child = cli
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = ran(child.wait_with_output().unwrap());
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{args:?}");
    }
}

#[test]
fn folders_and_files_the_cli_creates_are_private_under_umask_022() {
    let cli = Cli::new();
    let data = cli.data.path().join("fresh");
    let toml = "[workflow]\nname = \"m\"\n[[steps]]\nname = \"a\"\nrun = \"echo hi; echo '{}' > $APOLLO11_OUTPUT\"\nidempotency = \"natural\"\n";
    let wf = cli.workflow("wf.toml", toml);
    let out = ran(std::process::Command::new("sh")
        .arg("-c")
        .arg("umask 022; exec \"$0\" --data-dir \"$1\" run \"$2\" --run-id m")
        .arg(env!("CARGO_BIN_EXE_apollo11"))
        .arg(&data)
        .arg(&wf)
        .output()
        .unwrap());
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for dir in [
        &data,
        &data.join("logs"),
        &data.join("logs/m"),
        &data.join("logs/m/a"),
    ] {
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
    }
    for file in ["logs/m/a/1.log", "logs/m/a/1.output"] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
}

#[test]
fn a_data_dir_that_is_a_file_or_holds_a_segments_file_says_what_is_wrong() {
    let cli = Cli::new();
    let file = cli.data.path().join("plain-file");
    std::fs::write(&file, "not a folder").unwrap();
    let damaged = cli.data.path().join("damaged");
    std::fs::create_dir_all(&damaged).unwrap();
    std::fs::write(damaged.join("segments"), "not a folder").unwrap();
    let wf = cli.workflow("wf.toml", "[workflow]\nname = \"w\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n");
    for (dir, code, says) in [
        (&file, 2, "is not a folder"),
        (&damaged, 3, "segments is not a folder"),
    ] {
        let dir = dir.to_str().unwrap();
        for args in [
            &["status", "r"][..],
            &["runs"],
            &["verify"],
            &["resume", "r"],
            &["run", wf.to_str().unwrap()],
        ] {
            let out = cli.run_at(cli.work.path(), dir, args);
            assert_eq!(out.code, code, "{dir} {args:?}: {}", out.stderr);
            assert!(
                out.stderr.contains(says) && !out.stderr.contains("nothing has run"),
                "{dir} {args:?}: {}",
                out.stderr
            );
        }
    }
}

#[test]
fn runs_lists_every_readable_run_and_names_the_unreadable_one() {
    let cli = Cli::new();
    // A definition over the inline limit is pinned in a blob; losing it makes its run unreadable.
    let mut toml = String::from("[workflow]\nname = \"big\"\n");
    for i in 0..60 {
        toml.push_str(&format!("[[steps]]\nname = \"step-with-a-long-name-{i:03}\"\nrun = \"true\"\nidempotency = \"natural\"\n"));
    }
    let big = cli.workflow("big.toml", &toml);
    assert_eq!(
        cli.run(&["run", big.to_str().unwrap(), "--run-id", "a-bad"])
            .code,
        0
    );
    let blob = std::fs::read_dir(cli.data.path().join("blobs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(&blob).unwrap();
    let small = cli.workflow("small.toml", "[workflow]\nname = \"s\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n");
    assert_eq!(
        cli.run(&["run", small.to_str().unwrap(), "--run-id", "b-ok"])
            .code,
        0
    );
    for json in [false, true] {
        let args: &[&str] = if json { &["runs", "--json"] } else { &["runs"] };
        let out = cli.run(args);
        assert_eq!(out.code, 3, "{}", out.stderr);
        assert!(
            out.stdout.contains("b-ok") && !out.stdout.contains("a-bad"),
            "{}",
            out.stdout
        );
        assert!(out.stderr.contains("a-bad"), "{}", out.stderr);
    }
}
