#![doc = include_str!("../README.md")]
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod actions;
mod backoff;
mod decide;
mod frontier;
mod history;
mod interrupt;
mod overrides;
mod policy;
mod rerun;
mod retry;
mod rollback;
mod run_machine;
mod state;
mod status;
#[cfg(feature = "proptest")]
pub mod strategies;
mod table;
mod trigger;
mod wait;

pub use actions::{allowed_actions, check_action, Refusal, RunAction};
pub use backoff::retry_delay_ms;
pub use decide::{decide, Command, FailReason, Now};
use frontier::Frontier;
pub use history::History;
pub use interrupt::{interruptions_reason, INTERRUPTIONS_MAX};
pub use overrides::{check_override, OverrideEffect};
pub use policy::{Policy, PolicyError, StepPolicy};
pub use rerun::{check_rerun, RerunPlan};
pub use retry::{
    compensation_delay_ms, compensation_note_for, delay_ms, memory_limit, note_for, stop_reason,
};
pub use rollback::{pause_cause, run_status, PauseCause, RunStatus};
pub use run_machine::RunMachine;
pub use state::{
    fold, Anomaly, AnomalySite, Expansion, Failure, OperatorAction, Place, RunState, StepState,
};
pub use status::StepStatus;
pub use table::{transition, Rule, Transition};
pub use wait::check_signal;

// What this crate's API takes and returns from the crates below it, so that a user of the
// machine alone needs no other dependency.
pub use apollo11_core::{
    AttemptFailure, Backoff, ClassRetry, Event, EventId, EventKind, EventRef, FailureClass,
    Idempotency, KindTag, OnFailure, OverrideTarget, Payload, RetryPolicy, RunId, Seq, StepName,
    StepSpec, Timeout, Usage, Wait, WorkflowSpec,
};
pub use apollo11_dag::{Dag, DagError, NodeId};
