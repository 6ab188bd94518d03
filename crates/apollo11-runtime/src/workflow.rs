//! Declaring a workflow in Rust. Validation happens at `build`: a step without an
//! idempotency class, a `compensate` step without a compensation, every graph error, and
//! every parameter, `for_each` and condition error are refused with the step named.
//! [`Workflow::instantiate`] makes the definition a run pins from the run's arguments.

use crate::waiting::Waiting;
use crate::Step;
use apollo11_author::AuthorError;
use apollo11_core::{
    ForEach, Idempotency, ItemSource, OnFailure, ParamSpec, RetryPolicy, StepSpec, Timeout,
    TriggerRule, Value, Wait, WorkflowSpec,
};
use apollo11_machine::{Policy, PolicyError};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A validated workflow: its spec and the code of its steps. As built, its spec is
/// *declared* (parameters, `for_each` declarations); [`Workflow::instantiate`] gives the
/// one a run pins (arguments bound, each `for_each` over a list known at start made into
/// its steps, each running its declaration's code).
#[derive(Clone)]
pub struct Workflow {
    spec: WorkflowSpec,
    steps: BTreeMap<String, Arc<dyn Step>>,
}

/// Why a workflow was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
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
    /// A parameter, a `for_each`, a condition, or the arguments a run was given.
    #[error("{0}")]
    Author(AuthorError),
    /// A step sets how its items go (`waves`, `gate`, `key`) but declares no `for_each`.
    #[error("step `{step}` sets `{setting}` but has no for_each")]
    NotForEach {
        /// The step.
        step: String,
        /// The setting.
        setting: &'static str,
    },
}

/// Builds a [`Workflow`].
pub struct WorkflowBuilder {
    name: String,
    on_failure: OnFailure,
    max_concurrency: u32,
    defaults: (RetryPolicy, Timeout),
    steps: Vec<StepBuilder>,
    attributes: BTreeMap<String, String>,
    params: Vec<ParamSpec>,
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
    condition: Option<String>,
    for_each: Option<ItemSource>,
    /// `wave_size`, `gate` and `key` of the `for_each`.
    items: (Option<u32>, Option<String>, Option<String>),
    wait: Option<Wait>,
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
            condition: None,
            for_each: None,
            items: (None, None, None),
            wait: None,
        }
    }

    /// A step named `name` that runs no code and waits for `wait`: a signal (its payload is
    /// the step's output) or a timer. It holds no concurrency slot while it waits, and its
    /// [`timeout`](StepBuilder::timeout) is its deadline (past it, the attempt fails with
    /// class `timeout`). Its idempotency class is `natural`.
    pub fn waiting(name: &str, wait: Wait) -> StepBuilder {
        StepBuilder {
            wait: Some(wait),
            ..StepBuilder::new(name, Waiting).idempotency(Idempotency::Natural)
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

    /// When the step runs, given how its dependencies ended (else `all_succeeded`): a
    /// `one_failed` step is a handler that runs when a dependency failed for good (and is
    /// skipped when none did), an `all_done` one runs whatever they did.
    ///
    /// ```
    /// # use apollo11_runtime::*;
    /// # use std::sync::Arc;
    /// # struct Load(bool);
    /// # #[async_trait::async_trait]
    /// # impl Step for Load {
    /// #     async fn run(&self, _: &StepContext) -> Result<Output, StepError> {
    /// #         if self.0 { Err(StepError::fatal("disk full")) } else { Ok(Output::empty()) }
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let workflow = Workflow::builder("load")
    ///     .step(StepBuilder::new("load", Load(true)).idempotency(Idempotency::Natural))
    ///     .step(StepBuilder::new("alert", Load(false))
    ///         .idempotency(Idempotency::Natural)
    ///         .depends_on(&["load"])
    ///         .trigger(TriggerRule::OneFailed))
    ///     .build()?;
    /// let engine = Engine::open(Arc::new(MemStore::new()), EngineConfig::default()).await?;
    /// let run = engine.start(&Arc::new(workflow), RunId::from("r")).await?;
    /// assert_eq!(run.outcome().await?, RunStatus::Paused, "load failed for good");
    /// let state = engine.state(&RunId::from("r")).await?;
    /// assert_eq!(state.step("alert").status, StepStatus::Succeeded, "the handler ran");
    /// # Ok(())
    /// # }
    /// ```
    pub fn trigger(mut self, trigger: TriggerRule) -> StepBuilder {
        self.trigger = trigger;
        self
    }

    /// Runs the step only when `expression` holds (an `evalexpr` expression over
    /// `params.x`, `steps.s.output`, `steps.s.output.field`, `steps.s.status`, `item`,
    /// `item.f`), evaluated when the step is about to start; when it is false the step is
    /// skipped, with the expression in the reason, and its dependents go on as after a
    /// success. An expression that cannot be evaluated (two types compared) fails the step
    /// for good.
    ///
    /// ```
    /// # use apollo11_runtime::*;
    /// # use std::sync::Arc;
    /// # struct Copy;
    /// # #[async_trait::async_trait]
    /// # impl Step for Copy {
    /// #     async fn run(&self, _: &StepContext) -> Result<Output, StepError> {
    /// #         Ok(Output::text(r#"{"rows": 0}"#))
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let workflow = Workflow::builder("copy")
    ///     .step(StepBuilder::new("copy", Copy).idempotency(Idempotency::Natural))
    ///     .step(StepBuilder::new("index", Copy)
    ///         .idempotency(Idempotency::Natural)
    ///         .depends_on(&["copy"])
    ///         .condition("steps.copy.output.rows > 0"))
    ///     .build()?;
    /// let engine = Engine::open(Arc::new(MemStore::new()), EngineConfig::default()).await?;
    /// let run = engine.start(&Arc::new(workflow), RunId::from("r")).await?;
    /// assert_eq!(run.outcome().await?, RunStatus::Succeeded);
    /// let state = engine.state(&RunId::from("r")).await?;
    /// assert_eq!(state.step("index").status, StepStatus::Skipped);
    /// # Ok(())
    /// # }
    /// ```
    pub fn condition(mut self, expression: &str) -> StepBuilder {
        self.condition = Some(expression.to_owned());
        self
    }

    /// Makes the step one step per item of `items` (`NAME[KEY]`, each with its
    /// [`StepContext::item`](crate::StepContext::item), all running this code): a list
    /// written here or a list parameter, expanded when a run starts, or a list in the output
    /// of a step it depends on, expanded when that step has succeeded (the run records the
    /// items, and the steps that depended on this one depend on all of its items).
    ///
    /// ```
    /// # use apollo11_runtime::*;
    /// # use std::sync::Arc;
    /// # struct Discover;
    /// # #[async_trait::async_trait]
    /// # impl Step for Discover {
    /// #     async fn run(&self, _: &StepContext) -> Result<Output, StepError> {
    /// #         Ok(Output::text(r#"{"regions": ["eu", "us"]}"#))
    /// #     }
    /// # }
    /// /// Deploys to the region of its item.
    /// struct Deploy;
    /// #[async_trait::async_trait]
    /// impl Step for Deploy {
    ///     async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
    ///         Ok(Output::text(format!("deployed to {}", ctx.item().unwrap())))
    ///     }
    /// }
    /// /// Reports what each deployment said.
    /// struct Report;
    /// #[async_trait::async_trait]
    /// impl Step for Report {
    ///     async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
    ///         let eu = ctx.input("deploy[eu]").unwrap_or_default();
    ///         assert_eq!(eu, br#"deployed to "eu""#);
    ///         Ok(Output::empty())
    ///     }
    /// }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let regions = ItemSource::Output { step: "discover".into(), path: "regions".into() };
    /// let workflow = Workflow::builder("deploy")
    ///     .step(StepBuilder::new("discover", Discover).idempotency(Idempotency::Natural))
    ///     .step(StepBuilder::new("deploy", Deploy)
    ///         .idempotency(Idempotency::Natural)
    ///         .depends_on(&["discover"])
    ///         .for_each(regions))
    ///     .step(StepBuilder::new("report", Report)
    ///         .idempotency(Idempotency::Natural)
    ///         .depends_on(&["deploy"]))
    ///     .build()?;
    /// let engine = Engine::open(Arc::new(MemStore::new()), EngineConfig::default()).await?;
    /// let run = engine.start(&Arc::new(workflow), RunId::from("r")).await?;
    /// assert_eq!(run.outcome().await?, RunStatus::Succeeded);
    /// let state = engine.state(&RunId::from("r")).await?;
    /// assert_eq!(state.step("deploy[us]").status, StepStatus::Succeeded);
    /// # Ok(())
    /// # }
    /// ```
    pub fn for_each(mut self, items: ItemSource) -> StepBuilder {
        self.for_each = Some(items);
        self
    }

    /// Runs the items of its `for_each` in waves of `size`: a wave's steps start once the
    /// previous wave's are done. With [`StepBuilder::gate`] and [`StepBuilder::key`]:
    ///
    /// ```
    /// # use apollo11_runtime::*;
    /// # struct Nop;
    /// # #[async_trait::async_trait]
    /// # impl Step for Nop {
    /// #     async fn run(&self, _: &StepContext) -> Result<Output, StepError> {
    /// #         Ok(Output::empty())
    /// #     }
    /// # }
    /// let hosts = serde_json::json!([{"name": "h1"}, {"name": "h2"}, {"name": "h3"}]);
    /// let workflow = Workflow::builder("upgrade")
    ///     .param(Param::new("hosts", ParamKind::List).default(hosts))
    ///     .step(StepBuilder::new("upgrade", Nop)
    ///         .idempotency(Idempotency::Natural)
    ///         .for_each(ItemSource::Param("hosts".into()))
    ///         .key("name")
    ///         .waves(2)
    ///         .gate("health"))
    ///     .step(StepBuilder::new("health", Nop)
    ///         .idempotency(Idempotency::Natural)
    ///         .depends_on(&["upgrade"]))
    ///     .build()?;
    /// let run = workflow.instantiate(&Default::default())?;
    /// let step = |name: &str| run.spec().steps.iter().find(|s| s.name == name).unwrap();
    /// assert_eq!(step("health[wave-1]").depends_on, ["upgrade[h1]", "upgrade[h2]"]);
    /// assert_eq!(step("upgrade[h3]").depends_on, ["health[wave-1]"]);
    /// # Ok::<(), WorkflowError>(())
    /// ```
    pub fn waves(mut self, size: u32) -> StepBuilder {
        self.items.0 = Some(size);
        self
    }

    /// Runs the step `gate` (declared in the workflow) once after each wave of its
    /// `for_each`; its failure stops the following waves.
    pub fn gate(mut self, gate: &str) -> StepBuilder {
        self.items.1 = Some(gate.to_owned());
        self
    }

    /// Names each item's step by the field `field` of the item (a JSON object), instead of
    /// by the item itself or its position.
    pub fn key(mut self, field: &str) -> StepBuilder {
        self.items.2 = Some(field.to_owned());
        self
    }

    /// The `for_each` declared, if any; refuses `waves`, `gate` or `key` without one.
    fn for_each_spec(&mut self) -> Result<Option<ForEach>, WorkflowError> {
        let (wave_size, gate, key) = std::mem::take(&mut self.items);
        let Some(items) = self.for_each.take() else {
            let set = [
                ("waves", wave_size.is_some()),
                ("gate", gate.is_some()),
                ("key", key.is_some()),
            ];
            return match set.into_iter().find(|(_, set)| *set) {
                Some((setting, _)) => Err(WorkflowError::NotForEach {
                    step: self.name.clone(),
                    setting,
                }),
                None => Ok(None),
            };
        };
        Ok(Some(ForEach {
            items,
            wave_size,
            gate,
            key,
        }))
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
            params: Vec::new(),
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

    /// Its definition: declared as built, or as a run pins it once instantiated.
    pub fn spec(&self) -> &WorkflowSpec {
        &self.spec
    }

    /// The code of a step.
    pub fn step(&self, name: &str) -> Option<&Arc<dyn Step>> {
        self.steps.get(name)
    }

    /// The workflow a run given `arguments` runs: its parameters bound (defaults filled
    /// in, values checked), each `for_each` over a list known now made into one step per
    /// item with its declaration's code, the rest as declared (see
    /// [`apollo11_author::instantiate`]). Idempotent: an instantiated workflow given its own
    /// arguments is itself, so a definition a run pinned may be given again.
    /// [`Engine::start`](crate::Engine::start) pins a workflow instantiated with the
    /// arguments it holds (none for a declared one).
    ///
    /// ```
    /// use apollo11_runtime::*;
    /// use std::collections::BTreeMap;
    ///
    /// struct Upgrade;
    /// #[async_trait::async_trait]
    /// impl Step for Upgrade {
    ///     async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
    ///         Ok(Output::text(format!("upgraded {}", ctx.item().unwrap())))
    ///     }
    /// }
    ///
    /// let declared = Workflow::builder("upgrade")
    ///     .param(Param::new("hosts", ParamKind::List).required())
    ///     .step(StepBuilder::new("upgrade", Upgrade)
    ///         .idempotency(Idempotency::Natural)
    ///         .for_each(ItemSource::Param("hosts".into())))
    ///     .build()?;
    /// let arguments = BTreeMap::from([("hosts".to_owned(), serde_json::json!(["a", "b"]))]);
    /// let run = declared.instantiate(&arguments)?;
    /// let names: Vec<&str> = run.spec().steps.iter().map(|s| s.name.as_str()).collect();
    /// assert_eq!(names, ["upgrade[a]", "upgrade[b]"]);
    /// assert!(declared.instantiate(&BTreeMap::new()).is_err(), "hosts is required");
    /// # Ok::<(), WorkflowError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`WorkflowError::Author`] naming the parameter or the declaration: an unknown, missing
    /// or mistyped argument, a list that is not one or is too long, items that do not
    /// pair; [`WorkflowError::Invalid`] when the expanded graph is over the engine's limits.
    pub fn instantiate(
        &self,
        arguments: &BTreeMap<String, Value>,
    ) -> Result<Arc<Workflow>, WorkflowError> {
        let spec =
            apollo11_author::instantiate(&self.spec, arguments).map_err(WorkflowError::Author)?;
        let steps = (spec.steps.iter())
            .filter_map(|s| {
                let declaration = s.origin.as_ref().map_or(&s.name, |o| &o.declaration);
                let code = self.steps.get(&s.name).or(self.steps.get(declaration))?;
                Some((s.name.clone(), code.clone()))
            })
            .collect();
        Policy::compile(&spec, |_, fallback| fallback).map_err(WorkflowError::Invalid)?;
        Ok(Arc::new(Workflow { spec, steps }))
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

    /// Declares a parameter (see [`Param`](crate::Param)): a run is started with
    /// [`Workflow::instantiate`]`(&arguments)`, and its steps read the values with
    /// [`StepContext::param`](crate::StepContext::param).
    ///
    /// ```
    /// # use apollo11_runtime::*;
    /// # use std::sync::Arc;
    /// /// Greets whom the run was started for.
    /// struct Greet;
    /// #[async_trait::async_trait]
    /// impl Step for Greet {
    ///     async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
    ///         let who = ctx.param("who").and_then(Value::as_str).unwrap_or_default();
    ///         Ok(Output::text(format!("hello, {who}")))
    ///     }
    /// }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let workflow = Workflow::builder("greet")
    ///     .param(Param::new("who", ParamKind::String).default(Value::from("world")))
    ///     .step(StepBuilder::new("greet", Greet).idempotency(Idempotency::Natural))
    ///     .build()?;
    /// let arguments = [("who".to_owned(), Value::from("Ada"))].into();
    /// let engine = Engine::open(Arc::new(MemStore::new()), EngineConfig::default()).await?;
    /// let run = engine.start(&workflow.instantiate(&arguments)?, RunId::from("r")).await?;
    /// assert_eq!(run.outcome().await?, RunStatus::Succeeded);
    /// let output = engine.step_payload(&RunId::from("r"), "greet").await?;
    /// assert_eq!(output, Payload::inline("hello, Ada"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn param(mut self, param: impl Into<ParamSpec>) -> WorkflowBuilder {
        self.params.push(param.into());
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
    /// the duplicate or unknown step, the cycle or the bad policy; [`WorkflowError::Author`]
    /// for a bad parameter default, `for_each`, gate or condition;
    /// [`WorkflowError::NotForEach`].
    pub fn build(self) -> Result<Workflow, WorkflowError> {
        let mut specs = Vec::with_capacity(self.steps.len());
        let mut code = BTreeMap::new();
        for mut s in self.steps {
            let for_each = s.for_each_spec()?;
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
                condition: s.condition,
                for_each,
                wait: s.wait,
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
            params: self.params,
            ..WorkflowSpec::new("", self.on_failure, Vec::new())
        };
        Policy::compile(&spec, |_, fallback| fallback).map_err(WorkflowError::Invalid)?;
        apollo11_author::validate(&spec, &[]).map_err(WorkflowError::Author)?;
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
