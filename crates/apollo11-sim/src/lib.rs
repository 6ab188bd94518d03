//! Deterministic simulation of the production engine: `Engine` on `FileLog` (deterministic
//! mode, on `SimFs`) or on `MemStore`, one current-thread tokio runtime with a paused clock,
//! steps whose every attempt and compensation a seed decides, operator actions, power loss
//! at a sync, sync errors and kills, then reopen, resume and the invariants of
//! docs/reliability.md. The same seed gives the same event log byte for byte. The same
//! harness also plays a seed on PostgreSQL under leases ([`Postgres`]), on real time: the
//! seed decides the scenario, the steps and the operator, not the timing.
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod check;
mod fleet;
mod postgres;
mod remote;
mod rng;
mod scenario;
mod shrink;
mod steps;
mod store;
mod world;

pub use postgres::{Postgres, LEASE_TTL};
pub use scenario::{
    Action, Behaviour, Crash, Remote, Scenario, Size, StepPlan, Takeover, Timed, TimedFault,
    WorkerFault,
};
pub use shrink::shrink;
pub use store::{Ack, Acks, Medium, Memory, Recorded, SimDisk};
pub use world::{line, play, Failure, Outcome, HORIZON_MS, REAL_HORIZON_MS};

/// Plays `scenario` on `medium` on a fresh current-thread runtime whose clock is simulated
/// (or real, with sockets, when the medium says so: [`Medium::SIMULATED_TIME`]).
///
/// # Errors
///
/// The first invariant violated.
///
/// # Panics
///
/// When the runtime cannot be built (no timer or no IO driver: a bug).
pub fn simulate<M: Medium>(scenario: &Scenario, medium: &mut M) -> Result<Outcome, Failure> {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    if M::SIMULATED_TIME {
        builder.enable_time().start_paused(true);
    } else {
        builder.enable_all();
    }
    let runtime = builder.build().expect("a current-thread runtime builds");
    runtime.block_on(play(scenario, medium))
}
