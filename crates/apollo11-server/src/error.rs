//! The one error shape of the API: `{"error": {"code", "message"}}` with its status, and how
//! the engine's and the store's errors map onto it.

use apollo11_runtime::{EngineError, Refusal};
use apollo11_store::StoreError;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered as the API's error object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What the message is about.
    pub message: String,
    /// A `code` more precise than the status's (why an action is refused).
    pub reason: Option<&'static str>,
}

impl ApiError {
    /// 400 `invalid`.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// 409 `conflict`.
    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, message)
    }

    /// 500 `damaged`.
    pub fn damaged(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// 503 `unavailable`.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// An error with this status.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            reason: None,
        }
    }

    /// 409 with the refusal's own code (`finished`, `not_paused`, ...).
    pub fn refused(refusal: &Refusal, message: impl Into<String>) -> ApiError {
        ApiError {
            reason: Some(refusal.code()),
            ..ApiError::conflict(message)
        }
    }

    /// The `code` of the error object: the refusal's, else the status's.
    pub fn code(&self) -> &'static str {
        if let Some(reason) = self.reason {
            return reason;
        }
        match self.status {
            StatusCode::UNAUTHORIZED => "unauthorized",
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::CONFLICT => "conflict",
            StatusCode::PRECONDITION_FAILED => "definition_differs",
            StatusCode::PAYLOAD_TOO_LARGE => "too_large",
            StatusCode::INTERNAL_SERVER_ERROR => "damaged",
            StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            _ => "invalid",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code(), "message": self.message}});
        let mut response = (self.status, body.to_string()).into_response();
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
                StoreError::Corrupted { .. } => ApiError::damaged(public),
                _ => ApiError::unavailable(public),
            };
        }
        match e {
            // Something the log points at is gone: the data dir is damaged.
            StoreError::NotFound { .. } => ApiError::damaged(format!(
                "{e}, but the log refers to it: the data dir is damaged"
            )),
            StoreError::Invalid { .. } | StoreError::TooLarge { .. } => {
                ApiError::invalid(e.to_string())
            }
            StoreError::Conflict { .. } => ApiError::conflict(e.to_string()),
            other => ApiError::unavailable(other.to_string()),
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        match e {
            EngineError::Store(s) => s.into(),
            EngineError::UnknownRun { .. }
            | EngineError::UnknownStep { .. }
            | EngineError::BeforeRun { .. } => ApiError::not_found(e.to_string()),
            EngineError::NotAllowed { ref refusal, .. }
            | EngineError::OverrideNotAllowed { ref refusal, .. } => {
                ApiError::refused(refusal, e.to_string())
            }
            EngineError::RunExists { .. }
            | EngineError::AlreadyRunning { .. }
            | EngineError::DefinitionChanged { .. }
            | EngineError::UnknownWorkflow { .. } => ApiError::conflict(e.to_string()),
            EngineError::BadDefinition { .. } => ApiError::damaged(e.to_string()),
            EngineError::Workflow(_) => ApiError::invalid(e.to_string()),
            other => ApiError::unavailable(other.to_string()),
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

    #[test]
    fn every_code_an_answer_can_carry_is_documented() {
        let documented = documented_codes();
        for status in 400..600 {
            let Ok(status) = StatusCode::from_u16(status) else {
                continue;
            };
            let code = ApiError::new(status, "").code();
            assert!(documented.iter().any(|d| d == code), "{status}: {code}");
        }
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
            assert!(!answered.message.contains("/srv"), "{shown}: {answered:?}");
            assert!(
                answered.message.contains("the server's log"),
                "{answered:?}"
            );
        }
        let io = ApiError::from(StoreError::io(file, std::io::Error::other("EIO")));
        assert!(io.message.contains("EIO"), "{io:?}");
        let damaged = ApiError::from(corrupted());
        assert_eq!(damaged.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            damaged.message.contains("offset 42: bad CRC"),
            "{damaged:?}"
        );
    }
}
