//! The bearer token: with one configured, every `/api/v1` call and `/metrics` need
//! `Authorization: Bearer TOKEN`, the scheme in any case (401 otherwise); `/healthz`, `/readyz` and the UI's files
//! do not.

use crate::ApiError;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

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
