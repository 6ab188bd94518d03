//! The binary's tracing subscriber: what the engine's spans and events say goes to stderr,
//! filtered by `RUST_LOG` (default `warn`), never to stdout, which carries the commands'
//! output (`status --json`, `events | head`). Events quote text from outside (step errors,
//! paths), so each line is printed through `out::shown`, like every other message, and
//! without colours.

use std::io::Write;
use tracing_subscriber::EnvFilter;

/// The filter when `RUST_LOG` is unset: what an operator should see unasked.
const DEFAULT_FILTER: &str = "warn";

/// Installs the subscriber. A `RUST_LOG` that does not parse is reported on stderr, naming
/// the variable and the problem, and the default is used: logging is no reason to refuse
/// to run a workflow.
pub fn init() {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) => EnvFilter::try_new(&spec).unwrap_or_else(|e| {
            crate::warn(&format!(
                "RUST_LOG={spec:?} is not a valid filter ({e}); using {DEFAULT_FILTER:?}"
            ));
            EnvFilter::new(DEFAULT_FILTER)
        }),
        Err(_) => EnvFilter::new(DEFAULT_FILTER),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| Shown(std::io::stderr()))
        .with_ansi(false)
        .init();
}

/// Writes each line with its control characters escaped and its length capped.
struct Shown<W>(W);

impl<W: Write> Write for Shown<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        for line in text.split_inclusive('\n') {
            let (line, newline) = match line.strip_suffix('\n') {
                Some(line) => (line, "\n"),
                None => (line, ""),
            };
            let shown = crate::out::shown(line, crate::MESSAGE_CHARS_MAX);
            // A closed stderr is no reason to fail a command.
            let _ = write!(self.0, "{shown}{newline}");
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::Shown;
    use std::io::Write;

    #[test]
    fn each_traced_line_is_written_with_its_control_characters_escaped() {
        let mut shown = Shown(Vec::new());
        shown
            .write_all(b"WARN compensation failed error=d\x1b[2J\x07 here\nnext line\n")
            .unwrap();
        let written = String::from_utf8(shown.0).unwrap();
        assert!(
            !written.chars().any(|c| c.is_control() && c != '\n'),
            "{written:?}"
        );
        assert!(written.contains(r"d\u{1b}[2J\u{7} here"), "{written}");
        assert!(written.ends_with("\nnext line\n"), "{written:?}");
    }
}
