//! Measures the file log: durable appends/s with 1, 16 and 256 concurrent appenders
//! (200-byte payloads, fsync mode) against a raw `write + fdatasync` loop on the same disk,
//! and the replay of a 1M-event log (open = scan + CRC + decode + index; then read every
//! event back and fold it into run states).
//!
//! `cargo run --release -p apollo11-log --example throughput -- [DIR] [SECONDS]`

use apollo11_core::{EventId, EventKind, Payload, RunId, Seq, StepName};
use apollo11_log::{Durability, FileLog, Fs, FsFile, FsLock, Mode, Options, RealFs};
use apollo11_machine::RunState;
use apollo11_store::{EventStore, NewEvent};
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The real file system, counting data syncs: events per sync is the group size formed.
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

fn event(i: u64) -> NewEvent {
    NewEvent {
        step: Some(StepName(format!("step-{}", i % 10))),
        kind: EventKind::Started,
        attempt: 1,
        at_ms: 1_700_000_000_000 + i,
        instance: "bench".into(),
        payload: Payload::Inline(vec![b'p'; 200]),
    }
}

/// Durable appends with `appenders` concurrent tasks, each on its own run, for `seconds`.
async fn appends(dir: &Path, appenders: u64, seconds: u64) -> (f64, f64, Vec<Duration>) {
    let fs = CountingFs::default();
    let syncs = fs.syncs.clone();
    let log = Arc::new(FileLog::open_with(Arc::new(fs), dir, Options::default()).unwrap());
    let baseline_syncs = syncs.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..appenders)
        .map(|a| {
            let log = log.clone();
            tokio::spawn(async move {
                let run = RunId(format!("run-{a}"));
                let mut latencies = Vec::new();
                let mut seq = 1;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    log.append(&run, Seq(seq), vec![event(u64::from(seq))])
                        .await
                        .unwrap();
                    latencies.push(t.elapsed());
                    seq += 1;
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    let events = latencies.len() as f64;
    let per_sync = events / (syncs.load(Ordering::Relaxed) - baseline_syncs).max(1) as f64;
    latencies.sort();
    (events / elapsed, per_sync, latencies)
}

/// The physical limit: write `batch` 200-byte records then one `fdatasync`, in a loop.
fn raw_fsync(dir: &Path, batch: usize, seconds: u64) -> f64 {
    let path = dir.join("raw.bin");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    file.set_len(256 << 20).unwrap();
    let buf = vec![b'r'; 230 * batch];
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (started, mut offset, mut events) = (Instant::now(), 0u64, 0u64);
    while Instant::now() < deadline {
        std::os::unix::fs::FileExt::write_all_at(&file, &buf, offset % (250 << 20)).unwrap();
        file.sync_data().unwrap();
        offset += buf.len() as u64;
        events += batch as u64;
    }
    let _ = std::fs::remove_file(path);
    events as f64 / started.elapsed().as_secs_f64()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

/// Writes 1M events (1,000 runs × 1,000) in buffered mode, in batches of 100.
async fn build_million(dir: &Path) {
    let log = FileLog::open(
        dir,
        Options {
            durability: Durability::Buffered,
            ..Options::default()
        },
    )
    .unwrap();
    for round in 0..10u32 {
        for r in 0..1_000u64 {
            let run = RunId(format!("run-{r:04}"));
            let events = (0..100)
                .map(|i| event(u64::from(round) * 100 + i))
                .collect();
            log.append(&run, Seq(round * 100 + 1), events)
                .await
                .unwrap();
        }
    }
}

async fn replay(dir: &Path) -> (f64, f64, f64) {
    let bytes: u64 = std::fs::read_dir(dir.join("segments"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let started = Instant::now();
    let log = FileLog::open_read_only(dir).unwrap();
    let open_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut states: HashMap<RunId, RunState> = HashMap::new();
    let mut from = EventId(1);
    loop {
        let page = log.read_from(from, 10_000).await.unwrap();
        let Some(last) = page.last() else { break };
        from = EventId(last.event_id.0 + 1);
        for e in &page {
            states
                .entry(e.run_id.clone())
                .or_insert_with(|| RunState::new(e.run_id.clone()))
                .apply(e);
        }
    }
    let fold_s = started.elapsed().as_secs_f64();
    assert_eq!(states.len(), 1_000);
    (1e6 / open_s, bytes as f64 / open_s / 1e6, 1e6 / fold_s)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let root = args
        .get(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| tempfile::tempdir().unwrap().keep());
    let seconds: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    println!("data under {}; {seconds} s per point", root.display());
    println!("| appenders | events/s | events per fsync | p50 µs | p99 µs | p999 µs | raw write+fdatasync at that batch, events/s | ratio |");
    println!("|---|---|---|---|---|---|---|---|");
    for appenders in [1u64, 16, 256] {
        let dir = root.join(format!("append-{appenders}"));
        let _ = std::fs::remove_dir_all(&dir);
        let (rate, per_sync, lat) = appends(&dir, appenders, seconds).await;
        let raw = raw_fsync(&root, per_sync.round().max(1.0) as usize, seconds);
        println!(
            "| {appenders} | {rate:.0} | {per_sync:.1} | {:.0} | {:.0} | {:.0} | {raw:.0} | {:.2} |",
            percentile(&lat, 0.5), percentile(&lat, 0.99), percentile(&lat, 0.999), rate / raw
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    let dir = root.join("million");
    let _ = std::fs::remove_dir_all(&dir);
    build_million(&dir).await;
    let (open_rate, open_mb, fold_rate) = replay(&dir).await;
    println!("replay of 1,000,000 events: open (scan, CRC, decode, index) {open_rate:.0} events/s = {open_mb:.0} MB/s; read back + fold {fold_rate:.0} events/s");
    let _ = std::fs::remove_dir_all(&dir);
}
