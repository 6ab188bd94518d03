//! The web UI, served from the binary: every file of the crate's flat `ui/` folder is
//! embedded at build time (`build.rs`). `GET /` is `index.html`; `GET /ui/{file}` the others,
//! with the content type of their extension and `Cache-Control: no-cache`; any other path
//! under `/ui/` is a 404 naming it. Neither needs the token.

use crate::ApiError;
use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use axum::http::{header, Uri};
use axum::response::{IntoResponse, Response};

/// The embedded files: `(name, bytes)`.
const FILES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/ui_files.rs"));

/// `GET /`.
pub async fn index() -> Result<Response, ApiError> {
    serve("index.html")
}

/// `GET /ui/{file}`: the file's name decoded, or the path as asked when it does not decode.
pub async fn file(
    uri: Uri,
    name: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    match name {
        Ok(Path(name)) => serve(&name),
        Err(_) => Err(no_file(uri.path())),
    }
}

fn serve(name: &str) -> Result<Response, ApiError> {
    let bytes = FILES
        .iter()
        .find(|(file, _)| *file == name)
        .map(|(_, bytes)| *bytes)
        .ok_or_else(|| no_file(name))?;
    let headers = [
        (header::CONTENT_TYPE, content_type(name)),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    Ok((headers, bytes).into_response())
}

fn no_file(name: &str) -> ApiError {
    ApiError::NotFound(format!("no file `{}` in the web UI", name.escape_debug()))
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
