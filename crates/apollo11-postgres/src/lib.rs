#![doc = include_str!("../README.md")]
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod binds;
mod commit;
mod error;
mod feed;
mod lease;
pub mod metrics;
mod plan;
mod read;
mod rows;
mod schema;
#[cfg(feature = "testing")]
mod scratch;
mod sql;
mod store;
mod tls;
mod writer;

pub use schema::VERSION as SCHEMA_VERSION;
#[cfg(feature = "testing")]
pub use scratch::{terminate_sessions, test_url, REQUIRE_VAR, TEST_URL_VAR};
pub use store::{PgOptions, PgStore, DEFAULT_SCHEMA};
pub use writer::BATCH_EVENTS_MAX;
