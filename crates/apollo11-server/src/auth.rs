//! The bearer token: with one configured, every `/api/v1` call and `/metrics` need
//! `Authorization: Bearer TOKEN`, the scheme in any case (401 otherwise); `/healthz`, `/readyz` and the UI's files
//! do not.

use crate::ApiError;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

/// Shortest token accepted.
pub const TOKEN_CHARS_MIN: usize = 16;

/// Reads a token file: its first line, at least [`TOKEN_CHARS_MIN`] characters.
pub fn read_token(path: &std::path::Path) -> Result<String, String> {
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

/// Refuses a request without the right token (when one is configured).
pub async fn require_token(
    State(token): State<Arc<Option<String>>>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if let Some(token) = token.as_deref() {
        let sent = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        if !sent.is_some_and(|sent| same(sent.as_bytes(), token.as_bytes())) {
            return Err(ApiError::Unauthorized(
                "this server needs `Authorization: Bearer TOKEN` with the token of its --token-file"
                    .to_owned(),
            ));
        }
    }
    Ok(next.run(request).await)
}

/// The token of a `Bearer` credential; the scheme's name is case-insensitive (RFC 7235).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
}

/// Compares in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
