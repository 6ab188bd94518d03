//! Deterministic simulation of the production engine: `Engine` on `FileLog` (deterministic
//! mode, on `SimFs`) or on `MemStore`, one current-thread tokio runtime with a paused clock,
//! steps whose every attempt and compensation a seed decides, operator actions, power loss
//! at a sync, sync errors and kills, then reopen, resume and the invariants of
//! docs/reliability.md. The same seed gives the same event log byte for byte.
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod check;
mod rng;
mod scenario;
mod shrink;
mod steps;
mod store;
mod world;

pub use scenario::{Action, Behaviour, Crash, Scenario, Size, StepPlan, Timed};
pub use shrink::shrink;
pub use store::{Medium, Memory, SimDisk};
pub use world::{line, play, Failure, Outcome, HORIZON_MS};

/// Plays `scenario` on `medium` on a fresh current-thread runtime whose clock is simulated.
///
/// # Errors
///
/// The first invariant violated.
///
/// # Panics
///
/// When the runtime cannot be built (no timer: a bug).
pub fn simulate<M: Medium>(scenario: &Scenario, medium: &mut M) -> Result<Outcome, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds");
    runtime.block_on(play(scenario, medium))
}
