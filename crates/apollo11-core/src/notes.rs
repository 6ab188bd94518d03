//! Operators' notes: who acts on a run (`by`) and why (`reason`), kept in the log and shown on
//! every timeline, so checked alike wherever they are given (the command line, the API).

use crate::limits;
use crate::names::disguise;

/// Checks who acts (`by`, named `field` in the message): a note of at most
/// `LABEL_BYTES_MAX` bytes that, like a name, has nothing that disguises it when shown
/// (`apollo11_core::disguise`): an operator could otherwise pass for another.
///
/// # Errors
///
/// What is wrong with `text`, naming `field`.
pub fn check_operator(field: &str, text: &str) -> Result<(), String> {
    check_note(field, text, limits::LABEL_BYTES_MAX)?;
    match disguise(text) {
        Some(d) => Err(format!(
            "{field} contains {d}: it could pass for another name when shown"
        )),
        None => Ok(()),
    }
}

/// Checks an operator's note (`by`, `reason`, named `field` in the message): it is kept in
/// the log and shown on every timeline, so it must say something, fit `max_bytes`, and be
/// one line of plain text (a newline could forge a line of a timeline, an escape sequence
/// drive a terminal).
///
/// # Errors
///
/// What is wrong with `text`, naming `field`.
pub fn check_note(field: &str, text: &str, max_bytes: u32) -> Result<(), String> {
    let problem = if text.trim().is_empty() {
        "is empty: it is kept in the log for whoever replays this run".to_owned()
    } else if text.len() > max_bytes as usize {
        format!("is {} bytes; at most {max_bytes} are allowed", text.len())
    } else if text.chars().any(char::is_control) {
        "contains a control character (newline, escape, ...)".to_owned()
    } else {
        return Ok(());
    };
    Err(format!("{field} {problem}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_must_say_something_fit_and_be_one_plain_line() {
        assert_eq!(check_note("reason", "deploy fixed", 20), Ok(()));
        let refused = [
            (" ", "reason is empty"),
            ("a".repeat(21).as_str(), "reason is 21 bytes; at most 20"),
            ("two\nlines", "reason contains a control character"),
        ]
        .map(|(text, said)| (check_note("reason", text, 20).unwrap_err(), said));
        for (message, said) in refused {
            assert!(message.starts_with(said), "{message}");
        }
    }

    #[test]
    fn an_operator_that_could_pass_for_another_is_refused() {
        assert_eq!(check_operator("by", "alice"), Ok(()));
        let message = check_operator("by", "ad\u{200b}min").unwrap_err();
        assert!(message.starts_with("by contains U+200B"), "{message}");
    }
}
