//! The class of a shell step's failed attempt: `spawn` for a command `sh` could not find or
//! run (exit 127, 126), else the first of the author's `[[classify]]` rules that matches
//! its exit code or the last lines of its log, else `exit:N`. With the class, the failure's
//! fingerprint from those lines, by which the machine tells a failure that repeats itself.

use apollo11_core::{FailureClass, WorkflowSpec};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The workflow attribute that holds the `[[classify]]` rules, as JSON.
pub const CLASSIFY: &str = "classify";

/// How many of the log's last lines a rule reads and the fingerprint hashes.
pub const TAIL_LINES: usize = 10;

/// How many of the log's last bytes those lines are looked for in.
pub const TAIL_BYTES: u64 = 4096;

/// `sh`'s exit code for a command it could not find.
const NOT_FOUND: i32 = 127;

/// `sh`'s exit code for a command it found but could not run.
const NOT_EXECUTABLE: i32 = 126;

/// One `[[classify]]` rule: a failure is of class `class` when its exit code is one of
/// `exit_codes` or the last lines of its log match `stderr`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassRule {
    /// The author's class.
    pub class: String,
    /// Exit codes of the class.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exit_codes: Vec<i32>,
    /// A regular expression (regex-lite syntax) over the last lines of the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

impl ClassRule {
    /// Whether a failure that exited with `code`, its log ending in `tail`, is of this
    /// rule's class. A pattern that does not compile (refused when the file is read)
    /// matches nothing.
    fn matches(&self, code: i32, tail: &str) -> bool {
        self.exit_codes.contains(&code)
            || self.stderr.as_deref().is_some_and(|pattern| {
                regex_lite::Regex::new(pattern).is_ok_and(|re| re.is_match(tail))
            })
    }
}

/// The rules a workflow declares (none when its attribute is missing or unreadable, which
/// a definition this crate wrote never is).
pub fn rules_of(spec: &WorkflowSpec) -> Vec<ClassRule> {
    spec.attributes
        .get(CLASSIFY)
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// The class of an attempt that exited with `code` (not 0), its log ending in `tail`.
pub fn classify(rules: &[ClassRule], code: i32, tail: &str) -> FailureClass {
    if code == NOT_FOUND || code == NOT_EXECUTABLE {
        return FailureClass::Spawn;
    }
    rules
        .iter()
        .find(|rule| rule.matches(code, tail))
        .map_or(FailureClass::Exit(code), |rule| {
            FailureClass::Author(rule.class.clone())
        })
}

/// The class of an attempt killed by the signal numbered `signal`: `signal:KILL`, or the
/// number when it names no signal.
pub fn signal_class(signal: i32) -> FailureClass {
    let name = nix::sys::signal::Signal::try_from(signal).map_or_else(
        |_| signal.to_string(),
        |s| s.as_str().trim_start_matches("SIG").to_owned(),
    );
    FailureClass::Signal(name)
}

/// The last [`TAIL_LINES`] lines of the log at `path`, read from its last [`TAIL_BYTES`]
/// bytes; empty when it cannot be read.
pub fn tail(path: &Path) -> String {
    crate::files::tail(path, TAIL_LINES, TAIL_BYTES)
        .map_or_else(|_| String::new(), |lines| lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(class: &str, exit_codes: &[i32], stderr: Option<&str>) -> ClassRule {
        ClassRule {
            class: class.into(),
            exit_codes: exit_codes.to_vec(),
            stderr: stderr.map(str::to_owned),
        }
    }

    #[test]
    fn the_first_matching_rule_names_the_class_and_sh_codes_are_spawn() {
        let rules = [
            rule("transient", &[75], Some("connection refused|503")),
            rule("fatal", &[], Some("(?i)permission denied")),
        ];
        let class = |code, tail| classify(&rules, code, tail).name();
        assert_eq!(class(75, ""), "transient");
        assert_eq!(class(1, "curl: (7) connection refused"), "transient");
        assert_eq!(class(1, "open: Permission denied"), "fatal");
        assert_eq!(class(2, "something else"), "exit:2");
        assert_eq!(class(127, "sh: 1: nope: not found"), "spawn");
        assert_eq!(class(126, ""), "spawn");
        assert_eq!(signal_class(9).name(), "signal:KILL");
        assert_eq!(signal_class(99).name(), "signal:99");
    }

    #[test]
    fn the_tail_is_the_last_lines_of_the_last_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let text: String = (0..5_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).unwrap();
        let tail = tail(&path);
        assert_eq!(tail.lines().count(), TAIL_LINES);
        assert!(tail.ends_with("line 4999"), "{tail}");
        assert_eq!(super::tail(&dir.path().join("none")), "");
    }
}
