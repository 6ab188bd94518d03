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
            DagError::Cycle { path } => write_cycle(f, path),
        }
    }
}

impl std::error::Error for DagError {}

/// A cycle longer than this many steps is shown by its first and last
/// [`CYCLE_ENDS_SHOWN`] steps and its length: a message names culprits, it does not list a
/// 10,000-step cycle on one line.
const CYCLE_STEPS_SHOWN_MAX: usize = 12;

/// Steps shown at each end of a long cycle.
const CYCLE_ENDS_SHOWN: usize = 5;

/// `a -> b -> a`, or for a long cycle `s0 -> … -> s4 -> … (9,990 more) … -> s9999 -> s0`,
/// ending where it started as the path does.
fn write_cycle(f: &mut fmt::Formatter<'_>, path: &[String]) -> fmt::Result {
    let steps = path.len().saturating_sub(1);
    if steps <= CYCLE_STEPS_SHOWN_MAX {
        return write!(f, "dependency cycle: {}", path.join(" -> "));
    }
    let head = path[..CYCLE_ENDS_SHOWN].join(" -> ");
    let tail = path[path.len() - CYCLE_ENDS_SHOWN - 1..].join(" -> ");
    let hidden = steps - 2 * CYCLE_ENDS_SHOWN;
    write!(
        f,
        "dependency cycle of {steps} steps: {head} -> … ({hidden} more) … -> {tail}"
    )
}
