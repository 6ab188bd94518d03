//! The peer baseline: Apollo-11's scheduler workloads on duroxide with its SQLite provider on
//! a file, no-op activities, the fastest poll setting. Prints one JSON line of figures.
//!
//! `apollo11-peer-duroxide DB_FILE (chain STEPS | wide STEPS | many RUNS STEPS)`

use duroxide::providers::sqlite::SqliteProvider;
use duroxide::runtime::registry::ActivityRegistry;
use duroxide::runtime::{self, OrchestrationStatus, RuntimeOptions};
use duroxide::{ActivityContext, Client, OrchestrationContext, OrchestrationRegistry};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error>;

/// Sequential: each activity after the previous one completed.
async fn chain(ctx: OrchestrationContext, steps: String) -> Result<String, String> {
    let steps: usize = steps.parse().map_err(|e| format!("{e}"))?;
    for i in 0..steps {
        ctx.schedule_activity("NoOp", i.to_string()).await?;
    }
    Ok(steps.to_string())
}

/// Fan out every activity at once, then join.
async fn wide(ctx: OrchestrationContext, steps: String) -> Result<String, String> {
    let steps: usize = steps.parse().map_err(|e| format!("{e}"))?;
    let all: Vec<_> = (0..steps)
        .map(|i| ctx.schedule_activity("NoOp", i.to_string()))
        .collect();
    for result in ctx.join(all).await {
        result?;
    }
    Ok(steps.to_string())
}

fn usage() -> Error {
    "usage: apollo11-peer-duroxide DB_FILE (chain STEPS | wide STEPS | many RUNS STEPS)".into()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize| -> Result<usize, Error> { Ok(args.get(i).ok_or_else(usage)?.parse()?) };
    let (db, workload) = (
        args.first().ok_or_else(usage)?,
        args.get(1).ok_or_else(usage)?,
    );
    let (orchestration, runs, steps) = match workload.as_str() {
        "chain" => ("Chain", 1, number(2)?),
        "wide" => ("Wide", 1, number(2)?),
        "many" => ("Chain", number(2)?, number(3)?),
        _ => return Err(usage()),
    };
    std::fs::File::create(db)?;
    let store = Arc::new(SqliteProvider::new(&format!("sqlite:{db}"), None).await?);
    let activities = ActivityRegistry::builder()
        .register("NoOp", |_: ActivityContext, input: String| async move {
            Ok(input)
        })
        .build();
    let orchestrations = OrchestrationRegistry::builder()
        .register("Chain", chain)
        .register("Wide", wide)
        .build();
    let options = RuntimeOptions {
        dispatcher_min_poll_interval: Duration::from_millis(1),
        ..RuntimeOptions::default()
    };
    let rt =
        runtime::Runtime::start_with_options(store.clone(), activities, orchestrations, options)
            .await;
    let client = Client::new(store);
    let started = Instant::now();
    for r in 0..runs {
        client
            .start_orchestration(format!("run-{r:05}"), orchestration, steps.to_string())
            .await?;
    }
    for r in 0..runs {
        let status = client
            .wait_for_orchestration(&format!("run-{r:05}"), Duration::from_secs(3_600))
            .await?;
        if !matches!(status, OrchestrationStatus::Completed { .. }) {
            return Err(format!("run-{r:05} did not complete: {status:?}").into());
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    rt.shutdown(None).await;
    let total = runs * steps;
    println!(
        "{}",
        serde_json::json!({
            "workload": workload,
            "runs": runs,
            "steps": total,
            "seconds": seconds,
            "steps_per_s": total as f64 / seconds,
        })
    );
    Ok(())
}
