//! The crash child's ledgers: fsynced lines in files outside the log. The ack ledger is
//! where `apollo11_store::Acked` records every acknowledged append (fenced ones too), on the
//! file log or on the PostgreSQL store with its leases.

use apollo11_core::{RunId, Seq};
use apollo11_store::AckLog;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

/// Appends a line to a ledger file and fsyncs it.
pub fn ledger_line(file: &Mutex<std::fs::File>, line: &str) {
    let mut f = file.lock().unwrap();
    f.write_all(line.as_bytes())
        .and_then(|()| f.sync_data())
        .expect("ledger write");
}

pub fn open_ledger(path: &Path) -> Mutex<std::fs::File> {
    Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("ledger open"),
    )
}

/// The ack ledger: one fsynced line `run seq kind` per event whose append was acknowledged.
pub struct AckFile(pub Mutex<std::fs::File>);

impl AckLog for AckFile {
    fn acknowledged(&self, run_id: &RunId, first_seq: Seq, kinds: &[&'static str]) {
        let lines: String = kinds
            .iter()
            .enumerate()
            .map(|(i, k)| format!("{run_id} {} {k}\n", first_seq.0 + i as u32))
            .collect();
        ledger_line(&self.0, &lines);
    }
}
