#![doc = include_str!("../README.md")]

mod clock;
mod driver;
mod engine;
mod error;
pub mod metrics;
mod step;
mod view;
mod workflow;

pub use apollo11_core::{
    Backoff, Idempotency, OnFailure, OverrideTarget, RetryPolicy, RunId, Timeout,
};
pub use apollo11_machine::{Refusal, RunAction, RunStatus};
pub use clock::Clock;
pub use engine::{Engine, EngineConfig, RunHandle, Store};
pub use error::EngineError;
pub use step::{Cancel, Output, Step, StepContext, StepError};
pub use workflow::{StepBuilder, Workflow, WorkflowBuilder, WorkflowError};
