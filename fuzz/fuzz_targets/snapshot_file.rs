//! The snapshot decoder: the template log with its snapshot's bytes replaced by the input
//! after its first byte, whose bit 0 gives the snapshot a valid checksum. See
//! `datadir::check` for what must hold; a snapshot the log loads must cover events it holds.
#![no_main]

use apollo11_fuzz::{block_on, datadir, flags, format};
use apollo11_log::{FileLog, SnapshotStore};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let Some((flags, bytes)) = flags(data) else {
        return;
    };
    let mut snapshot = bytes.to_vec();
    if flags & 1 != 0 {
        format::fix_snapshot_crc(&mut snapshot);
    }
    let name = datadir::template()
        .iter()
        .map(|(name, _)| name)
        .find(|name| name.ends_with(".snap"))
        .expect("the template has a snapshot");
    let fs = datadir::with_files(&datadir::template_with(name, snapshot));
    if let Ok(log) = FileLog::open_read_only_with(Arc::new(fs.clone()), datadir::DIR) {
        let last = log.recovery().events;
        if let Ok(Some(loaded)) = block_on(log.load_snapshot()) {
            assert!(
                loaded.watermark.0 <= last,
                "a snapshot past the log's end loaded"
            );
        }
    }
    datadir::check(&fs, true);
});
