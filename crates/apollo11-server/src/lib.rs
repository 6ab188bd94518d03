//! `apollo11 serve`: the engine on a data dir behind the JSON API of `docs/http-api.md`, a
//! live stream of each run's events, and the web UI's files (`apollo11-client` is the API's
//! client).
//!
//! The server owns the engine and the data dir's writer lock (whose file records the
//! server's address), starts runs of the workflows of its `--workflows` folder, drives the
//! runs it starts, resumes and acts on, and resumes at start the runs a crash left
//! interrupted.

mod actions;
mod auth;
mod conns;
mod drive;
mod error;
mod extract;
mod fanout;
mod firing;
mod gc;
mod guard;
mod idempotent;
mod logs;
mod meta;
pub mod metrics;
mod query;
mod router;
mod runs;
mod server;
mod signal;
mod stream;
mod ui;
mod workers;
mod workflows;

pub use conns::{
    fd_reserve, ConnLimits, DEFAULT_BACKLOG, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};
pub use error::ApiError;
pub use extract::{BODY_BYTES_MAX, START_BODY_BYTES_MAX};
pub use gc::GcSchedule;
pub use logs::LOG_BYTES_MAX;
pub use router::{routes, Route};
pub use server::{ServeError, Server, ServerConfig, DEFAULT_LISTEN};
pub use stream::KEEP_ALIVE;
pub use workers::TAKE_WAIT_MAX;

/// The OpenAPI 3.1 document of the API, served at `/api/v1/openapi.json`.
pub const OPENAPI: &str = include_str!("openapi.json");
