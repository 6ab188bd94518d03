//! Integration tests of the runtime, on the in-memory store with tokio's paused clock.

mod archived;
mod authoring;
mod compensation;
mod engine;
mod expand;
mod first_poll;
mod flaky;
mod gc;
mod inspect;
mod interrupted;
mod leases;
mod operator;
mod payloads;
mod placed;
mod plan;
mod scripted;
mod used;
mod waiting;
mod wide;
