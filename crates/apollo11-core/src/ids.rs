//! Identifier newtypes. They exist so a run id is never passed where a step name is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Position of an event in a store: assigned by the store, strictly increasing.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct EventId(pub u64);

/// Per-run sequence number: 1 for `RunCreated`, then 2, 3, … without gaps.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Seq(pub u32);

/// A workflow instance.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(pub String);

/// The name of a step, unique within a workflow.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StepName(pub String);

macro_rules! display_inner {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    )*};
}
display_inner!(EventId, Seq, RunId, StepName);

impl From<&str> for RunId {
    fn from(s: &str) -> Self {
        RunId(s.to_owned())
    }
}

impl From<&str> for StepName {
    fn from(s: &str) -> Self {
        StepName(s.to_owned())
    }
}

impl RunId {
    /// The run id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl StepName {
    /// The step name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Seq {
    /// The sequence number that follows this one.
    pub fn next(self) -> Seq {
        Seq(self.0 + 1)
    }
}

// Ordering and hashing of the newtypes are those of the inner string, so maps keyed by them
// can be queried with a plain `&str`.
impl std::borrow::Borrow<str> for StepName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for RunId {
    fn borrow(&self) -> &str {
        &self.0
    }
}
