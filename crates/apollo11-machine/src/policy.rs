//! Per-step scheduling policy, compiled from a [`WorkflowSpec`] together with its graph.

use apollo11_core::{
    limits, Idempotency, OnFailure, RetryPolicy, Timeout, TriggerRule, Wait, WorkflowSpec,
};
use apollo11_dag::{Dag, DagError, NodeId};
use std::fmt;

/// What `decide` needs to know about one step.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StepPolicy {
    /// How the step is made safe to rerun.
    pub idempotency: Idempotency,
    /// Whether it has a compensation.
    pub has_compensation: bool,
    /// Its retry policy.
    pub retry: RetryPolicy,
    /// Timeout of one attempt, resolved (`auto` already turned into milliseconds).
    pub timeout_ms: Option<u64>,
    /// When the step runs, given how its dependencies ended.
    pub trigger: TriggerRule,
    /// What the step waits for, when it waits instead of running code: its attempt holds
    /// no slot, is never interrupted, and ends by a signal or its timer.
    pub wait: Option<Wait>,
}

/// What `decide` needs to know about a workflow besides its graph. Built only by
/// [`Policy::compile`], so every policy `decide` sees has been checked (a concurrency of 0,
/// for one, would never start a step).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    on_failure: OnFailure,
    max_concurrency: u32,
    steps: Vec<StepPolicy>,
    /// The steps whose trigger rule is not `all_succeeded`, in topological order: the ones
    /// that still run once a step has failed for good.
    handlers: Vec<NodeId>,
}

/// Why a workflow spec cannot be scheduled. Exhaustive: front ends place each error on the
/// line of the file it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyError {
    /// The graph is invalid.
    Dag(DagError),
    /// A step of class `compensate` has no compensation.
    CompensationMissing {
        /// The step.
        step: String,
    },
    /// A step allows zero attempts.
    ZeroAttempts {
        /// The step.
        step: String,
    },
    /// The workflow allows zero concurrent steps.
    ZeroConcurrency,
    /// A step's timeout (or its `auto` fallback) is zero, which would fail every attempt at
    /// once.
    ZeroTimeout {
        /// The step.
        step: String,
    },
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::Dag(e) => e.fmt(f),
            PolicyError::CompensationMissing { step } => write!(
                f,
                "step `{step}` has idempotency class `compensate` but no compensation"
            ),
            PolicyError::ZeroAttempts { step } => {
                write!(
                    f,
                    "step `{step}` has max_attempts = 0; at least 1 is needed"
                )
            }
            PolicyError::ZeroConcurrency => write!(f, "max_concurrency must be at least 1"),
            PolicyError::ZeroTimeout { step } => write!(
                f,
                "step `{step}` has a timeout of 0 ms; a timeout must be at least 1 ms (or none)"
            ),
        }
    }
}

impl std::error::Error for PolicyError {}

impl Policy {
    /// Validates `spec` and builds its graph (node `i` is `spec.steps[i]`) and policy.
    /// `auto_timeout_ms(step, fallback_ms)` resolves `timeout = "auto"` for a step.
    ///
    /// # Errors
    ///
    /// [`PolicyError`] naming the first problem found: the graph's (see `Dag::build`), a
    /// concurrency of 0, then per step in declaration order a `compensate` step without a
    /// compensation, `max_attempts = 0`, a zero timeout.
    pub fn compile(
        spec: &WorkflowSpec,
        auto_timeout_ms: impl Fn(&str, u64) -> u64,
    ) -> Result<(Dag, Policy), PolicyError> {
        let edges: Vec<(&str, Vec<&str>)> = spec
            .steps
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.depends_on.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        let dag = Dag::build(&edges, limits::DAG_NODES_MAX as usize).map_err(PolicyError::Dag)?;
        if spec.max_concurrency == 0 {
            return Err(PolicyError::ZeroConcurrency);
        }
        let mut steps = Vec::with_capacity(spec.steps.len());
        for s in &spec.steps {
            if s.idempotency == Idempotency::Compensate && !s.has_compensation {
                return Err(PolicyError::CompensationMissing {
                    step: s.name.clone(),
                });
            }
            if s.retry.max_attempts == 0 {
                return Err(PolicyError::ZeroAttempts {
                    step: s.name.clone(),
                });
            }
            let timeout_ms = match s.timeout {
                Timeout::Fixed(0) | Timeout::Auto { fallback_ms: 0 } => {
                    return Err(PolicyError::ZeroTimeout {
                        step: s.name.clone(),
                    })
                }
                Timeout::None => None,
                Timeout::Fixed(ms) => Some(ms),
                Timeout::Auto { fallback_ms } => Some(auto_timeout_ms(&s.name, fallback_ms)),
            };
            steps.push(StepPolicy {
                idempotency: s.idempotency,
                has_compensation: s.has_compensation,
                retry: s.retry.clone(),
                timeout_ms,
                trigger: s.trigger,
                wait: s.wait,
            });
        }
        let mut handlers: Vec<NodeId> = dag
            .nodes()
            .filter(|n| steps[n.index()].trigger != TriggerRule::AllSucceeded)
            .collect();
        handlers.sort_by_key(|&n| (dag.rank(n), n));
        let policy = Policy {
            on_failure: spec.on_failure,
            max_concurrency: spec.max_concurrency,
            steps,
            handlers,
        };
        Ok((dag, policy))
    }

    /// Policy of a step of the graph this policy was compiled with.
    ///
    /// # Panics
    ///
    /// When `node` is not a step of that graph.
    pub fn step(&self, node: NodeId) -> &StepPolicy {
        &self.steps[node.index()]
    }

    /// The steps whose trigger rule is `all_done` or `one_failed`, in topological order.
    pub fn handlers(&self) -> &[NodeId] {
        &self.handlers
    }

    /// What to do on a failure with no retry left.
    pub fn on_failure(&self) -> OnFailure {
        self.on_failure
    }

    /// Most steps running at once (at least 1).
    pub fn max_concurrency(&self) -> u32 {
        self.max_concurrency
    }
}
