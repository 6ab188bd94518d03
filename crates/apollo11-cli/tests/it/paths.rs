//! Paths handed to steps: absolute whatever `--data-dir` is, and every step file inside the
//! data dir, one folder per run and per step.

use crate::harness::Cli;

/// A checkpoint step that fails once leaving a marker, a compensation, and a step that fails
/// for good so the first is compensated: every path variable a step can get is exercised.
/// Each step checks that its path variables are absolute and records what it saw.
const WORKFLOW: &str = r#"[workflow]
name = "paths"
on_failure = "rollback"
[defaults]
retry = { max_attempts = 2, initial = "10ms" }
[[steps]]
name = "a"
idempotency = "checkpoint"
run = """
case "$APOLLO11_OUTPUT" in /*) ;; *) echo "relative output $APOLLO11_OUTPUT" >> ledger; exit 9;; esac
if [ "$APOLLO11_ATTEMPT" = 1 ]; then echo '{"marker": 1}' > "$APOLLO11_OUTPUT"; exit 1; fi
case "$APOLLO11_PREVIOUS_PAYLOAD_FILE" in /*) ;; *) echo "relative previous $APOLLO11_PREVIOUS_PAYLOAD_FILE" >> ledger; exit 9;; esac
echo "a saw $(cat "$APOLLO11_PREVIOUS_PAYLOAD_FILE")" >> ledger
echo '{"out": 2}' > "$APOLLO11_OUTPUT"
"""
compensate = """
case "$APOLLO11_STEP_OUTPUT_FILE" in /*) ;; *) echo "relative step output $APOLLO11_STEP_OUTPUT_FILE" >> ledger; exit 9;; esac
echo "undo saw $(cat "$APOLLO11_STEP_OUTPUT_FILE")" >> ledger
"""
[[steps]]
name = "b"
run = "exit 5"
idempotency = "natural"
non_retryable_exit_codes = [5]
depends_on = ["a"]
"#;

#[test]
fn every_path_handed_to_a_step_is_absolute_whatever_the_data_dir() {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", WORKFLOW);
    // apollo11 runs in `cwd`; the steps run in the workflow's folder (cli.work).
    let sandbox = tempfile::tempdir().unwrap();
    let cwd = sandbox.path().join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(sandbox.path().join("target")).unwrap();
    std::os::unix::fs::symlink(sandbox.path().join("target"), cwd.join("link")).unwrap();
    let absolute = sandbox.path().join("abs");
    let forms = [
        ("rel", ".apollo11"),
        ("dot", "./x/data"),
        ("up", "../up"),
        ("abs", absolute.to_str().unwrap()),
        ("link", "link"),
    ];
    for (run, data_dir) in forms {
        std::fs::remove_file(cli.file("ledger")).ok();
        let out = cli.run_at(
            &cwd,
            data_dir,
            &["run", wf.to_str().unwrap(), "--run-id", run],
        );
        assert_eq!(
            out.code, 1,
            "{run}: rolled back: {}{}",
            out.stdout, out.stderr
        );
        assert_eq!(
            cli.ledger(),
            ["a saw {\"marker\": 1}", "undo saw {\"out\": 2}"],
            "--data-dir {data_dir}"
        );
        let status = cli.run_at(&cwd, data_dir, &["status", run, "--json"]);
        let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
        assert_eq!(status["state"], "rolled_back", "--data-dir {data_dir}");
        // The step files are where the data dir is, one folder per run and step.
        let data = cwd.join(data_dir);
        for file in [
            "a/1.log",
            "a/1.output",
            "a/2.log",
            "a/2.compensate.log",
            "b/1.log",
        ] {
            let path = data.join("logs").join(run).join(file);
            assert!(
                path.is_file(),
                "--data-dir {data_dir}: {} missing",
                path.display()
            );
        }
    }
}

/// Over Linux's 128 KiB cap on one environment variable.
const MIB: usize = 1024 * 1024;

#[test]
fn a_1_mib_output_reaches_its_compensation_and_a_1_mib_marker_its_next_attempt() {
    let cli = Cli::new();
    let toml = format!(
        r#"[workflow]
name = "big"
on_failure = "rollback"
[defaults]
retry = {{ max_attempts = 2, initial = "10ms" }}
[[steps]]
name = "a"
idempotency = "keyed"
run = "head -c {MIB} /dev/zero | tr '\\0' a > $APOLLO11_OUTPUT"
compensate = "echo \"undo $(tr -d a < $APOLLO11_STEP_OUTPUT_FILE | wc -c) $(wc -c < $APOLLO11_STEP_OUTPUT_FILE) ${{APOLLO11_STEP_OUTPUT:-unset}}\" >> ledger"
[[steps]]
name = "c"
idempotency = "checkpoint"
run = """
if [ $APOLLO11_ATTEMPT = 1 ]; then head -c {MIB} /dev/zero | tr '\\0' m > $APOLLO11_OUTPUT; exit 1; fi
echo "c $(tr -d m < $APOLLO11_PREVIOUS_PAYLOAD_FILE | wc -c) $(wc -c < $APOLLO11_PREVIOUS_PAYLOAD_FILE) ${{APOLLO11_PREVIOUS_PAYLOAD:-unset}}" >> ledger
"""
[[steps]]
name = "b"
run = "exit 5"
idempotency = "natural"
non_retryable_exit_codes = [5]
depends_on = ["a", "c"]
"#
    );
    let wf = cli.workflow("wf.toml", &toml);
    let out = cli.run_within(60, &["run", wf.to_str().unwrap(), "--run-id", "big"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert_eq!(cli.status_json("big")["state"], "rolled_back");
    // Only the marker's bytes, all of them; too big for the variable, so it is not set.
    assert_eq!(
        cli.ledger(),
        [format!("c 0 {MIB} unset"), format!("undo 0 {MIB} unset")]
    );
    let leftovers: Vec<_> = walk(&cli.data.path().join("logs"))
        .into_iter()
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(".previous-payload") || name.ends_with(".step-output")
        })
        .collect();
    assert!(
        leftovers.is_empty(),
        "payload files are removed: {leftovers:?}"
    );
}

#[test]
fn a_small_payload_is_also_in_the_variable_and_its_file_is_private() {
    let cli = Cli::new();
    let toml = r#"[workflow]
name = "small"
[defaults]
retry = { max_attempts = 2, initial = "10ms" }
[[steps]]
name = "c"
idempotency = "checkpoint"
run = """
if [ $APOLLO11_ATTEMPT = 1 ]; then printf '{"at": 3}' > $APOLLO11_OUTPUT; exit 1; fi
echo "$APOLLO11_PREVIOUS_PAYLOAD|$(cat $APOLLO11_PREVIOUS_PAYLOAD_FILE)|$(stat -c %a $APOLLO11_PREVIOUS_PAYLOAD_FILE)" >> ledger
"""
"#;
    let wf = cli.workflow("wf.toml", toml);
    let out = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "s"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(cli.ledger(), ["{\"at\": 3}|{\"at\": 3}|600"]);
}

/// Every file under `dir`, recursively.
pub fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten() {
        let path = entry.unwrap().path();
        if path.is_dir() && !path.is_symlink() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

#[test]
fn an_output_over_the_limit_fails_for_good_naming_the_limit_and_the_file() {
    let cli = Cli::new();
    let over = apollo11_core::limits::STEP_OUTPUT_BYTES_MAX + 1;
    // A sparse file: its size is what counts, and nothing of it may be read or copied.
    let toml = format!(
        "[workflow]\nname = \"huge\"\n[[steps]]\nname = \"a\"\nrun = \"truncate -s {over} $APOLLO11_OUTPUT\"\nidempotency = \"natural\"\nretry = {{ max_attempts = 3, initial = \"10ms\" }}\n"
    );
    let wf = cli.workflow("wf.toml", &toml);
    let out = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "h"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let failures: Vec<_> = cli
        .events_json("h")
        .into_iter()
        .filter(|e| e["kind"] == "failed")
        .collect();
    assert_eq!(failures.len(), 1, "not retried: {failures:?}");
    let error = failures[0]["error"].as_str().unwrap();
    let file = "logs/h/a/1.output in the data dir";
    assert!(
        error.contains(&format!("is {over} bytes"))
            && error.contains("STEP_OUTPUT_BYTES_MAX")
            && error.contains(file),
        "{error}"
    );
    assert_eq!(failures[0]["retryable"], false);
    let blobs = walk(&cli.data.path().join("blobs"));
    assert!(blobs.is_empty(), "nothing was copied: {blobs:?}");
}
