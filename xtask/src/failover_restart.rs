//! The failover test's last scenario: the database itself restarted during a run. Three
//! `apollo11 serve` on a private PostgreSQL server (`pg_private.rs`; the machine's shared
//! one is never restarted) drive 100 runs; the server is restarted with `pg_ctl restart -m
//! fast` a quarter of the way, and with `-m immediate` (a crash) half-way. The instances
//! reconnect, every run finishes, I1-I6 hold; the time from each restart's return to the
//! next event appended is printed.

use crate::failover::{check_invariants, TTL};
use crate::failover_cluster::{ms_now, Cluster, STEPS};
use crate::pg_private::PrivatePg;
use anyhow::{ensure, Result};
use std::path::Path;

const RESTART_RUNS: usize = 100;

/// Runs the scenario on a private server, removed at the end whatever happened.
pub fn run(root: &Path) -> Result<()> {
    let pg = PrivatePg::start()?;
    println!("private PostgreSQL server at {}", pg.url);
    let outcome = Cluster::new(root, &pg.url, TTL).and_then(|mut cluster| {
        let outcome = restarts(&mut cluster, &pg);
        cluster.stop();
        outcome
    });
    pg.remove();
    outcome
}

fn restarts(cluster: &mut Cluster, pg: &PrivatePg) -> Result<()> {
    for _ in 0..3 {
        cluster.spawn()?;
    }
    let runs = cluster.start_runs("r", RESTART_RUNS)?;
    let mut back_ms = Vec::new();
    for (mode, part) in [("fast", 4), ("immediate", 2)] {
        cluster.wait_for_steps(RESTART_RUNS * STEPS / part)?;
        let took = pg.restart(mode)?;
        back_ms.push(ms_now());
        println!(
            "pg_ctl restart -m {mode}: the server accepted connections again after {} ms",
            took.as_millis()
        );
    }
    cluster.wait_finished(&runs)?;
    let mut first_after = vec![u64::MAX; back_ms.len()];
    for run in &runs {
        for event in cluster.events(run)? {
            let at = event["at_ms"].as_u64().unwrap_or_default();
            for (first, back) in first_after.iter_mut().zip(&back_ms) {
                if at >= *back {
                    *first = (*first).min(at);
                }
            }
        }
    }
    for (first, back) in first_after.iter().zip(&back_ms) {
        ensure!(
            *first != u64::MAX,
            "no event was appended after a restart of the database"
        );
        println!(
            "first event appended {} ms after the server was back",
            first - back
        );
    }
    check_invariants(cluster, &runs)
}
