//! The one rule for names that become paths and keys: run ids, step names and workflow
//! names. A run's files live under a folder named by its run id and a step's files under a
//! name made from the step's name, and the idempotency key is `run_id/step`; a name that
//! could climb out of a folder, hide in one, or make two keys equal is refused wherever it
//! enters (a workflow file, a flag, a request, the store), by this one function. A name is
//! also shown (the web UI, the command line), so one that could pass for another is refused
//! too: bidirectional controls and other invisible format characters, spaces other than the
//! ASCII space, and a space at either end ([`disguise`]).

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
    /// It contains a character that disguises what is shown ([`disguise`]).
    Disguised(Disguise),
}

/// A character that makes a text look like another: where it is and what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Disguise {
    /// Its position, in characters from 1.
    pub at: usize,
    /// The character.
    pub ch: char,
}

impl fmt::Display for Disguise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.ch {
            ' ' => "a space at its start or end",
            c if is_format(c) => {
                "an invisible format character (bidirectional control, zero-width)"
            }
            _ => "a space other than the ASCII space",
        };
        write!(
            f,
            "U+{:04X}, {what}, at character {}",
            u32::from(self.ch),
            self.at
        )
    }
}

/// The first character of `text` that disguises it when shown: a bidirectional control or
/// another invisible format character (U+200B..U+200F, U+202A..U+202E, U+2060..U+206F,
/// U+FEFF, ...), a space other than U+0020 (U+00A0, U+202F, U+2000..U+200A, U+3000, ...),
/// or a space at its start or end.
pub fn disguise(text: &str) -> Option<Disguise> {
    let last = text.chars().count();
    text.chars()
        .enumerate()
        .map(|(i, ch)| Disguise { at: i + 1, ch })
        .find(|d| match d.ch {
            ' ' => d.at == 1 || d.at == last,
            c => is_format(c) || (c.is_whitespace() && !c.is_control()),
        })
}

/// Unicode's format characters (general category Cf), which are invisible or reorder text.
fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{890}'..='\u{891}'
            | '\u{8e2}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
    )
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
            NameProblem::Disguised(d) => write!(
                f,
                "the {what} `{shown}` contains {d}: it could pass for another name when shown"
            ),
        }
    }
}

impl std::error::Error for NameError {}

/// Checks a run id, step name or workflow name: non-empty, at most [`NAME_BYTES_MAX`]
/// bytes, not `.` or `..`, free of `/`, `\`, NUL and every other control character, and of
/// any character that disguises it ([`disguise`]).
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
        disguise(name).map(NameProblem::Disguised)
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
    fn names_that_disguise_themselves_are_refused_naming_the_character_and_where() {
        let cases = [
            ("invoice\u{202e}fdp.exe", '\u{202e}', 8),
            ("a\u{202d}b", '\u{202d}', 2),
            ("a\u{2066}b\u{2069}", '\u{2066}', 2),
            ("a\u{200e}", '\u{200e}', 2),
            ("\u{61c}a", '\u{61c}', 1),
            ("de\u{200b}ploy", '\u{200b}', 3),
            ("de\u{200c}ploy", '\u{200c}', 3),
            ("de\u{200d}ploy", '\u{200d}', 3),
            ("de\u{2060}ploy", '\u{2060}', 3),
            ("\u{feff}deploy", '\u{feff}', 1),
            ("de\u{ad}ploy", '\u{ad}', 3),
            ("two\u{a0}words", '\u{a0}', 4),
            ("two\u{202f}words", '\u{202f}', 4),
            ("two\u{2007}words", '\u{2007}', 4),
            ("two\u{3000}words", '\u{3000}', 4),
            (" deploy", ' ', 1),
            ("deploy ", ' ', 7),
            ("  ", ' ', 1),
        ];
        for (name, ch, at) in cases {
            let e = check_name(NameKind::Run, name).unwrap_err();
            assert_eq!(
                e.problem,
                NameProblem::Disguised(Disguise { at, ch }),
                "{name:?}"
            );
            let text = e.to_string();
            let code = format!("U+{:04X}", u32::from(ch));
            assert!(text.contains(&code), "{text}");
            assert!(text.contains(&format!("at character {at}")), "{text}");
        }
        assert_eq!(
            check_name(NameKind::Step, "a\u{202e}b")
                .unwrap_err()
                .to_string(),
            "the step name `a\\u{202e}b` contains U+202E, an invisible format character \
             (bidirectional control, zero-width), at character 2: it could pass for another \
             name when shown"
        );
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
            "two words",
            "שלום",
            "emoji 🚀",
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
