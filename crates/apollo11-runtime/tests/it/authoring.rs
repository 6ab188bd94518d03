//! What an attempt sees of the run: parameters, secrets, its dependencies' outputs, its
//! item; and what a definition with parameters pins.

use crate::scripted::{kinds, open};
use apollo11_core::{EventKind, Payload};
use apollo11_runtime::{
    EngineError, Idempotency, ItemSource, Output, Param, ParamKind, RetryPolicy, RunId, RunStatus,
    SecretSource, Step, StepBuilder, StepContext, StepError, Value, Workflow, WorkflowBuilder,
    WorkflowError,
};
use apollo11_store::{EventStore, MemStore};
use async_trait::async_trait;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

/// An attempt as a function of its context.
pub type Attempt = fn(&StepContext) -> Result<Output, StepError>;

/// A step whose attempt is a function of its context.
pub struct Func(pub Attempt);

#[async_trait]
impl Step for Func {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        (self.0)(ctx)
    }
}

/// A natural step running `f`.
pub fn step(name: &str, f: Attempt) -> StepBuilder {
    StepBuilder::new(name, Func(f))
        .idempotency(Idempotency::Natural)
        .retry(RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        })
}

/// Outputs the JSON text of `value`.
pub fn json_out(value: &Value) -> Result<Output, StepError> {
    Ok(Output::text(value.to_string()))
}

/// Starts `workflow` with `arguments` as run `run` and waits for its end.
pub async fn run_to_end(
    store: &Arc<MemStore>,
    workflow: &Workflow,
    arguments: Value,
    run: &str,
) -> Result<RunStatus, EngineError> {
    let engine = open(store).await;
    let arguments: BTreeMap<String, Value> = serde_json::from_value(arguments).unwrap();
    let workflow = workflow.instantiate(&arguments)?;
    engine
        .start(&workflow, RunId::from(run))
        .await?
        .outcome()
        .await
}

/// The output a step recorded, as JSON.
pub async fn output(store: &Arc<MemStore>, run: &str, step: &str) -> Value {
    let engine = open(store).await;
    match engine.step_payload(&RunId::from(run), step).await.unwrap() {
        Payload::Inline(bytes) => serde_json::from_slice(&bytes).unwrap(),
        other => panic!("step `{step}` recorded {other:?}"),
    }
}

fn seen(ctx: &StepContext) -> Result<Output, StepError> {
    let input = ctx
        .input("make")
        .map(|b| String::from_utf8_lossy(b).into_owned());
    let scope = ctx.scope();
    json_out(&json!({
        "rows": ctx.param("rows"),
        "date": ctx.param("date"),
        "token": ctx.param("token"),
        "secret": scope.secrets.get("token"),
        "input": input,
        "status": scope.statuses.get("make"),
        "item": ctx.item(),
        "run": scope.run_id,
        "debug_shows_secret": format!("{ctx:?}").contains("s3cr3t"),
    }))
}

fn declared(token: SecretSource) -> WorkflowBuilder {
    Workflow::builder("ctx")
        .param(Param::new("rows", ParamKind::Integer).default(json!(5)))
        .param(Param::new("date", ParamKind::String).required())
        .param(Param::new("token", ParamKind::String).secret(token))
        .step(step("make", |_| json_out(&json!({"n": 1}))))
        .step(step("use", seen).depends_on(&["make"]))
}

#[tokio::test(start_paused = true)]
async fn an_attempt_sees_arguments_defaults_secrets_and_its_dependencies_output() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, "s3cr3t\n").unwrap();
    let source = SecretSource::File(path.to_str().unwrap().to_owned());
    let workflow = declared(source).build().unwrap();
    let store = Arc::new(MemStore::new());
    let status = run_to_end(&store, &workflow, json!({"date": "2024-05-01"}), "r").await;
    assert_eq!(status.unwrap(), RunStatus::Succeeded);
    let expected = json!({
        "rows": 5, "date": "2024-05-01", "token": null, "secret": "s3cr3t",
        "input": "{\"n\":1}", "status": "succeeded", "item": null, "run": "r",
        "debug_shows_secret": false,
    });
    assert_eq!(output(&store, "r", "use").await, expected);
    let engine = open(&store).await;
    let pinned = engine.state(&RunId::from("r")).await.unwrap();
    let definition = match pinned.definition {
        Payload::Inline(bytes) => String::from_utf8(bytes).unwrap(),
        other => panic!("{other:?}"),
    };
    assert!(definition.contains("2024-05-01") && !definition.contains("s3cr3t"));
}

#[tokio::test(start_paused = true)]
async fn a_missing_secret_fails_the_attempt_for_good_naming_where_it_was_looked_for() {
    let var = "APOLLO11_TEST_SECRET_THAT_IS_NEVER_SET";
    let workflow = declared(SecretSource::Env(var.into())).build().unwrap();
    let store = Arc::new(MemStore::new());
    let status = run_to_end(&store, &workflow, json!({"date": "d"}), "r").await;
    assert_eq!(status.unwrap(), RunStatus::Paused);
    let events = store
        .read_run(&RunId::from("r"), apollo11_core::Seq(1))
        .await;
    let failed = (events.unwrap().into_iter())
        .find_map(|e| e.kind.failure().map(|f| (f.error.clone(), f.retryable)))
        .unwrap();
    assert_eq!(
        failed,
        (
            format!("the secret parameter `token` has no value: the environment variable `{var}` is not set"),
            false
        )
    );
}

#[tokio::test(start_paused = true)]
async fn an_invalid_argument_set_creates_no_run() {
    let workflow = declared(SecretSource::Env("X".into())).build().unwrap();
    let store = Arc::new(MemStore::new());
    for arguments in [
        json!({}),
        json!({"date": 3}),
        json!({"date": "d", "other": 1}),
    ] {
        let status = run_to_end(&store, &workflow, arguments.clone(), "r").await;
        assert!(
            matches!(status, Err(EngineError::Workflow(WorkflowError::Author(_)))),
            "{arguments}: {status:?}"
        );
    }
    // A declared workflow started as it is takes its defaults: `date` has none.
    let engine = open(&store).await;
    let started = engine.start(&Arc::new(workflow), RunId::from("r")).await;
    assert!(matches!(started, Err(EngineError::Workflow(_))));
    assert!(kinds(&store, "r", "make").await.is_empty());
    assert_eq!(engine.runs_held().await.unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_run_resumes_with_its_declared_workflow_or_the_pinned_one() {
    let workflow = Workflow::builder("fan")
        .param(Param::new("hosts", ParamKind::List).default(json!(["a", "b"])))
        .step(
            step("up", |ctx| json_out(ctx.item().unwrap()))
                .for_each(ItemSource::Param("hosts".into())),
        )
        .build()
        .unwrap();
    let store = Arc::new(MemStore::new());
    let engine = open(&store).await;
    let pinned = workflow.instantiate(&BTreeMap::new()).unwrap();
    let run = RunId::from("r");
    let handle = engine.start(&pinned, run.clone()).await.unwrap();
    handle.abort();
    let _ = handle.outcome().await;
    let engine = open(&store).await;
    let resumed = engine
        .resume(&Arc::new(workflow.clone()), run.clone())
        .await;
    assert_eq!(
        resumed.unwrap().outcome().await.unwrap(),
        RunStatus::Succeeded
    );
    assert_eq!(output(&store, "r", "up[b]").await, json!("b"));
    let engine = open(&store).await;
    let again = engine.resume(&pinned, run.clone()).await.unwrap();
    assert_eq!(again.outcome().await.unwrap(), RunStatus::Succeeded);
    let other = workflow.instantiate(&BTreeMap::from([("hosts".to_owned(), json!(["c"]))]));
    let refused = engine.resume(&other.unwrap(), run).await;
    assert!(matches!(
        refused,
        Err(EngineError::DefinitionChanged { .. })
    ));
}

/// The events of step `name` of run `r`.
async fn step_events(store: &MemStore, name: &str) -> Vec<(EventKind, u32)> {
    let events = store
        .read_run(&RunId::from("r"), apollo11_core::Seq(1))
        .await;
    (events.unwrap().into_iter())
        .filter(|e| e.step.as_ref().is_some_and(|s| s.as_str() == name))
        .map(|e| (e.kind, e.attempt))
        .collect()
}

fn conditional(condition: &str) -> Workflow {
    conditional_builder(condition).build().unwrap()
}

fn conditional_builder(condition: &str) -> WorkflowBuilder {
    Workflow::builder("when")
        .param(Param::new("full", ParamKind::Boolean).default(json!(false)))
        .param(Param::new("hosts", ParamKind::List).default(json!(["a", "b"])))
        .step(step("make", |_| json_out(&json!({"n": 2}))))
        .step(
            step("full", |_| json_out(&json!("ran")))
                .depends_on(&["make"])
                .condition(condition),
        )
        .step(
            step("up", |ctx| json_out(ctx.item().unwrap()))
                .for_each(ItemSource::Param("hosts".into()))
                .condition("item != \"b\""),
        )
        .step(
            step("after", |ctx| json_out(&json!(ctx.input("full").is_some())))
                .depends_on(&["full"]),
        )
}

#[tokio::test(start_paused = true)]
async fn a_false_condition_skips_the_step_naming_it_and_its_dependents_go_on() {
    let store = Arc::new(MemStore::new());
    let status = run_to_end(&store, &conditional("params.full == true"), json!({}), "r").await;
    assert_eq!(status.unwrap(), RunStatus::Succeeded);
    let reason = "condition `params.full == true` is false".to_owned();
    assert_eq!(
        step_events(&store, "full").await,
        [(EventKind::Skipped { reason }, 0)]
    );
    assert_eq!(output(&store, "r", "after").await, json!(false));
    assert_eq!(kinds(&store, "r", "up[a]").await, ["started", "succeeded"]);
    assert_eq!(kinds(&store, "r", "up[b]").await, ["skipped"]);
    let store = Arc::new(MemStore::new());
    let holds = conditional("params.full && steps.make.output.n > 1");
    let status = run_to_end(&store, &holds, json!({"full": true}), "r").await;
    assert_eq!(status.unwrap(), RunStatus::Succeeded);
    assert_eq!(output(&store, "r", "after").await, json!(true));
}

#[tokio::test(start_paused = true)]
async fn a_condition_that_cannot_be_evaluated_fails_the_step_for_good() {
    let store = Arc::new(MemStore::new());
    let status = run_to_end(
        &store,
        &conditional("steps.make.output.n == \"yes\""),
        json!({}),
        "r",
    )
    .await;
    assert_eq!(status.unwrap(), RunStatus::Paused);
    let events = step_events(&store, "full").await;
    assert_eq!(events[0], (EventKind::Started, 1));
    let Some(failed) = events[1].0.failure() else {
        panic!("{events:?}");
    };
    let (error, retryable) = (&failed.error, failed.retryable);
    assert!(!retryable);
    assert!(
        error.starts_with("the condition `steps.make.output.n == \"yes\"` of step `full` compares"),
        "{error}"
    );
    let Err(refused) = conditional_builder("params.full == \"yes\"").build() else {
        panic!("a condition comparing a boolean parameter with a string is built");
    };
    assert!(
        refused
            .to_string()
            .contains("condition compares boolean with string (`==`)"),
        "the types of parameters are known before the run: {refused}"
    );
}

/// The names of the outputs an attempt was handed, as its output.
fn outputs_seen(ctx: &StepContext) -> Result<Output, StepError> {
    json_out(&json!(ctx.scope().outputs.keys().collect::<Vec<_>>()))
}

#[tokio::test(start_paused = true)]
async fn a_step_reads_what_it_depends_on_and_what_it_names_upstream_and_nothing_else() {
    let workflow = Workflow::builder("chain")
        .step(step("a", |_| Ok(Output::text("a"))))
        .step(step("b", |_| Ok(Output::text("b"))).depends_on(&["a"]))
        .step(step("c", outputs_seen).depends_on(&["b"]))
        .step(
            step("d", outputs_seen)
                .depends_on(&["c"])
                .attribute("run", "echo ${steps.a.output}"),
        )
        .build()
        .unwrap();
    let store = Arc::new(MemStore::new());
    let status = run_to_end(&store, &workflow, json!({}), "r").await;
    assert_eq!(status.unwrap(), RunStatus::Succeeded);
    assert_eq!(
        output(&store, "r", "c").await,
        json!(["b"]),
        "c depends on b alone and names no other step"
    );
    assert_eq!(
        output(&store, "r", "d").await,
        json!(["a", "c"]),
        "d depends on c, and its text names a, however far upstream"
    );
}
