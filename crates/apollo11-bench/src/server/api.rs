//! The read API under load, on a log of many finished runs: a run's state and the runs list
//! in a closed loop (each connection sends its next request when the last is answered), and
//! a run's state in an open loop (requests released on schedule whatever the server does,
//! so a slow answer delays the ones queued behind it and is counted: no coordinated
//! omission).

use super::http::Conn;
use crate::open_loop::release;
use crate::scheduler::workflow;
use anyhow::{ensure, Result};
use apollo11_log::{FileLog, Options};
use apollo11_runtime::{Engine, EngineConfig, RunId, RunStatus};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Steps of each run written into the log.
pub const STEPS: usize = 10;

/// The id of the `i`-th run written.
pub fn run_id(i: u64) -> String {
    format!("run-{i:05}")
}

/// Writes `runs` finished runs of a [`STEPS`]-step no-op chain into a fresh log at `dir`,
/// through the engine, 1,000 at a time.
pub async fn populate(dir: &Path, runs: u64) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    let store = Arc::new(FileLog::open(dir, Options::default())?);
    let engine = Engine::open(store, EngineConfig::default()).await?;
    let wf = Arc::new(workflow("ten", STEPS, true, 8)?);
    for first in (0..runs).step_by(1_000) {
        let mut handles = Vec::new();
        for i in first..runs.min(first + 1_000) {
            handles.push(engine.start(&wf, RunId(run_id(i))).await?);
        }
        for h in handles {
            ensure!(
                h.outcome().await? == RunStatus::Succeeded,
                "a run written for the server benchmark did not succeed"
            );
        }
    }
    engine.close().await;
    Ok(())
}

/// The path of the n-th request.
pub type Target = Arc<dyn Fn(u64) -> String + Send + Sync>;

/// Sorted latencies and the rate they were answered at.
pub struct Latencies {
    /// Answers per second.
    pub per_s: f64,
    /// Every request's latency, sorted.
    pub sorted: Vec<Duration>,
}

impl Latencies {
    fn of(mut sorted: Vec<Duration>, started: Instant) -> Latencies {
        sorted.sort();
        Latencies {
            per_s: sorted.len() as f64 / started.elapsed().as_secs_f64(),
            sorted,
        }
    }
}

/// `conns` connections each sending `path(n)` for its n-th request, one at a time, for
/// `seconds`.
pub async fn closed(addr: SocketAddr, conns: u64, seconds: f64, path: Target) -> Result<Latencies> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::new();
    for c in 0..conns {
        let mut conn = Conn::open(addr).await?;
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            for n in (c..).step_by(conns as usize) {
                if Instant::now() >= deadline {
                    break;
                }
                let t = Instant::now();
                conn.get(&path(n)).await?;
                latencies.push(t.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    Ok(Latencies::of(latencies, started))
}

/// `rate` requests per second for `seconds`, request `n` being `path(n)` sent on connection
/// `n % conns`; each latency runs from the request's release to its answer.
pub async fn open(
    addr: SocketAddr,
    rate: u64,
    seconds: u64,
    conns: u64,
    path: Target,
) -> Result<Latencies> {
    let mut senders = Vec::new();
    let mut tasks = Vec::new();
    for c in 0..conns {
        let mut conn = Conn::open(addr).await?;
        let (send, mut receive) = mpsc::unbounded_channel::<Instant>();
        senders.push(send);
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut n = c;
            while let Some(released) = receive.recv().await {
                conn.get(&path(n)).await?;
                latencies.push(released.elapsed());
                n += conns;
            }
            anyhow::Ok(latencies)
        }));
    }
    let started = Instant::now();
    release(rate, rate * seconds, senders).await?;
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    Ok(Latencies::of(latencies, started))
}
