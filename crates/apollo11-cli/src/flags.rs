//! Values of flags more than one command takes: token files and durations.

use std::time::Duration;

/// Shortest token accepted.
const TOKEN_CHARS_MIN: usize = 16;

/// Reads a token file: its first line, at least [`TOKEN_CHARS_MIN`] characters.
pub(crate) fn read_token(path: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--token-file {}: {e}", path.display()))?;
    let token = text.lines().next().unwrap_or_default().trim().to_owned();
    if token.chars().count() < TOKEN_CHARS_MIN {
        return Err(format!(
            "--token-file {}: the token (its first line) must have at least {TOKEN_CHARS_MIN} characters",
            path.display()
        ));
    }
    if token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(format!(
            "--token-file {}: the token holds a space or a control character",
            path.display()
        ));
    }
    Ok(token)
}

/// A humantime duration of a second or more (`--gc-every`, `--header-timeout`,
/// `--heartbeat-timeout`, `--heartbeat-every`).
pub fn at_least_a_second(text: &str) -> Result<Duration, String> {
    let every = humantime::parse_duration(text).map_err(|e| format!("`{text}`: {e}"))?;
    if every < Duration::from_secs(1) {
        return Err(format!("`{text}`: 1s at least"));
    }
    Ok(every)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_of_a_second_or_more_are_taken() {
        assert_eq!(at_least_a_second("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(at_least_a_second("1s"), Ok(Duration::from_secs(1)));
        assert!(at_least_a_second("500ms")
            .unwrap_err()
            .contains("1s at least"));
        assert!(at_least_a_second("soon").is_err());
    }
}
