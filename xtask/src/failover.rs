//! `cargo xtask failover`: several `apollo11 serve` processes on one PostgreSQL schema
//! (`APOLLO11_TEST_PG_URL`, a fresh random schema dropped at the end), driving runs of a
//! 10-step shell workflow whose steps write the shared steps ledger (`ledger.rs`). First a
//! SIGKILL of the instance driving most runs half-way: every run finishes, each orphan is
//! taken over within ttl + 2 s (p50/p99/max printed). Then a SIGSTOP of another instance past
//! its ttl, and a SIGCONT once its runs were taken over: none of its later appends lands.
//! Then `pg_terminate_backend` of all their connections while runs are under way.
//! Last, on a private PostgreSQL server, the database restarted twice during 100 runs
//! (`failover_restart.rs`). After each, I1-I6 of docs/reliability.md are checked for every
//! run.

use crate::failover_cluster::{ms_now, Cluster, Row, STEPS};
use crate::{invariants, ledger};
use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// The lease ttl of every instance: short, to keep the test fast.
pub const TTL: Duration = Duration::from_secs(2);
/// How long after the ttl a takeover may come (the claim period, a step, a slow machine).
const TAKEOVER_SLACK: Duration = Duration::from_secs(2);
const KILL_RUNS: usize = 300;
const STOP_RUNS: usize = 100;
const CUT_RUNS: usize = 100;
/// How many times a strike may find its victim with no run left before giving up.
const STRIKES: usize = 10;

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    match args {
        [] => {}
        [only] if only == "--restarts" => return crate::failover_restart::run(root),
        [a, ..] => bail!("unknown argument `{a}`; usage: cargo xtask failover [--restarts]"),
    }
    let url = std::env::var("APOLLO11_TEST_PG_URL")
        .context("cargo xtask failover needs APOLLO11_TEST_PG_URL (a PostgreSQL database)")?;
    let started = Instant::now();
    let mut cluster = Cluster::new(root, &url, TTL)?;
    let outcome = scenarios(&mut cluster);
    cluster.stop();
    let dropped = cluster.drop_schema();
    outcome?;
    dropped?;
    crate::failover_restart::run(root)?;
    println!(
        "failover test passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn scenarios(cluster: &mut Cluster) -> Result<()> {
    for _ in 0..3 {
        cluster.spawn()?;
    }
    kill_half_way(cluster)?;
    stop_past_the_ttl(cluster)?;
    cut_connections(cluster)
}

/// Scenario 3: `pg_terminate_backend` of every connection of the instances, twice, while
/// runs are under way: they reconnect and every run finishes, nothing lost or run twice.
fn cut_connections(cluster: &mut Cluster) -> Result<()> {
    let runs = cluster.start_runs("c", CUT_RUNS)?;
    cluster.wait_for_steps(CUT_RUNS * STEPS / 4)?;
    let mut terminated = cluster.terminate_connections()?;
    std::thread::sleep(Duration::from_millis(500));
    terminated += cluster.terminate_connections()?;
    println!("pg_terminate_backend of {terminated} connections of the instances, twice");
    ensure!(
        terminated > 0,
        "no connection of the instances was found to terminate"
    );
    cluster.wait_finished(&runs)?;
    check_invariants(cluster, &runs)
}

/// Scenario 1: SIGKILL the busiest instance half-way through 300 runs.
fn kill_half_way(cluster: &mut Cluster) -> Result<()> {
    let Strike {
        runs,
        victim,
        orphans,
        at_ms: killed_ms,
    } = strike(cluster, "k", KILL_RUNS, 2, "KILL")?;
    cluster.forget(&victim);
    cluster.wait_finished(&runs)?;
    let mut latencies = Vec::new();
    for run in &orphans {
        let events = cluster.events(run)?;
        if let Some(first) = first_by_another(&events, &victim, killed_ms) {
            latencies.push(first.saturating_sub(killed_ms));
        }
    }
    ensure!(!latencies.is_empty(), "no run of {victim} was taken over");
    latencies.sort_unstable();
    let limit = (TTL + TAKEOVER_SLACK).as_millis() as u64;
    let max = latencies[latencies.len() - 1];
    println!(
        "SIGKILL of {victim} ({} of its runs running): {} taken over, takeover p50 {} ms, p99 {} ms, max {max} ms (ttl {} ms)",
        orphans.len(),
        latencies.len(),
        percentile(&latencies, 50),
        percentile(&latencies, 99),
        TTL.as_millis()
    );
    ensure!(
        max <= limit,
        "a takeover took {max} ms, more than ttl + 2 s ({limit} ms)"
    );
    check_invariants(cluster, &runs)
}

/// Scenario 2: SIGSTOP the busiest instance past its ttl, SIGCONT it once its runs were
/// taken over: none of its appends after a takeover is accepted.
fn stop_past_the_ttl(cluster: &mut Cluster) -> Result<()> {
    let Strike {
        runs,
        victim,
        orphans: stolen,
        at_ms: stopped_ms,
    } = strike(cluster, "s", STOP_RUNS, 4, "STOP")?;
    std::thread::sleep(TTL + TAKEOVER_SLACK);
    let continued_ms = ms_now();
    cluster.signal(&victim, "CONT")?;
    cluster.wait_finished(&runs)?;
    let (mut taken, mut stale, mut late) = (0, 0, Vec::new());
    for run in &stolen {
        let events = cluster.events(run)?;
        // A run with no event after the stop had ended before it (its last events were
        // not yet visible to the listing).
        let Some(next) = events.iter().position(|e| at_ms(e) > stopped_ms) else {
            continue;
        };
        if instance(&events[next]) == victim || at_ms(&events[next]) > continued_ms {
            let by = instance(&events[next]);
            let after = at_ms(&events[next]).saturating_sub(stopped_ms);
            late.push(format!(
                "{run}: next event by {by} {after} ms after the stop"
            ));
            continue;
        }
        taken += 1;
        stale += events[next..]
            .iter()
            .filter(|e| instance(e) == victim)
            .count();
    }
    let rejections = cluster.metric(&victim, "apollo11_stale_epoch_rejections_total")?;
    let lost = cluster.log_lines(&victim, "lease lost; the run's driver stops")?;
    println!(
        "SIGSTOP of {victim} for {} ms ({} of its runs running): {taken} taken over, {} not taken over before the SIGCONT ({}), {stale} of its appends accepted after a takeover; it logged {lost} leases lost (renewals refused or run out) and counted {rejections} stale-epoch append rejections",
        (TTL + TAKEOVER_SLACK).as_millis(),
        stolen.len(),
        late.len(),
        late.join(", ")
    );
    ensure!(
        taken > 0,
        "no run of the stopped instance {victim} was taken over"
    );
    ensure!(
        stale == 0,
        "{stale} appends of {victim} were accepted after another instance took its runs over"
    );
    check_invariants(cluster, &runs)
}

/// What a strike did: the runs started, the instance signalled, its runs then running, and
/// when (ms since the epoch).
struct Strike {
    runs: Vec<String>,
    victim: String,
    orphans: Vec<String>,
    at_ms: u64,
}

/// Starts `count` runs named `prefix…`, waits for 1/`part` of their steps, and sends
/// `signal` to the instance driving most of them. Its orphans are read after the signal: a
/// run it finished between the listing and the signal is none. A stopped instance left
/// with none is continued and struck again a moment later.
fn strike(
    cluster: &mut Cluster,
    prefix: &str,
    count: usize,
    part: usize,
    signal: &str,
) -> Result<Strike> {
    let runs = cluster.start_runs(prefix, count)?;
    let mut rows = cluster.wait_for_steps(count * STEPS / part)?;
    for _ in 0..STRIKES {
        // A listing taken while runs change hands may show none with a driver: look again.
        let Some(victim) = busiest(&rows) else {
            std::thread::sleep(Duration::from_millis(100));
            rows = cluster.rows()?;
            continue;
        };
        let at_ms = ms_now();
        cluster.signal(&victim, signal)?;
        let orphans = driven_by(&cluster.rows()?, &victim);
        if !orphans.is_empty() || signal != "STOP" {
            return Ok(Strike {
                runs,
                victim,
                orphans,
                at_ms,
            });
        }
        cluster.signal(&victim, "CONT")?;
        std::thread::sleep(Duration::from_millis(100));
        rows = cluster.rows()?;
    }
    bail!(
        "{STRIKES} times no instance drove a running run, or the one struck with SIG{signal} \
         had finished its runs already"
    )
}

/// The instance holding the most leases of running runs, if any run has a driver.
fn busiest(rows: &[Row]) -> Option<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.state == "running") {
        *counts.entry(row.driver.as_str()).or_default() += 1;
    }
    counts.remove("-");
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(driver, _)| driver.to_owned())
}

fn driven_by(rows: &[Row], driver: &str) -> Vec<String> {
    rows.iter()
        .filter(|r| r.state == "running" && r.driver == driver)
        .map(|r| r.run_id.clone())
        .collect()
}

fn first_by_another(events: &[Value], victim: &str, after_ms: u64) -> Option<u64> {
    events
        .iter()
        .find(|e| at_ms(e) >= after_ms && instance(e) != victim)
        .map(at_ms)
}

fn at_ms(event: &Value) -> u64 {
    event["at_ms"].as_u64().unwrap_or_default()
}

fn instance(event: &Value) -> &str {
    event["instance"].as_str().unwrap_or_default()
}

fn percentile(sorted: &[u64], p: usize) -> u64 {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// I1-I6 for `runs`: each started run is in the store (I1) with dense seqs (I2) and
/// increasing ids (I6), succeeded (I4), every step's ledger passes `ledger::check_step`
/// (I3), and the live instances still serve (I5: nothing refused to open).
pub fn check_invariants(cluster: &mut Cluster, runs: &[String]) -> Result<()> {
    let executions = ledger::executions(&cluster.ledger()?).map_err(anyhow::Error::msg)?;
    let mut reruns = 0;
    for run in runs {
        invariants::check_order(run, &cluster.events(run)?)?;
        let view = cluster.run_view(run)?;
        ensure!(
            view["state"] == "succeeded",
            "I4: {run} is {}, not succeeded",
            view["state"]
        );
        let steps = view["steps"]
            .as_object()
            .context("a run view without steps")?;
        ensure!(
            steps.len() == STEPS,
            "{run} has {} steps, not {STEPS}",
            steps.len()
        );
        for (name, step) in steps {
            ensure!(
                step["state"] == "succeeded",
                "I4: {run}/{name} is {}",
                step["state"]
            );
        }
        reruns += invariants::check_ledger(run, &view, &executions)?;
    }
    cluster.check_alive()?;
    println!(
        "I1-I6 hold for {} runs ({reruns} reruns of interrupted steps)",
        runs.len()
    );
    Ok(())
}
