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

/// Opens a ledger for appending, its torn tail cut first: a kill can land inside a write
/// (the kernel stops copying a write's pages at a fatal signal), and the next life would
/// append its lines to the torn one. A line cut short records nothing that happened: a
/// step's line is written before the step does anything, an ack's after the append it
/// acknowledges, so a cut line reads as a kill just before it.
pub fn open_ledger(path: &Path) -> Mutex<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .expect("ledger open");
    let text = std::fs::read(path).expect("ledger read");
    let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if whole < text.len() {
        file.set_len(whole as u64)
            .and_then(|()| file.sync_data())
            .expect("ledger cut");
    }
    Mutex::new(file)
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
