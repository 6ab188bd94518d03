//! The write path: appends queued (`queue.rs`) for the single writer (`writer.rs`, group
//! commit), which runs on its thread (`pipeline.rs`) beside the sync thread (`syncer.rs`), or
//! inline in deterministic mode. Its failures are [`WriteError`]s (`error.rs`): the first one
//! poisons the store, and every later call reports it as the cause.

mod error;
pub(crate) mod pipeline;
pub(crate) mod queue;
mod sealing;
pub(crate) mod syncer;
pub(crate) mod writer;

pub use error::WriteError;
