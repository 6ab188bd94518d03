//! Validation errors. Each one names what is wrong so a user can fix it without guessing.

use std::fmt;

/// Why a set of steps is not a valid workflow graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DagError {
    /// The workflow has no steps.
    Empty,
    /// More steps than the limit allows.
    TooManyNodes {
        /// Steps given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// Two steps share a name.
    DuplicateStep {
        /// The repeated name.
        step: String,
    },
    /// A step depends on a name that is not a step.
    UnknownDependency {
        /// The step declaring the dependency.
        step: String,
        /// The missing name.
        dependency: String,
    },
    /// The dependencies form a cycle; `path` starts and ends with the same step.
    Cycle {
        /// The steps on the cycle, e.g. `["a", "b", "c", "a"]`.
        path: Vec<String>,
    },
}

impl fmt::Display for DagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DagError::Empty => write!(f, "the workflow has no steps"),
            DagError::TooManyNodes { count, max } => {
                write!(
                    f,
                    "the workflow has {count} steps, more than the limit of {max}"
                )
            }
            DagError::DuplicateStep { step } => write!(f, "step `{step}` is defined twice"),
            DagError::UnknownDependency { step, dependency } => {
                write!(
                    f,
                    "step `{step}` depends on `{dependency}`, which is not a step"
                )
            }
            DagError::Cycle { path } => write!(f, "dependency cycle: {}", path.join(" -> ")),
        }
    }
}

impl std::error::Error for DagError {}
