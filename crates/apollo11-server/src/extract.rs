//! Extractors that answer every malformed request with the API's error object: JSON bodies
//! (capped at [`BODY_BYTES_MAX`], unknown fields refused), path segments checked against the
//! names rule, and query parameters parsed with messages naming the parameter.

use crate::ApiError;
use apollo11_core::{check_name, NameKind};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;

/// Largest request body accepted (413 above it).
pub const BODY_BYTES_MAX: usize = 64 * 1024;

/// A JSON body of type `T`.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, ApiError> {
        let too_large =
            || ApiError::TooLarge(format!("the request body is over {BODY_BYTES_MAX} bytes"));
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > BODY_BYTES_MAX as u64) {
            return Err(too_large());
        }
        let bytes = axum::body::to_bytes(request.into_body(), BODY_BYTES_MAX)
            .await
            .map_err(|_| too_large())?;
        serde_json::from_slice(&bytes)
            .map(Body)
            .map_err(|e| ApiError::Invalid(format!("body: {e}")))
    }
}

/// The path's parameters, each checked against the names rule (runs, steps).
pub struct Names(pub Vec<String>);

impl<S: Send + Sync> FromRequestParts<S> for Names {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(params) =
            axum::extract::Path::<Vec<(String, String)>>::from_request_parts(parts, state)
                .await
                .map_err(|e| ApiError::Invalid(format!("path: {e}")))?;
        let mut names = Vec::with_capacity(params.len());
        for (key, value) in params {
            let kind = if key == "step" {
                NameKind::Step
            } else {
                NameKind::Run
            };
            check_name(kind, &value).map_err(|e| ApiError::Invalid(format!("{key}: {e}")))?;
            names.push(value);
        }
        Ok(Names(names))
    }
}

/// The query string's parameters (the last of a repeated one counts).
pub struct Params(BTreeMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
            .map_err(|e| ApiError::Invalid(format!("query: {e}")))?;
        Ok(Params(pairs.into_iter().collect()))
    }
}

impl Params {
    /// A text parameter.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// A whole-number parameter, or `default` when absent; 400 naming it when it is not a
    /// number within `min..=max`.
    pub fn number(&self, name: &str, default: u64, min: u64, max: u64) -> Result<u64, ApiError> {
        let Some(text) = self.text(name) else {
            return Ok(default);
        };
        let n: u64 = text
            .parse()
            .map_err(|_| ApiError::Invalid(format!("{name}: `{text}` is not a whole number")))?;
        if !(min..=max).contains(&n) {
            return Err(ApiError::Invalid(format!(
                "{name}: {n} is not between {min} and {max}"
            )));
        }
        Ok(n)
    }

    /// A boolean parameter (`true` or `false`), `false` when absent.
    pub fn flag(&self, name: &str) -> Result<bool, ApiError> {
        match self.text(name) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(other) => Err(ApiError::Invalid(format!(
                "{name}: `{other}` is neither true nor false"
            ))),
        }
    }
}
