//! Open loop: events arrive at a fixed rate (10k, 50k and 100k events/s) whatever the store does, as
//! requests arrive at a service; acknowledgement latency p50/p99/p999 against SQLite driven
//! the same way in the same run.
//!
//! A generator thread wakes about every 100 µs and releases every event whose time has come,
//! stamped with the instant it is released; it never waits for an acknowledgement, so a slow
//! store meets a growing queue (no coordinated omission). Event `i` goes to stream
//! `i % STREAMS`; each stream appends its events to its own run in order, one at a time.
//!
//! So at most `STREAMS` appends are in flight, and a store whose mean service time (from the
//! append's call to its answer) is `t` can be offered no more than `STREAMS / t` events/s
//! before the streams' queues grow (Little's law): the `stream_bound` columns. At 100k
//! events/s over 1,000 streams, `t` must stay under 10 ms.

use crate::append::{log_appender, sqlite_appender, Append};
use crate::catalog::Scenario;
use crate::report::{quantile_us, raw_fsync, Report};
use crate::Setup;
use anyhow::Result;
use apollo11_log::Options;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Concurrent streams (runs); at 100k events/s each sees an event every 10 ms.
const STREAMS: usize = 1_000;

/// What one rate offered to one store gave.
struct Offered {
    /// Events acknowledged per second, over the whole pass.
    achieved: f64,
    /// From release to acknowledgement, sorted.
    latencies: Vec<Duration>,
    /// The mean time from an append's call to its answer, in seconds.
    service_mean: f64,
}

impl Offered {
    /// The most events/s the streams could have offered at this mean service time.
    fn stream_bound(&self) -> f64 {
        STREAMS as f64 / self.service_mean
    }
}

/// Offers `rate` events/s for `seconds` to `append`.
async fn offer(rate: u64, seconds: u64, append: Append) -> Result<Offered> {
    let total = rate * seconds;
    let mut senders = Vec::with_capacity(STREAMS);
    let mut tasks = Vec::with_capacity(STREAMS);
    for stream in 0..STREAMS {
        let (send, mut receive) = mpsc::unbounded_channel::<Instant>();
        senders.push(send);
        let append = append.clone();
        tasks.push(tokio::spawn(async move {
            let (mut seq, mut latencies, mut serving) = (1, Vec::new(), Duration::ZERO);
            while let Some(released) = receive.recv().await {
                let called = Instant::now();
                append(format!("stream-{stream}"), seq).await?;
                serving += called.elapsed();
                latencies.push(released.elapsed());
                seq += 1;
            }
            anyhow::Ok((latencies, serving))
        }));
    }
    let started = Instant::now();
    release(rate, total, senders).await?;
    let (mut latencies, mut serving) = (Vec::with_capacity(total as usize), Duration::ZERO);
    for task in tasks {
        let (each, served) = task.await??;
        latencies.extend(each);
        serving += served;
    }
    let achieved = latencies.len() as f64 / started.elapsed().as_secs_f64();
    latencies.sort();
    Ok(Offered {
        achieved,
        service_mean: serving.as_secs_f64() / latencies.len().max(1) as f64,
        latencies,
    })
}

/// The generator: releases `total` items at `rate` per second from now, item `i` to
/// `senders[i % senders.len()]`, each stamped with the instant it is released; returns when
/// the last is released. Runs on the blocking pool, so a busy runtime cannot delay it.
pub async fn release(
    rate: u64,
    total: u64,
    senders: Vec<mpsc::UnboundedSender<Instant>>,
) -> Result<()> {
    let started = Instant::now();
    let generator = tokio::task::spawn_blocking(move || {
        let interval = Duration::from_secs(1).as_secs_f64() / rate as f64;
        let mut next = 0u64;
        while next < total {
            let due = (started.elapsed().as_secs_f64() / interval) as u64 + 1;
            let now = Instant::now();
            for i in next..due.min(total) {
                let _ = senders[i as usize % senders.len()].send(now);
            }
            next = due.min(total);
            std::thread::sleep(Duration::from_micros(100));
        }
    });
    generator
        .await
        .map_err(|e| anyhow::anyhow!("generator failed: {e}"))
}

pub async fn run(setup: &Setup) -> Result<Report> {
    let seconds = if setup.quick { 1 } else { 5 };
    let mut report = Report::new(Scenario::OpenLoop);
    report.header();
    for rate in [10_000, 50_000, 100_000] {
        let dir = setup.dir.join(format!("open-{rate}"));
        let ours = offer(rate, seconds, log_appender(&dir, Options::default())?.0).await?;
        let (sqlite, _) = sqlite_appender(&setup.dir.join(format!("open-{rate}.db")))?;
        let theirs = offer(rate, seconds, sqlite).await?;
        let (_, syncs) = raw_fsync(&setup.dir, 1, 4_096, 2.0)?;
        let q = |l: &[Duration], q| json!(quantile_us(l, q));
        let (latencies, sqlite_latencies) = (&ours.latencies, &theirs.latencies);
        report.row(
            &rate.to_string(),
            vec![
                json!(rate),
                json!(ours.achieved),
                q(latencies, 0.5),
                q(latencies, 0.99),
                q(latencies, 0.999),
                json!(ours.service_mean * 1e6),
                json!(ours.stream_bound()),
                json!(theirs.achieved),
                q(sqlite_latencies, 0.5),
                q(sqlite_latencies, 0.99),
                q(sqlite_latencies, 0.999),
                json!(theirs.stream_bound()),
                json!(quantile_us(latencies, 0.99) / quantile_us(sqlite_latencies, 0.99)),
                q(&syncs, 0.5),
                q(&syncs, 0.99),
            ],
        );
        std::fs::remove_dir_all(&dir)?;
    }
    report.note(format!(
        "{seconds} s per rate, 200-byte events, fsync; {STREAMS} streams, each on its own run. \
         raw_sync: one 4 KiB write + fdatasync, timed alone in the same run, for 2 s: an event \
         that arrives during a sync waits for it and then for its own, so the ack p99 cannot \
         be much below raw_sync p50 + p99. service_mean: from an append's call to its answer; \
         stream_bound: {STREAMS} / service_mean, the most events/s {STREAMS} streams of one \
         append in flight each could be offered (a store below the offered rate there falls behind)."
    ));
    Ok(report)
}
