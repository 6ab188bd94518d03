//! Integration tests of the runtime, on the in-memory store with tokio's paused clock.

mod engine;
mod flaky;
mod payloads;
mod scripted;
mod wide;
