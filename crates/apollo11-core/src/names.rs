//! The one rule for names that become paths and keys: run ids, step names and workflow
//! names. A run's files live under a folder named by its run id and a step's files under a
//! name made from the step's name, and the idempotency key is `run_id/step`; a name that
//! could climb out of a folder, hide in one, or make two keys equal is refused wherever it
//! enters (a workflow file, a flag, a request, the store), by this one function.

use crate::limits::NAME_BYTES_MAX;
use std::fmt;

/// What kind of name is checked, for the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NameKind {
    /// A run id.
    Run,
    /// A step name.
    Step,
    /// A workflow name.
    Workflow,
}

impl NameKind {
    /// How the kind is called in messages.
    pub fn label(self) -> &'static str {
        match self {
            NameKind::Run => "run id",
            NameKind::Step => "step name",
            NameKind::Workflow => "workflow name",
        }
    }
}

/// Why a name was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameError {
    /// The kind of name.
    pub kind: NameKind,
    /// The name, with control characters escaped so the message is safe to print.
    pub shown: String,
    /// What is wrong with it.
    pub problem: NameProblem,
}

/// What is wrong with a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameProblem {
    /// It is empty.
    Empty,
    /// It is longer than [`NAME_BYTES_MAX`] bytes.
    TooLong {
        /// Its length in bytes.
        bytes: usize,
    },
    /// It is `.` or `..`.
    Dots,
    /// It contains `/` or `\`, which would make it a path.
    Separator,
    /// It contains NUL or another control character.
    Control,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = self.kind.label();
        let shown = &self.shown;
        match self.problem {
            NameProblem::Empty => write!(f, "the {what} is empty"),
            NameProblem::TooLong { bytes } => write!(
                f,
                "the {what} `{shown}` is {bytes} bytes; at most {NAME_BYTES_MAX} are allowed"
            ),
            NameProblem::Dots => write!(
                f,
                "the {what} `{shown}` is not allowed: `.` and `..` name folders"
            ),
            NameProblem::Separator => write!(
                f,
                "the {what} `{shown}` contains `/` or `\\`; names cannot be paths"
            ),
            NameProblem::Control => write!(
                f,
                "the {what} `{shown}` contains a control character (NUL, newline, escape, ...)"
            ),
        }
    }
}

impl std::error::Error for NameError {}

/// Checks a run id, step name or workflow name: non-empty, at most [`NAME_BYTES_MAX`]
/// bytes, not `.` or `..`, and free of `/`, `\`, NUL and every other control character.
///
/// # Errors
///
/// [`NameError`] naming the first rule the name breaks.
pub fn check_name(kind: NameKind, name: &str) -> Result<(), NameError> {
    let problem = if name.is_empty() {
        Some(NameProblem::Empty)
    } else if name.len() > NAME_BYTES_MAX as usize {
        Some(NameProblem::TooLong { bytes: name.len() })
    } else if name == "." || name == ".." {
        Some(NameProblem::Dots)
    } else if name.contains(['/', '\\']) {
        Some(NameProblem::Separator)
    } else if name.chars().any(char::is_control) {
        Some(NameProblem::Control)
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(NameError {
            kind,
            shown: shown(name),
            problem,
        }),
    }
}

/// The name as it may be printed: control characters escaped, cut after 64 characters.
fn shown(name: &str) -> String {
    let mut out: String = name.chars().take(64).flat_map(char::escape_debug).collect();
    if name.chars().nth(64).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_paths_or_hide_are_refused() {
        let long = "x".repeat(NAME_BYTES_MAX as usize + 1);
        let cases = [
            ("", NameProblem::Empty),
            (".", NameProblem::Dots),
            ("..", NameProblem::Dots),
            ("../../x", NameProblem::Separator),
            ("/etc/passwd", NameProblem::Separator),
            ("a/b", NameProblem::Separator),
            ("a\\b", NameProblem::Separator),
            ("a\0b", NameProblem::Control),
            ("a\nb", NameProblem::Control),
            ("a\u{1b}[31mb", NameProblem::Control),
            ("a\u{7f}", NameProblem::Control),
            (long.as_str(), NameProblem::TooLong { bytes: long.len() }),
        ];
        for (name, problem) in cases {
            let e = check_name(NameKind::Step, name).unwrap_err();
            assert_eq!(e.problem, problem, "{name:?}");
            assert!(!e.to_string().contains(['\0', '\n', '\u{1b}']), "{e}");
        }
    }

    #[test]
    fn ordinary_names_pass_up_to_the_limit() {
        let longest = "é".repeat(NAME_BYTES_MAX as usize / 2);
        for name in [
            "collect",
            "host-21",
            "a.b",
            ".hidden",
            "...",
            "ünïcode ok",
            &longest,
        ] {
            check_name(NameKind::Run, name).unwrap();
        }
    }

    #[test]
    fn messages_name_the_kind_and_escape_the_name() {
        let e = check_name(NameKind::Workflow, "a\nb/").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the workflow name `a\\nb/` contains `/` or `\\`; names cannot be paths"
        );
        let long = "y".repeat(300);
        let e = check_name(NameKind::Run, &long).unwrap_err();
        assert!(e.to_string().contains("is 300 bytes; at most 200"), "{e}");
        assert!(e.to_string().contains('…'), "{e}");
    }
}
