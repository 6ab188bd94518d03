//! The web UI, served from the binary: every file of the crate's flat `ui/` folder is
//! embedded at build time (`build.rs`). `GET /` is `index.html`; `GET /ui/{file}` the others,
//! with the content type of their extension and `Cache-Control: no-cache`. Neither needs the
//! token.

use crate::extract::Names;
use crate::ApiError;
use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The embedded files: `(name, bytes)`.
const FILES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/ui_files.rs"));

/// `GET /`.
pub async fn index() -> Result<Response, ApiError> {
    serve("index.html")
}

/// `GET /ui/{file}`.
pub async fn file(Names(names): Names) -> Result<Response, ApiError> {
    serve(&names[0])
}

fn serve(name: &str) -> Result<Response, ApiError> {
    let bytes = FILES
        .iter()
        .find(|(file, _)| *file == name)
        .map(|(_, bytes)| *bytes)
        .ok_or_else(|| ApiError::not_found(format!("no file `{name}` in the web UI")))?;
    let headers = [
        (header::CONTENT_TYPE, content_type(name)),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    Ok((headers, bytes).into_response())
}

/// The content type of a file by its extension.
fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("html") => "text/html; charset=utf-8",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        _ => "application/octet-stream",
    }
}
