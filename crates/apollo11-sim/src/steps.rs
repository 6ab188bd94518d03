//! The scenario's workflow as real steps of the runtime: each records its execution in the
//! ledger before anything else (what the log does not own), then does what its plan says
//! after simulated time.

use crate::remote::{self, Job, Post};
use crate::scenario::{Behaviour, Scenario, StepPlan, WaitPlan};
use apollo11_core::{Backoff, ItemSource, ParamKind, RetryPolicy, Timeout, Value, Wait};
use apollo11_runtime::{
    Leftover, Output, Param, Settled, Step, StepBuilder, StepContext, StepError, Workflow,
};
use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One execution of a step's code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Execution {
    /// The run.
    pub run: String,
    /// The step.
    pub step: String,
    /// The attempt (for a compensation: the attempt it undoes).
    pub attempt: u32,
    /// A try of the compensation rather than the step.
    pub compensation: bool,
}

/// Every execution of every generation, in order.
#[derive(Clone, Default)]
pub struct Ledger(Arc<Mutex<Vec<Execution>>>);

impl Ledger {
    fn record(&self, ctx: &StepContext, compensation: bool) -> usize {
        self.record_execution(Execution {
            run: ctx.run_id.as_str().to_owned(),
            step: ctx.step.as_str().to_owned(),
            attempt: ctx.attempt,
            compensation,
        })
    }

    /// Records `execution`; how many of the same came before it.
    pub fn record_execution(&self, execution: Execution) -> usize {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let earlier = all.iter().filter(|e| **e == execution).count();
        all.push(execution);
        earlier
    }

    /// The executions so far.
    pub fn executions(&self) -> Vec<Execution> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

struct SimStep {
    plan: StepPlan,
    ledger: Ledger,
    /// Where its attempts run when it is placed on workers.
    remote: Option<Post>,
}

impl SimStep {
    /// A success's output: the list of items its plan says, else `STEP#ATTEMPT`.
    fn output(&self, ctx: &StepContext) -> Output {
        match self.plan.list {
            Some(n) => {
                let items: Vec<Value> = (0..n).map(|i| Value::from(format!("i{i}"))).collect();
                Output(Value::Array(items).to_string().into_bytes())
            }
            None => Output::text(format!("{}#{}", ctx.step, ctx.attempt)),
        }
    }
}

#[async_trait]
impl Step for SimStep {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        let behaviour = (self.plan.attempts.get(ctx.attempt as usize - 1).copied())
            .unwrap_or(Behaviour::Succeed(0));
        if let Some(post) = &self.remote {
            let job = Job {
                behaviour,
                output: self.output(ctx).0,
            };
            return remote::dispatch(post, ctx, &job).await;
        }
        self.ledger.record(ctx, false);
        let after = |ms| tokio::time::sleep(Duration::from_millis(ms));
        match behaviour {
            Behaviour::Succeed(ms) | Behaviour::Slow(ms) => {
                after(ms).await;
                Ok(self.output(ctx))
            }
            Behaviour::Retryable(ms) => {
                after(ms).await;
                Err(StepError::retryable("simulated retryable failure"))
            }
            Behaviour::Fatal(ms) => {
                after(ms).await;
                Err(StepError::fatal("simulated fatal failure"))
            }
            Behaviour::Hang => std::future::pending().await,
        }
    }

    async fn compensate(&self, ctx: &StepContext) -> Result<(), StepError> {
        let earlier = self.ledger.record(ctx, true) as u32;
        tokio::time::sleep(Duration::from_millis(5)).await;
        match self.plan.compensation_failures {
            Some(failures) if earlier >= failures => Ok(()),
            _ => Err(StepError::retryable("simulated compensation failure")),
        }
    }

    fn has_compensation(&self) -> bool {
        self.plan.compensation_failures.is_some()
    }

    async fn settle(&self, leftover: &Leftover) -> Settled {
        match &self.remote {
            Some(post) if remote::on_worker(leftover) => remote::settle(post, leftover).await,
            _ => Settled::Stopped {
                marker: None,
                used: None,
            },
        }
    }

    fn can_adopt(&self, leftover: &Leftover) -> bool {
        self.remote.is_some() && remote::on_worker(leftover)
    }

    async fn adopt(&self, ctx: &StepContext, leftover: &Leftover) -> Result<Output, StepError> {
        match &self.remote {
            Some(post) => remote::adopt(post, ctx, leftover).await,
            None => Err(StepError::lost("this step does not run on workers")),
        }
    }
}

/// The scenario's workflow, its steps recording into `ledger`, its placed steps submitted
/// to `post`.
///
/// # Errors
///
/// The workflow's refusal, as text (a generator bug).
pub fn workflow(scenario: &Scenario, ledger: &Ledger, post: &Post) -> Result<Workflow, String> {
    let mut builder = Workflow::builder("sim")
        .on_failure(scenario.on_failure)
        .param(Param::new("on", ParamKind::Boolean).default(Value::Bool(true)));
    for (i, plan) in scenario.steps.iter().enumerate() {
        let depends_on: Vec<&str> = (plan.depends_on.iter())
            .map(|&d| scenario.steps[d].name.as_str())
            .collect();
        let retry = RetryPolicy {
            max_attempts: plan.max_attempts,
            backoff: Backoff::Fixed,
            initial_ms: 20,
            max_ms: 1_000,
            jitter_pct: 20,
            ..RetryPolicy::default()
        };
        let placed = scenario.remote.as_ref().is_some_and(|r| r.placed(i));
        let code = SimStep {
            plan: plan.clone(),
            ledger: ledger.clone(),
            remote: placed.then(|| post.clone()),
        };
        let step = match plan.wait {
            Some(WaitPlan::Signal { .. }) => StepBuilder::waiting(&plan.name, Wait::Signal),
            Some(WaitPlan::Timer { ms }) => StepBuilder::waiting(&plan.name, Wait::After { ms }),
            None => StepBuilder::new(&plan.name, code).idempotency(plan.class),
        };
        let step = step
            .depends_on(&depends_on)
            .retry(retry)
            .timeout(Timeout::Fixed(plan.timeout_ms))
            .trigger(plan.trigger);
        builder = builder.step(authored(scenario, plan, step));
    }
    builder.build().map_err(|e| e.to_string())
}

/// `step` with its plan's condition and `for_each`.
fn authored(scenario: &Scenario, plan: &StepPlan, mut step: StepBuilder) -> StepBuilder {
    if let Some(holds) = plan.when {
        step = step.condition(&format!("params.on == {holds}"));
    }
    if let Some(source) = plan.template {
        step = step.for_each(ItemSource::Output {
            step: scenario.steps[source].name.clone(),
            path: String::new(),
        });
    }
    step
}
