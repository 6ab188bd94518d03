//! A payload the log keeps in a blob that cannot be read (damaged or missing) stops the
//! command with exit 3 naming the blob; the step that needed it is not started without it,
//! and nothing is appended for it.

use crate::harness::{wait_until, Cli};
use std::path::PathBuf;

fn blobs(cli: &Cli) -> Vec<PathBuf> {
    std::fs::read_dir(cli.data.path().join("blobs"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

fn flip_a_byte(path: &std::path::Path) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[100] ^= 0x01;
    let mut perms = std::fs::metadata(path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(path, perms).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_damaged_or_missing_checkpoint_marker_stops_resume_with_exit_3_naming_the_blob() {
    let cli = Cli::new();
    // Attempt 1 leaves a marker too big to be inline (a blob), fails, and waits out a
    // backoff during which the run is stopped.
    let toml = r#"[workflow]
name = "cp"
[[steps]]
name = "c"
idempotency = "checkpoint"
retry = { max_attempts = 3, initial = "2s" }
run = """
echo "c $APOLLO11_ATTEMPT" >> ledger
if [ $APOLLO11_ATTEMPT = 1 ]; then head -c 10000 /dev/zero | tr '\\0' m > $APOLLO11_OUTPUT; exit 1; fi
"""
"#;
    let wf = cli.workflow("wf.toml", toml);
    let child = cli.spawn(&["run", wf.to_str().unwrap(), "--run-id", "cp"]);
    wait_until("the failure of attempt 1", || {
        cli.run(&["events", "cp", "--json"])
            .stdout
            .contains("\"kind\":\"failed\"")
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(
        crate::harness::ran(child.wait_with_output().unwrap()).code,
        130
    );
    let events = cli.events_json("cp").len();
    let blob = blobs(&cli).pop().expect("the marker is a blob");
    let sha = blob.file_name().unwrap().to_str().unwrap().to_owned();
    flip_a_byte(&blob);
    let out = cli.run(&["resume", "cp"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    crate::harness::assert_damage_advice(&[], &out.stderr);
    assert!(
        out.stderr.contains(&format!("blobs/{sha}")),
        "{}",
        out.stderr
    );
    std::fs::remove_file(&blob).unwrap();
    let out = cli.run(&["resume", "cp"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    crate::harness::assert_damage_advice(&[], &out.stderr);
    assert!(
        out.stderr.contains(&format!("blob {sha} not found")),
        "{}",
        out.stderr
    );
    assert_eq!(
        cli.ledger(),
        ["c 1"],
        "attempt 2 never ran without its marker"
    );
    assert_eq!(cli.events_json("cp").len(), events, "nothing was appended");
}

#[test]
fn a_damaged_output_stops_the_compensation_that_needs_it_with_exit_3() {
    let cli = Cli::new();
    let blobs_dir = cli.data.path().join("blobs");
    // `b` damages `a`'s recorded output (a blob), then fails for good: the rollback needs it.
    let toml = format!(
        r#"[workflow]
name = "comp"
on_failure = "rollback"
[[steps]]
name = "a"
idempotency = "keyed"
run = "head -c 10000 /dev/zero | tr '\\0' a > $APOLLO11_OUTPUT"
compensate = "echo undo >> ledger"
[[steps]]
name = "b"
idempotency = "natural"
depends_on = ["a"]
non_retryable_exit_codes = [5]
run = """
for f in {blobs}/*; do chmod u+w $f; printf X | dd of=$f bs=1 seek=100 conv=notrunc 2>/dev/null; done
exit 5
"""
"#,
        blobs = blobs_dir.display()
    );
    let wf = cli.workflow("wf.toml", &toml);
    let out = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "comp"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    crate::harness::assert_damage_advice(&[], &out.stderr);
    let sha = blobs(&cli).pop().unwrap();
    let sha = sha.file_name().unwrap().to_str().unwrap();
    assert!(
        out.stderr.contains(&format!("blobs/{sha}")),
        "{}",
        out.stderr
    );
    let kinds = |cli: &Cli| -> Vec<String> {
        cli.events_json("comp")
            .iter()
            .map(|e| {
                format!(
                    "{}:{}",
                    e["step"].as_str().unwrap_or("-"),
                    e["kind"].as_str().unwrap()
                )
            })
            .collect()
    };
    let expected = [
        "-:run_created",
        "a:started",
        "a:placed",
        "a:attempt_usage",
        "a:succeeded",
        "b:started",
        "b:placed",
        "b:attempt_usage",
        "b:failed",
    ];
    assert_eq!(
        kinds(&cli),
        expected,
        "b's failure is kept; no compensating"
    );
    let out = cli.run(&["resume", "comp"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    crate::harness::assert_damage_advice(&[], &out.stderr);
    assert!(
        out.stderr.contains(&format!("blobs/{sha}")),
        "{}",
        out.stderr
    );
    assert_eq!(kinds(&cli), expected);
    assert!(
        cli.ledger().is_empty(),
        "the compensation never ran without its output"
    );
}
