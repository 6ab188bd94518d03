//! Verify's check of the snapshot files: each must decode (CRC, layout), cover no event past
//! the log's end, and belong to this log (the CRC of its watermark event's record).

use super::SnapshotReport;
use crate::file_system::{Fs, Mode};
use crate::run_index::Index;
use crate::snapshot;
use apollo11_store::StoreError;
use std::path::Path;

/// Every snapshot file, oldest first, with what is wrong with it.
pub fn verify(fs: &dyn Fs, dir: &Path, index: &Index) -> Result<Vec<SnapshotReport>, StoreError> {
    let snapshots = dir.join("snapshots");
    let names = match fs.list(&snapshots) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            let context = format!("listing {}", snapshots.display());
            return Err(StoreError::io(context, e));
        }
    };
    let mut out = Vec::new();
    for name in names.into_iter().filter(|n| snapshot::is_snapshot(n)) {
        let path = snapshots.join(&name);
        let decoded = fs
            .open(&path, Mode::Read)
            .and_then(|f| f.read_all())
            .map_err(|e| e.to_string())
            .and_then(|b| snapshot::decode(&b));
        let (watermark, problem) = match decoded {
            Ok(file) => {
                let watermark = file.snapshot.watermark.0;
                (Some(watermark), problem(&file, index)?)
            }
            Err(reason) => (None, Some(reason)),
        };
        out.push(SnapshotReport {
            file: format!("snapshots/{name}"),
            watermark,
            problem,
        });
    }
    Ok(out)
}

fn problem(file: &snapshot::SnapshotFile, index: &Index) -> Result<Option<String>, StoreError> {
    let (watermark, last) = (file.snapshot.watermark.0, index.last_event_id);
    if watermark > last {
        return Ok(Some(format!(
            "covers events up to {watermark}, past the log's last event {last}"
        )));
    }
    let record_crc = index.watermark_crc(watermark)?;
    Ok(snapshot::foreign(file, record_crc))
}
