//! Snapshot files: `snapshots/<watermark>.snap` holding
//! `[magic "A11SNAP\0"][version u32][watermark u64][len u64][crc32 u32][state]`, the CRC
//! covering version, watermark, length and state. Written atomically; a damaged snapshot is
//! skipped for an older one (or a full replay).

use crate::fs::Fs;
use apollo11_store::{Snapshot, StoreError};
use std::path::Path;

const MAGIC: &[u8; 8] = b"A11SNAP\0";
const VERSION: u32 = 1;
const HEADER_BYTES: usize = 32;

/// File name of the snapshot covering events up to `watermark`.
pub fn file_name(watermark: u64) -> String {
    format!("{watermark:020}.snap")
}

/// Whether a file name is a snapshot's.
pub fn is_snapshot(name: &str) -> bool {
    watermark_of(name).is_some()
}

/// The watermark a snapshot's file name states.
pub fn watermark_of(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".snap")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Removes the snapshots of `dir` that cover events past `last`: events a crash took before
/// they were durable (in buffered mode). Once the log grows past them again they would
/// describe other events.
pub fn remove_past(fs: &dyn Fs, dir: &Path, last: u64) -> Result<(), StoreError> {
    let io = |what: &str, path: &Path, e| StoreError::io(format!("{what} {}", path.display()), e);
    let names = fs.list(dir).map_err(|e| io("listing", dir, e))?;
    let stale: Vec<_> = names
        .iter()
        .filter(|n| watermark_of(n).is_some_and(|w| w > last))
        .collect();
    for name in &stale {
        let path = dir.join(name);
        fs.remove(&path).map_err(|e| io("removing", &path, e))?;
    }
    if !stale.is_empty() {
        fs.sync_dir(dir).map_err(|e| io("syncing", dir, e))?;
    }
    Ok(())
}

/// Encodes a snapshot file.
pub fn encode(snapshot: &Snapshot) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + snapshot.state.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&snapshot.watermark.0.to_le_bytes());
    out.extend_from_slice(&(snapshot.state.len() as u64).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[8..28]);
    crc.update(&snapshot.state);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&snapshot.state);
    out
}

/// Decodes and checks a snapshot file.
pub fn decode(bytes: &[u8]) -> Result<Snapshot, String> {
    if bytes.len() < HEADER_BYTES || &bytes[..8] != MAGIC {
        return Err("not a snapshot (bad magic or too short)".into());
    }
    let field = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let (watermark, len) = (field(12), field(20));
    let stored = u32::from_le_bytes(bytes[28..32].try_into().expect("4 bytes"));
    if len != (bytes.len() - HEADER_BYTES) as u64 {
        return Err(format!(
            "says {len} bytes of state, holds {}",
            bytes.len() - HEADER_BYTES
        ));
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(&bytes[8..28]);
    crc.update(&bytes[HEADER_BYTES..]);
    if crc.finalize() != stored {
        return Err("checksum mismatch".into());
    }
    if version != VERSION {
        return Err(format!(
            "snapshot format version {version}; this build reads {VERSION}"
        ));
    }
    Ok(Snapshot {
        watermark: apollo11_core::EventId(watermark),
        state: bytes[HEADER_BYTES..].to_vec(),
    })
}

/// The error for saving a snapshot past the end of the log.
pub fn beyond_log(watermark: u64, last: u64) -> StoreError {
    StoreError::Invalid {
        what: "snapshot".into(),
        reason: format!("watermark {watermark} is past the last event {last}"),
    }
}
