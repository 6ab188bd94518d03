//! Declaring a workflow in Rust. Validation happens at `build`: a step without an
//! idempotency class, a `compensate` step without a compensation, and every graph error
//! are refused with the step named.

use crate::Step;
use apollo11_core::{
    Idempotency, OnFailure, RetryPolicy, StepSpec, Timeout, TriggerRule, WorkflowSpec,
};
use apollo11_machine::{Policy, PolicyError};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A validated workflow: its spec (what a run pins) and the code of its steps.
#[derive(Clone)]
pub struct Workflow {
    spec: WorkflowSpec,
    steps: BTreeMap<String, Arc<dyn Step>>,
}

/// Why a workflow was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// A step did not declare how it is made safe to rerun.
    #[error(
        "step `{step}` declares no idempotency class (natural, keyed, checkpoint or compensate)"
    )]
    MissingIdempotency {
        /// The step.
        step: String,
    },
    /// The graph or the policies are invalid.
    #[error("{0}")]
    Invalid(PolicyError),
}

/// Builds a [`Workflow`].
pub struct WorkflowBuilder {
    name: String,
    on_failure: OnFailure,
    max_concurrency: u32,
    defaults: (RetryPolicy, Timeout),
    steps: Vec<StepBuilder>,
    attributes: BTreeMap<String, String>,
}

/// One step being declared.
pub struct StepBuilder {
    name: String,
    code: Arc<dyn Step>,
    depends_on: Vec<String>,
    idempotency: Option<Idempotency>,
    retry: Option<RetryPolicy>,
    timeout: Option<Timeout>,
    trigger: TriggerRule,
    attributes: BTreeMap<String, String>,
}

impl StepBuilder {
    /// A step named `name` running `code`.
    pub fn new(name: &str, code: impl Step) -> StepBuilder {
        StepBuilder {
            name: name.to_owned(),
            code: Arc::new(code),
            depends_on: Vec::new(),
            idempotency: None,
            retry: None,
            timeout: None,
            trigger: TriggerRule::AllSucceeded,
            attributes: BTreeMap::new(),
        }
    }

    /// Pins front-end data with the step (a run's definition includes it).
    pub fn attribute(mut self, key: &str, value: &str) -> StepBuilder {
        self.attributes.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Steps that must be done first.
    pub fn depends_on(mut self, steps: &[&str]) -> StepBuilder {
        self.depends_on = steps.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// How the step is made safe to rerun (required).
    pub fn idempotency(mut self, class: Idempotency) -> StepBuilder {
        self.idempotency = Some(class);
        self
    }

    /// Retry policy (else the workflow's default).
    pub fn retry(mut self, retry: RetryPolicy) -> StepBuilder {
        self.retry = Some(retry);
        self
    }

    /// Timeout of one attempt (else the workflow's default).
    pub fn timeout(mut self, timeout: Timeout) -> StepBuilder {
        self.timeout = Some(timeout);
        self
    }

    /// When the step runs, given how its dependencies ended (else `all_succeeded`).
    pub fn trigger(mut self, trigger: TriggerRule) -> StepBuilder {
        self.trigger = trigger;
        self
    }
}

impl Workflow {
    /// Starts declaring a workflow: pause on failure, 8 steps at once, default retries, no
    /// timeout.
    pub fn builder(name: &str) -> WorkflowBuilder {
        WorkflowBuilder {
            name: name.to_owned(),
            on_failure: OnFailure::Pause,
            max_concurrency: 8,
            defaults: (RetryPolicy::default(), Timeout::None),
            steps: Vec::new(),
            attributes: BTreeMap::new(),
        }
    }

    /// The workflow of a definition as it stands, every field kept (parameters, arguments,
    /// trigger rules, conditions, `for_each`, origins): a run's pinned definition, or one
    /// `apollo11_author::instantiate` made. `code` gives each step's code; whether a step
    /// has a compensation is the code's say, as in [`WorkflowBuilder::build`].
    ///
    /// # Errors
    ///
    /// [`WorkflowError::Invalid`] naming the duplicate or unknown step, the cycle or the bad
    /// policy.
    pub fn from_spec(
        mut spec: WorkflowSpec,
        mut code: impl FnMut(&StepSpec) -> Arc<dyn Step>,
    ) -> Result<Workflow, WorkflowError> {
        let mut steps = BTreeMap::new();
        for s in &mut spec.steps {
            let step = code(s);
            s.has_compensation = step.has_compensation();
            steps.insert(s.name.clone(), step);
        }
        Policy::compile(&spec, |_, fallback| fallback).map_err(WorkflowError::Invalid)?;
        Ok(Workflow { spec, steps })
    }

    /// What a run of this workflow pins.
    pub fn spec(&self) -> &WorkflowSpec {
        &self.spec
    }

    /// The code of a step.
    pub fn step(&self, name: &str) -> Option<&Arc<dyn Step>> {
        self.steps.get(name)
    }
}

impl WorkflowBuilder {
    /// What to do when a step fails for good.
    pub fn on_failure(mut self, on_failure: OnFailure) -> WorkflowBuilder {
        self.on_failure = on_failure;
        self
    }

    /// Most steps running at once in one run.
    pub fn max_concurrency(mut self, n: u32) -> WorkflowBuilder {
        self.max_concurrency = n;
        self
    }

    /// Retry policy and timeout of steps that do not set their own.
    pub fn defaults(mut self, retry: RetryPolicy, timeout: Timeout) -> WorkflowBuilder {
        self.defaults = (retry, timeout);
        self
    }

    /// Pins front-end data with the workflow (a run's definition includes it).
    pub fn attribute(mut self, key: &str, value: &str) -> WorkflowBuilder {
        self.attributes.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Adds a step.
    pub fn step(mut self, step: StepBuilder) -> WorkflowBuilder {
        self.steps.push(step);
        self
    }

    /// Validates everything and returns the workflow.
    ///
    /// # Errors
    ///
    /// [`WorkflowError::MissingIdempotency`] naming the step; [`WorkflowError::Invalid`] naming
    /// the duplicate or unknown step, the cycle or the bad policy.
    pub fn build(self) -> Result<Workflow, WorkflowError> {
        let mut specs = Vec::with_capacity(self.steps.len());
        let mut code = BTreeMap::new();
        for s in self.steps {
            let idempotency = s
                .idempotency
                .ok_or_else(|| WorkflowError::MissingIdempotency {
                    step: s.name.clone(),
                })?;
            let has_compensation = s.code.has_compensation();
            specs.push(StepSpec {
                name: s.name.clone(),
                depends_on: s.depends_on,
                idempotency,
                has_compensation,
                retry: s.retry.unwrap_or_else(|| self.defaults.0.clone()),
                timeout: s.timeout.unwrap_or(self.defaults.1),
                trigger: s.trigger,
                attributes: s.attributes,
                ..StepSpec::new(&s.name, &[], idempotency)
            });
            code.insert(s.name, s.code);
        }
        let spec = WorkflowSpec {
            name: self.name,
            on_failure: self.on_failure,
            max_concurrency: self.max_concurrency,
            steps: specs,
            attributes: self.attributes,
            ..WorkflowSpec::new("", self.on_failure, Vec::new())
        };
        Policy::compile(&spec, |_, fallback| fallback).map_err(WorkflowError::Invalid)?;
        Ok(Workflow { spec, steps: code })
    }
}

/// The digest of a definition: the SHA-256 (hex) of its JSON, as a run pins it. Two
/// definitions of one digest have the same schedule, commands and folder.
///
/// # Panics
///
/// Never: a definition always serializes.
pub fn digest(spec: &WorkflowSpec) -> String {
    apollo11_store::sha256_hex(&serde_json::to_vec(spec).expect("a definition serializes"))
}
