//! Everything the commands print on stdout goes through [`line()`], so that a closed stdout
//! (`apollo11 events | head`) ends a command quietly instead of a panic, and a run being
//! followed notices it ([`closed`]) and stops like on Ctrl-C. Text from outside goes through
//! [`shown`] first: capped and with control characters escaped, so that no log line, name,
//! path or operator note can flood a terminal or drive it with escape sequences.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

static CLOSED: AtomicBool = AtomicBool::new(false);
static CLOSED_NOTIFY: Notify = Notify::const_new();

/// Stdout was closed by its reader (or cannot be written any more).
#[derive(Debug)]
pub struct Closed;

impl From<Closed> for crate::Exit {
    /// The reader has what it wanted: a quiet, successful end.
    fn from(_: Closed) -> crate::Exit {
        crate::Exit::code(0)
    }
}

/// Prints `text` and a newline on stdout.
pub fn line(text: impl std::fmt::Display) -> Result<(), Closed> {
    if CLOSED.load(Ordering::Relaxed) {
        return Err(Closed);
    }
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(_) => {
            CLOSED.store(true, Ordering::Relaxed);
            CLOSED_NOTIFY.notify_waiters();
            Err(Closed)
        }
    }
}

/// Completes once a print found stdout closed.
pub async fn closed() {
    loop {
        // Created before the check, so a close between the two still wakes it.
        let notified = CLOSED_NOTIFY.notified();
        if CLOSED.load(Ordering::Relaxed) {
            return;
        }
        notified.await;
    }
}

/// Text from outside as it may be printed: every control character escaped (`\u{1b}`,
/// `\n`), and cut after `max_chars` characters with `…`.
pub fn shown(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars * 2));
    for (i, c) in text.chars().enumerate() {
        if i == max_chars {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Longest name shown (run ids, steps, workflows: the names rule allows 200 bytes).
pub const NAME_CHARS_MAX: usize = 200;
/// Longest error, note or log line shown in a table.
pub const TEXT_CHARS_MAX: usize = 300;
/// Longest error or reason shown in a timeline (the log keeps at most 2 KiB of one).
pub const DETAIL_CHARS_MAX: usize = 2_048;

/// A name from the log (old logs may hold names today's rule refuses).
pub fn name(text: &str) -> String {
    shown(text, NAME_CHARS_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_text_cut() {
        assert_eq!(shown("a\u{1b}[2Jb\nc\u{7}", 100), "a\\u{1b}[2Jb\\nc\\u{7}");
        assert_eq!(shown("é\u{9b}x", 100), "é\\u{9b}x");
        assert_eq!(shown(&"x".repeat(10), 4), "xxxx…");
        assert_eq!(
            shown("\"quotes\" and \\ stay", 100),
            "\"quotes\" and \\ stay"
        );
    }
}
