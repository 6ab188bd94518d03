//! Durable append: 1, 16 and 256 concurrent appenders of 200-byte events in fsync mode;
//! events/s and acknowledgement latency, against two baselines in the same run: a raw
//! `write + fdatasync` loop over the batch size the log actually formed (counted by a file
//! system wrapper), and SQLite driven by the same harness (with the batch size its writer
//! formed, and SQLite's own batch loop at that size, without the harness). The same log and
//! harness with fsync off gives the ceiling the two cores set without waiting for the disk;
//! the writer writes the next batch while the previous one is being synced, so the durable
//! rate is bounded by the lower of that ceiling and the raw rate (`overlap_bound`), where a
//! writer that waited for each sync before gathering the next batch would be bounded by the
//! CPU time and the sync time per event added together (`serial_bound`).

use crate::catalog::Scenario;
use crate::report::{quantile_us, raw_fsync, Report};
use crate::sqlite::{batch_loop, Layout};
use crate::Setup;
use anyhow::Result;
use apollo11_core::{EventKind, Payload, RunId, Seq, StepName};
use apollo11_log::{Durability, FileLog, Fs, FsFile, FsLock, Mode, Options, RealFs};
use apollo11_store::{EventStore, NewEvent};
use serde_json::json;
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The real file system, counting data syncs.
#[derive(Default)]
struct CountingFs {
    syncs: Arc<AtomicU64>,
}

struct CountingFile {
    inner: Box<dyn FsFile>,
    syncs: Arc<AtomicU64>,
}

impl Fs for CountingFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        RealFs.create_dir_all(dir)
    }
    fn open(&self, path: &Path, mode: Mode) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(CountingFile {
            inner: RealFs.open(path, mode)?,
            syncs: self.syncs.clone(),
        }))
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        RealFs.list(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        RealFs.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        RealFs.sync_dir(dir)
    }
    fn try_lock(&self, path: &Path, holder: &str) -> io::Result<Option<Box<dyn FsLock>>> {
        RealFs.try_lock(path, holder)
    }
}

impl FsFile for CountingFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
}

/// A 200-byte event.
pub fn event(i: u64) -> NewEvent {
    NewEvent {
        step: Some(StepName(format!("step-{}", i % 10))),
        kind: EventKind::Started,
        attempt: 1,
        at_ms: 1_700_000_000_000 + i,
        instance: "bench".into(),
        payload: Payload::Inline(vec![b'p'; 200]),
    }
}

pub async fn run(setup: &Setup) -> Result<Report> {
    let seconds = if setup.quick { 1 } else { 5 };
    let mut report = Report::new(Scenario::Append);
    report.header();
    for appenders in [1u64, 16, 256] {
        let dir = setup.dir.join(format!("append-{appenders}"));
        let (rate, per_sync, latencies) = appends(&dir, appenders, seconds).await?;
        let buffered = Options {
            durability: Durability::Buffered,
            ..Options::default()
        };
        let (no_fsync, _) = drive(appenders, seconds, log_appender(&dir, buffered)?.0).await?;
        let raw = raw_fsync(
            &setup.dir,
            per_sync.round().max(1.0) as usize,
            230,
            seconds as f64,
        )?
        .0;
        let sqlite_path = setup.dir.join(format!("sqlite-{appenders}.db"));
        let (sqlite, per_tx, sqlite_latencies) =
            sqlite_appends(&sqlite_path, appenders, seconds).await?;
        let per_tx_rows = per_tx.round().max(1.0) as usize;
        let loop_path = setup.dir.join(format!("sqlite-loop-{appenders}.db"));
        let sqlite_loop = batch_loop(&loop_path, Layout::RowidUnique, per_tx_rows, seconds as f64)?;
        report.row(
            &appenders.to_string(),
            vec![
                json!(appenders),
                json!(rate),
                json!(per_sync),
                json!(quantile_us(&latencies, 0.5)),
                json!(quantile_us(&latencies, 0.99)),
                json!(quantile_us(&latencies, 0.999)),
                json!(raw),
                json!(rate / raw),
                json!(no_fsync),
                json!(no_fsync.min(raw)),
                json!(1.0 / (1.0 / no_fsync + 1.0 / raw)),
                json!(sqlite),
                json!(per_tx),
                json!(quantile_us(&sqlite_latencies, 0.99)),
                json!(sqlite_loop),
                json!(rate / sqlite),
            ],
        );
        std::fs::remove_dir_all(&dir)?;
    }
    report.note(layouts(setup)?);
    Ok(report)
}

/// SQLite's own batch loop on each table layout, at 100 and 1,000 rows per transaction.
fn layouts(setup: &Setup) -> Result<String> {
    let seconds = if setup.quick { 0.5 } else { 2.0 };
    let mut figures = Vec::new();
    for layout in Layout::ALL {
        for per_tx in [100, 1_000] {
            let path = setup.dir.join("sqlite-layout.db");
            let rate = batch_loop(&path, layout, per_tx, seconds)?;
            figures.push(format!("{layout:?} at {per_tx}/tx {rate:.0}"));
        }
    }
    Ok(format!(
        "SQLite's own batch loop (fsync on, {seconds} s each), rows/s: {}",
        figures.join(", ")
    ))
}

/// An appender under test: `append(run, seq)` returns once the event is durable.
pub type Append = Arc<dyn Fn(String, u32) -> BoxFuture + Send + Sync>;
type BoxFuture = Pin<Box<dyn Future<Output = Result<()>> + Send>>;

/// Runs `appenders` concurrent appenders, each on its own run, for `seconds`; returns
/// events/s and every acknowledgement latency, sorted.
pub async fn drive(appenders: u64, seconds: u64, append: Append) -> Result<(f64, Vec<Duration>)> {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..appenders)
        .map(|a| {
            let append = append.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut seq = 1;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    append(format!("run-{a}"), seq).await?;
                    latencies.push(t.elapsed());
                    seq += 1;
                }
                anyhow::Ok(latencies)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await??);
    }
    let rate = latencies.len() as f64 / started.elapsed().as_secs_f64();
    latencies.sort();
    Ok((rate, latencies))
}

/// The log under test in `dir` (created empty), and its count of data syncs.
pub fn log_appender(dir: &Path, options: Options) -> Result<(Append, Arc<AtomicU64>)> {
    let _ = std::fs::remove_dir_all(dir);
    let fs = CountingFs::default();
    let syncs = fs.syncs.clone();
    let log = Arc::new(FileLog::open_with(Arc::new(fs), dir, options)?);
    let append: Append = Arc::new(move |run, seq| {
        let log = log.clone();
        Box::pin(async move {
            log.append(&RunId(run), Seq(seq), vec![event(u64::from(seq))])
                .await?;
            Ok(())
        })
    });
    Ok((append, syncs))
}

/// SQLite under test at `path` (created empty), and its count of transactions.
pub fn sqlite_appender(path: &Path) -> Result<(Append, Arc<AtomicU64>)> {
    let db = Arc::new(crate::sqlite::SqliteLog::open(path)?);
    let transactions = db.transactions.clone();
    let append: Append = Arc::new(move |run, seq| {
        let db = db.clone();
        Box::pin(async move { db.append(run, seq, vec![b'p'; 200]).await })
    });
    Ok((append, transactions))
}

/// The log under test; also returns how many events each fsync carried.
async fn appends(dir: &Path, appenders: u64, seconds: u64) -> Result<(f64, f64, Vec<Duration>)> {
    let (append, syncs) = log_appender(dir, Options::default())?;
    let before = syncs.load(Ordering::Relaxed);
    let (rate, latencies) = drive(appenders, seconds, append).await?;
    let per_sync = latencies.len() as f64 / (syncs.load(Ordering::Relaxed) - before).max(1) as f64;
    Ok((rate, per_sync, latencies))
}

/// The same workload on SQLite; also returns how many events each transaction carried.
async fn sqlite_appends(
    path: &Path,
    appenders: u64,
    seconds: u64,
) -> Result<(f64, f64, Vec<Duration>)> {
    let (append, transactions) = sqlite_appender(path)?;
    let (rate, latencies) = drive(appenders, seconds, append).await?;
    let per_tx = latencies.len() as f64 / transactions.load(Ordering::Relaxed).max(1) as f64;
    Ok((rate, per_tx, latencies))
}
