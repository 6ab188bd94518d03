//! The SQLite baseline for durable append, as strong as SQLite gets for this job, driven by
//! the same harness as the log: WAL with `synchronous=FULL` (a commit is durable when it
//! returns), exclusive locking (no shared-memory index to keep), one writer thread that
//! takes every queued append into one transaction, binding each row straight from its
//! request with one cached statement. Its table is the fastest layout measured that can
//! still read a run in order (`Layout::RowidUnique`): a `WITHOUT ROWID` table clustered on
//! (run, seq) is slower for appends that interleave many runs, since each row lands in the
//! middle of the tree (`layouts` measures all three). [`batch_loop`] is SQLite's own batch
//! loop with no harness at all: what the same transactions cost SQLite alone.

use anyhow::Result;
use rusqlite::Connection;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;
use tokio::sync::oneshot;

/// A table of events.
#[derive(Clone, Copy, Debug)]
pub enum Layout {
    /// Rows in insertion order (rowid) and a unique index on (run, seq).
    RowidUnique,
    /// Rows clustered on (run, seq), no other index.
    WithoutRowid,
    /// Rows in insertion order, no index: cannot read a run without a full scan.
    RowidOnly,
}

impl Layout {
    pub const ALL: [Layout; 3] = [Layout::RowidUnique, Layout::WithoutRowid, Layout::RowidOnly];

    fn schema(self) -> &'static str {
        match self {
            Layout::RowidUnique => {
                "CREATE TABLE events (id INTEGER PRIMARY KEY, run TEXT NOT NULL, \
                 seq INTEGER NOT NULL, payload BLOB NOT NULL, UNIQUE (run, seq))"
            }
            Layout::WithoutRowid => {
                "CREATE TABLE events (run TEXT NOT NULL, seq INTEGER NOT NULL, \
                 payload BLOB NOT NULL, PRIMARY KEY (run, seq)) WITHOUT ROWID"
            }
            Layout::RowidOnly => {
                "CREATE TABLE events (run TEXT NOT NULL, seq INTEGER NOT NULL, \
                 payload BLOB NOT NULL)"
            }
        }
    }
}

const INSERT: &str = "INSERT INTO events (run, seq, payload) VALUES (?1, ?2, ?3)";

/// An append waiting for the writer: (run, seq, payload, acknowledgement).
type Request = (String, u32, Vec<u8>, oneshot::Sender<()>);

/// A table of events written by one thread in batched transactions.
pub struct SqliteLog {
    sender: mpsc::SyncSender<Request>,
    /// Transactions committed, to report the batch size the harness formed.
    pub transactions: Arc<AtomicU64>,
}

/// A fresh database at `path` (any old one removed) with `layout`, configured as described
/// above.
fn create(path: &Path, layout: Layout) -> Result<Connection> {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
    conn.execute_batch(layout.schema())?;
    Ok(conn)
}

impl SqliteLog {
    pub fn open(path: &Path) -> Result<SqliteLog> {
        let conn = create(path, Layout::RowidUnique)?;
        let (sender, receiver) = mpsc::sync_channel::<Request>(4_096);
        let transactions = Arc::new(AtomicU64::new(0));
        let counting = transactions.clone();
        std::thread::spawn(move || writer(&conn, &receiver, &counting));
        Ok(SqliteLog {
            sender,
            transactions,
        })
    }

    /// Appends one event; returns once its transaction committed.
    pub async fn append(&self, run: String, seq: u32, payload: Vec<u8>) -> Result<()> {
        let (ack, done) = oneshot::channel();
        self.sender.send((run, seq, payload, ack))?;
        done.await?;
        Ok(())
    }
}

/// Inserts `rows` in one transaction.
fn commit<'r>(
    conn: &Connection,
    rows: impl Iterator<Item = (&'r str, u32, &'r [u8])>,
) -> Result<()> {
    conn.execute_batch("BEGIN")?;
    let mut insert = conn.prepare_cached(INSERT)?;
    for (run, seq, payload) in rows {
        insert.raw_bind_parameter(1, run)?;
        insert.raw_bind_parameter(2, seq)?;
        insert.raw_bind_parameter(3, payload)?;
        insert.raw_execute()?;
    }
    conn.execute_batch("COMMIT")?;
    Ok(())
}

fn writer(conn: &Connection, requests: &mpsc::Receiver<Request>, transactions: &AtomicU64) {
    let mut batch = Vec::with_capacity(4_096);
    while let Ok(first) = requests.recv() {
        batch.push(first);
        batch.extend(requests.try_iter());
        let rows = batch
            .iter()
            .map(|(run, seq, p, _)| (run.as_str(), *seq, p.as_slice()));
        commit(conn, rows).expect("the SQLite baseline commits");
        transactions.fetch_add(1, Ordering::Relaxed);
        for (_, _, _, ack) in batch.drain(..) {
            let _ = ack.send(());
        }
    }
}

/// SQLite's own batch loop: one thread commits `per_tx` 200-byte rows per transaction into
/// `layout` (256 runs in turn, as 256 appenders write them) for `seconds`, nothing else;
/// rows per second.
pub fn batch_loop(path: &Path, layout: Layout, per_tx: usize, seconds: f64) -> Result<f64> {
    let conn = create(path, layout)?;
    let runs: Vec<String> = (0..256).map(|r| format!("run-{r}")).collect();
    let payload = [b'p'; 200];
    let started = Instant::now();
    let mut written = 0u64;
    while started.elapsed().as_secs_f64() < seconds {
        let rows = (written..written + per_tx as u64).map(|i| {
            let seq = (i / 256 + 1) as u32;
            (runs[(i % 256) as usize].as_str(), seq, &payload[..])
        });
        commit(&conn, rows)?;
        written += per_tx as u64;
    }
    Ok(written as f64 / started.elapsed().as_secs_f64())
}
