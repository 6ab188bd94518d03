//! The scheduler's workloads (see `scheduler`) on PostgreSQL: one instance, and three
//! instances sharing one schema, each an engine of its own in this process with its own
//! `PgStore` (pool, writer task, change feed) and its own leases, as `apollo11 serve
//! --store postgres://…` opens one. Run `r` is started by instance `r % n`. Against the
//! duroxide peer measured in the same run, and a loop of one-row INSERT commits
//! (`pg_baselines`: a chain's ceiling at one commit a step). The database is found as in
//! `pg_append`.

use crate::catalog::Scenario;
use crate::pg_append::{database_url, no_database};
use crate::pg_baselines::insert_commits_per_s;
use crate::report::Report;
use crate::scheduler::{close, peer_figures, peer_note, shapes, timed, Shape};
use crate::Setup;
use anyhow::Result;
use apollo11_postgres::{PgOptions, PgStore};
use apollo11_runtime::{Engine, EngineConfig, Leasing};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The instances' lease ttl: `apollo11 serve`'s default.
const LEASE_TTL: Duration = Duration::from_secs(10);

/// The instance counts measured.
const INSTANCES: [usize; 2] = [1, 3];

pub async fn run(setup: &Setup) -> Result<Report> {
    let (ours, peer) = if setup.quick {
        ([200, 200, 300], [50, 200, 300])
    } else {
        ([1_000, 1_000, 1_000], [200, 500, 1_000])
    };
    let mut report = Report::new(Scenario::PgScheduler);
    let Some(url) = database_url() else {
        report.note(no_database());
        return Ok(report);
    };
    report.header();
    let commits = insert_commits_per_s(&url, if setup.quick { 1 } else { 5 }).await?;
    for shape in shapes(ours, peer)? {
        let mut rates = Vec::new();
        for n in INSTANCES {
            rates.push(steps_per_s(&url, n, &shape).await?);
        }
        let (one, three) = (rates[0], rates[1]);
        let peer = peer_figures(&mut report, &setup.dir, &shape);
        let to_peer = |rate: f64| json!(peer.map(|p| rate / p.1));
        report.row(
            shape.key,
            vec![
                json!(shape.label),
                json!(shape.steps()),
                json!(one),
                json!(three),
                json!(three / one),
                json!(peer.map(|p| p.0)),
                json!(peer.map(|p| p.1)),
                to_peer(one),
                to_peer(three),
                json!(commits),
                json!(one / commits),
            ],
        );
    }
    report.note(format!(
        "Instances: engines in this one process, each with its own PgStore (pool of {} \
         connections, writer, change feed) and leases ({LEASE_TTL:?} ttl), on one scratch \
         schema; a single run is driven by one instance whatever their number. {}",
        PgOptions::new("").pool_size,
        peer_note(peer)
    ));
    Ok(report)
}

/// Steps per second for `shape` on `instances` engines sharing a new scratch schema.
async fn steps_per_s(url: &str, instances: usize, shape: &Shape) -> Result<f64> {
    // Holds the schema (dropped with it); the instances open it as `apollo11 serve` would.
    let scratch = PgStore::open_scratch(url).await?;
    let mut engines = Vec::with_capacity(instances);
    for i in 0..instances {
        let store = Arc::new(
            PgStore::open(PgOptions {
                schema: scratch.schema().to_owned(),
                ..PgOptions::new(url)
            })
            .await?,
        );
        let config = EngineConfig {
            instance: format!("bench-{i}"),
            ..EngineConfig::default()
        };
        let leasing = Leasing::new(store.clone(), LEASE_TTL)?;
        engines.push(Arc::new(Engine::open_leased(store, config, leasing).await?));
    }
    let rate = timed(&engines, &shape.workflow, shape.runs).await?;
    close(engines).await;
    drop(scratch);
    Ok(rate)
}
