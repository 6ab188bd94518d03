#![doc = include_str!("../README.md")]
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod clock;
mod condition;
mod driver;
mod engine;
mod error;
mod grown;
pub mod inspect;
mod lease;
pub mod metrics;
mod names;
mod param;
mod reads;
mod step;
mod threads;
mod tries;
mod view;
mod waiting;
mod workflow;

// What this crate's API takes and returns from the crates below it, so that a user of the
// runtime alone needs no other dependency.
pub use apollo11_author::Scope;
pub use apollo11_core::{
    Backoff, Event, EventId, EventKind, ForEach, Idempotency, ItemSource, OnFailure,
    OverrideTarget, ParamKind, ParamSpec, Payload, RetryPolicy, RunId, SecretSource, Seq, StepName,
    StepSpec, Timeout, TriggerRule, Usage, Value, Wait, WorkflowSpec,
};
pub use apollo11_machine::{
    Failure, OperatorAction, OverrideEffect, Refusal, RerunPlan, RunAction, RunState, RunStatus,
    StepState, StepStatus,
};
pub use apollo11_store::{BlobStore, EventStore, LeaseStore, MemStore, SnapshotStore, StoreError};
pub use clock::Clock;
pub use driver::PLACE_REQUESTS_MAX;
pub use engine::{Engine, EngineConfig, RunHandle, Store, OPERATOR_APPEND_TRIES};
pub use error::EngineError;
pub use inspect::Inspector;
pub use lease::{Leasing, LEASE_TTL_MIN};
pub use param::Param;
pub use step::{Cancel, Leftover, Output, Place, Settled, Step, StepContext, StepError};
pub use threads::{tokio_runtime, BLOCKING_THREADS_MAX};
pub use tries::{Try, TryKind};
pub use workflow::{digest, StepBuilder, Workflow, WorkflowBuilder, WorkflowError};
