#![doc = include_str!("../README.md")]
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod event;
mod failure;
mod ids;
pub mod limits;
mod names;
mod notes;
mod payload;
mod spec;
#[cfg(feature = "proptest")]
pub mod strategies;
mod usage;
mod wait;

pub use event::{Event, EventKind, EventRef, KindTag, OverrideTarget};
pub use failure::{fingerprint, fnv1a, normalize, AttemptFailure, FailureClass, BUILTIN_CLASSES};
pub use ids::{EventId, RunId, Seq, StepName};
pub use names::{check_name, disguise, Disguise, NameError, NameKind, NameProblem};
pub use notes::{check_note, check_operator};
pub use payload::{BlobRef, Payload, PayloadRef};
pub use serde_json::Value;
pub use spec::{
    Backoff, ClassPolicy, ClassRetry, ForEach, Idempotency, ItemSource, OnFailure, Origin,
    ParamKind, ParamSpec, RetryPolicy, SecretSource, StepSpec, Timeout, TriggerRule, WorkflowSpec,
    SAME_FAILURE_MAX_DEFAULT,
};
pub use usage::{bytes as bytes_words, Usage};
pub use wait::Wait;
