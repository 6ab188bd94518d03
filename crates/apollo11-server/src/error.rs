//! The one error shape of the API: `{"error": {"code", "message"}}` with its status, and how
//! the engine's and the store's errors map onto it.

use apollo11_runtime::{EngineError, Refusal};
use apollo11_store::StoreError;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered as the API's error object: each variant carries its message and
/// stands for one status and one `code`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiError {
    /// 400 `invalid`: a malformed request (body, path, query, header).
    Invalid(String),
    /// 400 `invalid` about one parameter of a start: its name (the error object's `param`)
    /// and the message.
    InvalidParam(String, String),
    /// 401 `unauthorized`: no token, or not the server's.
    Unauthorized(String),
    /// 403 `invalid`: a foreign `Host` or `Origin`.
    Forbidden(String),
    /// 404 `not_found`.
    NotFound(String),
    /// 405 `method_not_allowed`: a known route asked with another method.
    MethodNotAllowed(String),
    /// 409 `conflict`.
    Conflict(String),
    /// 409 with the refusal's own code (`finished`, `not_paused`, ...).
    Refused(Refusal, String),
    /// 412 `definition_differs`: the client means another definition of the workflow.
    DefinitionDiffers(String),
    /// 413 `too_large`.
    TooLarge(String),
    /// 415 `invalid`: a mutation whose body is not JSON.
    UnsupportedMediaType(String),
    /// 500 `damaged`: the data dir holds something it cannot.
    Damaged(String),
    /// 500 `internal`: the server's own failure (a panic in a request's work).
    Internal(String),
    /// 503 `unavailable`.
    Unavailable(String),
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Invalid(_) | ApiError::InvalidParam(..) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) | ApiError::Refused(..) => StatusCode::CONFLICT,
            ApiError::DefinitionDiffers(_) => StatusCode::PRECONDITION_FAILED,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Damaged(_) | ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The `code` of the error object.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Invalid(_)
            | ApiError::InvalidParam(..)
            | ApiError::Forbidden(_)
            | ApiError::UnsupportedMediaType(_) => "invalid",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed(_) => "method_not_allowed",
            ApiError::Conflict(_) => "conflict",
            ApiError::Refused(refusal, _) => refusal.code(),
            ApiError::DefinitionDiffers(_) => "definition_differs",
            ApiError::TooLarge(_) => "too_large",
            ApiError::Damaged(_) => "damaged",
            ApiError::Internal(_) => "internal",
            ApiError::Unavailable(_) => "unavailable",
        }
    }

    /// What the message says.
    pub fn message(&self) -> &str {
        match self {
            ApiError::Invalid(m)
            | ApiError::InvalidParam(_, m)
            | ApiError::Unauthorized(m)
            | ApiError::Forbidden(m)
            | ApiError::NotFound(m)
            | ApiError::MethodNotAllowed(m)
            | ApiError::Conflict(m)
            | ApiError::Refused(_, m)
            | ApiError::DefinitionDiffers(m)
            | ApiError::TooLarge(m)
            | ApiError::UnsupportedMediaType(m)
            | ApiError::Damaged(m)
            | ApiError::Internal(m)
            | ApiError::Unavailable(m) => m,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = json!({"code": self.code(), "message": self.message()});
        if let ApiError::InvalidParam(param, _) = &self {
            error["param"] = json!(param);
        }
        let body = json!({ "error": error });
        let mut response = (self.status(), body.to_string()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// What an API user is told of a store error that names a file of the server: the same
/// without the path, which goes to the server's log. `None` for the errors that name none.
fn without_path(e: &StoreError) -> Option<String> {
    let public = match e {
        StoreError::Corrupted { offset, reason, .. } => {
            format!("corrupted data in a file of the data dir at offset {offset}: {reason}")
        }
        StoreError::Io { source, .. } => {
            format!("the data dir cannot be read or written: {source}")
        }
        StoreError::Locked { .. } => "the data dir is locked by another writer".to_owned(),
        StoreError::GcInProgress { .. } => {
            "a gc is in progress; retry, or a writing open will finish it".to_owned()
        }
        StoreError::Poisoned { .. } => {
            "the store stopped after a durability failure and accepts nothing more".to_owned()
        }
        _ => return None,
    };
    tracing::error!(error = %e, "store error answered without its file");
    Some(format!("{public} (the server's log names the file)"))
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        if let Some(public) = without_path(&e) {
            return match e {
                StoreError::Corrupted { .. } => ApiError::Damaged(public),
                _ => ApiError::Unavailable(public),
            };
        }
        match e {
            // Something the log points at is gone: the data dir is damaged.
            StoreError::NotFound { .. } => ApiError::Damaged(format!(
                "{e}, but the log refers to it: the data dir is damaged"
            )),
            StoreError::Invalid { .. } | StoreError::TooLarge { .. } => {
                ApiError::Invalid(e.to_string())
            }
            StoreError::Conflict { .. } => ApiError::Conflict(e.to_string()),
            other => ApiError::Unavailable(other.to_string()),
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        match e {
            EngineError::Store(s) => s.into(),
            EngineError::UnknownRun { .. }
            | EngineError::UnknownStep { .. }
            | EngineError::BeforeRun { .. } => ApiError::NotFound(e.to_string()),
            EngineError::NotAllowed { ref refusal, .. }
            | EngineError::OverrideNotAllowed { ref refusal, .. }
            | EngineError::RerunNotAllowed { ref refusal, .. }
            | EngineError::SignalNotAllowed { ref refusal, .. } => {
                ApiError::Refused(refusal.clone(), e.to_string())
            }
            EngineError::RunExists { .. }
            | EngineError::AlreadyRunning { .. }
            | EngineError::DefinitionChanged { .. }
            | EngineError::UnknownWorkflow { .. } => ApiError::Conflict(e.to_string()),
            EngineError::BadDefinition { .. } => ApiError::Damaged(e.to_string()),
            EngineError::Workflow(_) => ApiError::Invalid(e.to_string()),
            other => ApiError::Unavailable(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes the OpenAPI document lets an error object carry.
    fn documented_codes() -> Vec<String> {
        let openapi: serde_json::Value = serde_json::from_str(crate::OPENAPI).unwrap();
        let codes = &openapi["components"]["schemas"]["Error"]["properties"]["error"]["properties"]
            ["code"]["enum"];
        let codes = codes.as_array().expect("the error code's enum");
        codes
            .iter()
            .map(|c| c.as_str().unwrap().to_owned())
            .collect()
    }

    /// The variant after `e` in a walk through all of them; the match makes a new variant
    /// a compile error here until it joins the walk.
    fn after(e: &ApiError) -> Option<ApiError> {
        let m = String::new;
        Some(match e {
            ApiError::Invalid(_) => ApiError::InvalidParam(m(), m()),
            ApiError::InvalidParam(..) => ApiError::Unauthorized(m()),
            ApiError::Unauthorized(_) => ApiError::Forbidden(m()),
            ApiError::Forbidden(_) => ApiError::NotFound(m()),
            ApiError::NotFound(_) => ApiError::MethodNotAllowed(m()),
            ApiError::MethodNotAllowed(_) => ApiError::Conflict(m()),
            ApiError::Conflict(_) => ApiError::Refused(Refusal::NotPaused, m()),
            ApiError::Refused(..) => ApiError::DefinitionDiffers(m()),
            ApiError::DefinitionDiffers(_) => ApiError::TooLarge(m()),
            ApiError::TooLarge(_) => ApiError::UnsupportedMediaType(m()),
            ApiError::UnsupportedMediaType(_) => ApiError::Damaged(m()),
            ApiError::Damaged(_) => ApiError::Internal(m()),
            ApiError::Internal(_) => ApiError::Unavailable(m()),
            ApiError::Unavailable(_) => return None,
        })
    }

    #[test]
    fn every_code_an_answer_can_carry_is_documented() {
        let documented = documented_codes();
        let mut next = Some(ApiError::Invalid(String::new()));
        while let Some(e) = next {
            let code = e.code();
            assert!(documented.iter().any(|d| d == code), "{e:?}: {code}");
            next = after(&e);
        }
    }

    #[test]
    fn a_refused_method_and_a_panic_have_codes_of_their_own() {
        let refused = ApiError::MethodNotAllowed(String::new());
        assert_eq!(
            (refused.status(), refused.code()),
            (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
        );
        let panic = ApiError::Internal(String::new());
        assert_eq!(
            (panic.status(), panic.code()),
            (StatusCode::INTERNAL_SERVER_ERROR, "internal")
        );
    }

    #[test]
    fn store_errors_are_answered_without_the_paths_they_name() {
        let file = "/srv/apollo11/data/segments/00000001.seg";
        let corrupted = || StoreError::Corrupted {
            file: file.into(),
            offset: 42,
            reason: "bad CRC".into(),
        };
        let errors = [
            StoreError::io(format!("reading {file}"), std::io::Error::other("EIO")),
            corrupted(),
            StoreError::Locked {
                path: file.into(),
                holder: Some("pid 7".into()),
            },
            StoreError::GcInProgress {
                manifest: file.into(),
            },
            StoreError::Poisoned {
                cause: format!("syncing {file}: EIO"),
            },
        ];
        for e in errors {
            let shown = e.to_string();
            let answered = ApiError::from(e);
            assert!(
                !answered.message().contains("/srv"),
                "{shown}: {answered:?}"
            );
            assert!(
                answered.message().contains("the server's log"),
                "{answered:?}"
            );
        }
        let io = ApiError::from(StoreError::io(file, std::io::Error::other("EIO")));
        assert!(io.message().contains("EIO"), "{io:?}");
        let damaged = ApiError::from(corrupted());
        assert_eq!(damaged.code(), "damaged");
        assert!(
            damaged.message().contains("offset 42: bad CRC"),
            "{damaged:?}"
        );
    }
}
