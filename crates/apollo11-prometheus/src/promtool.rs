//! Prometheus's own parser and linter on a text: `promtool check metrics` (`testing`
//! feature). Missing promtool skips the check on a developer's machine, and fails it under
//! CI (`CI`, or `APOLLO11_REQUIRE_PROMTOOL=1`, which `cargo xtask ci` sets).

use std::io::Write;
use std::process::{Command, Stdio};

/// Asserts that `promtool check metrics` accepts `text` without a word of complaint; does
/// nothing when promtool is not installed and not required.
///
/// # Panics
///
/// When promtool rejects or lints the text, or is required and missing.
pub fn assert_accepted(text: &str) {
    if let Some(out) = check_metrics(text) {
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "promtool check metrics: {}{}\n{text}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Runs `promtool check metrics` on `text`; `None` when promtool is not installed and not
/// required.
fn check_metrics(text: &str) -> Option<std::process::Output> {
    let spawned = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required() => {
            eprintln!("promtool not found: the text was not checked by Prometheus's parser");
            return None;
        }
        Err(e) => panic!("promtool is required here (CI or APOLLO11_REQUIRE_PROMTOOL) : {e}"),
    };
    let mut stdin = child.stdin.take().expect("piped");
    stdin
        .write_all(text.as_bytes())
        .expect("promtool reads its input");
    drop(stdin);
    Some(child.wait_with_output().expect("promtool ends"))
}

fn required() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0");
    set("CI") || set("APOLLO11_REQUIRE_PROMTOOL")
}
