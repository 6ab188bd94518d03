//! The SQLite baseline for durable append, driven by the same harness as the log: WAL,
//! `synchronous=FULL`, and the strategy a competent user would pick for many concurrent
//! appenders: one writer thread that takes every queued append into one transaction.

use anyhow::Result;
use rusqlite::{params, Connection};
use std::path::Path;
use std::sync::mpsc;
use tokio::sync::oneshot;

/// An append waiting for the writer: (run, seq, payload, acknowledgement).
type Request = (String, u32, Vec<u8>, oneshot::Sender<()>);

/// A table of events written by one thread in batched transactions.
pub struct SqliteLog {
    sender: mpsc::SyncSender<Request>,
}

impl SqliteLog {
    pub fn open(path: &Path) -> Result<SqliteLog> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch("CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, run TEXT NOT NULL, seq INTEGER NOT NULL, payload BLOB NOT NULL, UNIQUE(run, seq))")?;
        let (sender, receiver) = mpsc::sync_channel::<Request>(4_096);
        std::thread::spawn(move || writer(conn, receiver));
        Ok(SqliteLog { sender })
    }

    /// Appends one event; returns once its transaction committed.
    pub async fn append(&self, run: &str, seq: u32, payload: Vec<u8>) -> Result<()> {
        let (ack, done) = oneshot::channel();
        self.sender.send((run.to_owned(), seq, payload, ack))?;
        done.await?;
        Ok(())
    }
}

fn writer(mut conn: Connection, requests: mpsc::Receiver<Request>) {
    while let Ok(first) = requests.recv() {
        let mut batch = vec![first];
        batch.extend(requests.try_iter().take(10_000));
        let tx = conn.transaction().expect("begin");
        {
            let mut insert = tx
                .prepare_cached("INSERT INTO events (run, seq, payload) VALUES (?1, ?2, ?3)")
                .expect("prepare");
            for (run, seq, payload, _) in &batch {
                insert.execute(params![run, seq, payload]).expect("insert");
            }
        }
        tx.commit().expect("commit");
        for (_, _, _, ack) in batch {
            let _ = ack.send(());
        }
    }
}
