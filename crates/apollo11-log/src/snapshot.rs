//! Snapshot files: `snapshots/<watermark>.snap`. Version 2 holds
//! `[magic "A11SNAP\0"][version u32][watermark u64][durability u32][watermark record crc u32]
//! [len u64][crc32 u32][state]`, the CRC covering everything from the version on (the
//! magic excepted). Version 1 (still read) has neither the durability nor the record CRC.
//! Written atomically; a damaged snapshot is skipped for an older one (or a full replay).
//!
//! A snapshot identifies the log state it covers by the stored CRC of its watermark event's
//! record, so one copied from another log is never loaded; and it says which durability
//! wrote it, so one written in `fsync` mode past the end of the log proves that committed
//! events are missing (in `buffered` mode a crash may legitimately take them).

use crate::file_system::Fs;
use crate::Durability;
use apollo11_store::{Snapshot, StoreError};
use std::path::Path;

const MAGIC: &[u8; 8] = b"A11SNAP\0";
const VERSION: u32 = 2;
const V1_HEADER_BYTES: usize = 32;
const HEADER_BYTES: usize = 40;

/// A snapshot file's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotFile {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// The durability of the log that wrote it (`None` for version 1).
    pub durability: Option<Durability>,
    /// The stored CRC of the watermark event's record (`None` for version 1; 0 at
    /// watermark 0, where there is no record).
    pub record_crc: Option<u32>,
}

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

/// Encodes a snapshot file written by a log of `durability` whose watermark event's record
/// has the stored CRC `record_crc`.
pub fn encode(snapshot: &Snapshot, durability: Durability, record_crc: u32) -> Vec<u8> {
    let code: u32 = match durability {
        Durability::Fsync => 1,
        Durability::Buffered => 2,
    };
    let mut out = Vec::with_capacity(HEADER_BYTES + snapshot.state.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&snapshot.watermark.0.to_le_bytes());
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&record_crc.to_le_bytes());
    out.extend_from_slice(&(snapshot.state.len() as u64).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[8..]);
    crc.update(&snapshot.state);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&snapshot.state);
    out
}

/// Decodes and checks a snapshot file of version 1 or 2.
pub fn decode(bytes: &[u8]) -> Result<SnapshotFile, String> {
    if bytes.len() < V1_HEADER_BYTES || &bytes[..8] != MAGIC {
        return Err("not a snapshot (bad magic or too short)".into());
    }
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    // (where the length field is, where the state starts)
    let (len_at, header) = match u32_at(8) {
        1 => (20, V1_HEADER_BYTES),
        VERSION if bytes.len() >= HEADER_BYTES => (28, HEADER_BYTES),
        other => {
            return Err(format!(
                "snapshot format version {other} (or a damaged header); this build reads 1 and \
                 {VERSION}"
            ))
        }
    };
    let len = u64_at(len_at);
    if len != (bytes.len() - header) as u64 {
        return Err(format!(
            "says {len} bytes of state, holds {}",
            bytes.len() - header
        ));
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(&bytes[8..header - 4]);
    crc.update(&bytes[header..]);
    if crc.finalize() != u32_at(header - 4) {
        return Err("checksum mismatch".into());
    }
    let (durability, record_crc) = match header {
        V1_HEADER_BYTES => (None, None),
        _ => {
            let durability = match u32_at(20) {
                1 => Durability::Fsync,
                2 => Durability::Buffered,
                other => return Err(format!("unknown durability {other}")),
            };
            (Some(durability), Some(u32_at(24)))
        }
    };
    Ok(SnapshotFile {
        snapshot: Snapshot {
            watermark: apollo11_core::EventId(u64_at(12)),
            state: bytes[header..].to_vec(),
        },
        durability,
        record_crc,
    })
}

/// Whether the snapshot proves that committed events are missing from a log whose last
/// event is `last`: written in `fsync` durability, it covers only events that were synced.
pub fn proves_loss(file: &SnapshotFile, last: u64) -> bool {
    file.durability == Some(Durability::Fsync) && file.snapshot.watermark.0 > last
}

/// Why the snapshot does not belong to a log whose watermark event's record has the stored
/// CRC `record_crc` (`None` when it does, or cannot say: version 1, watermark 0, or a
/// watermark event `gc` moved to an archive, whose `record_crc` is `None`).
pub fn foreign(file: &SnapshotFile, record_crc: Option<u32>) -> Option<String> {
    let (saved, record_crc) = (file.record_crc?, record_crc?);
    (file.snapshot.watermark.0 > 0 && saved != record_crc).then(|| {
        format!(
            "taken from another log: it was saved over an event {} whose record has CRC \
             {saved:08x}, this log's has {record_crc:08x}",
            file.snapshot.watermark
        )
    })
}

/// The error for saving a snapshot past the end of the log.
pub fn beyond_log(watermark: u64, last: u64) -> StoreError {
    StoreError::Invalid {
        what: "snapshot".into(),
        reason: format!("watermark {watermark} is past the last event {last}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo11_core::EventId;

    fn sample() -> Snapshot {
        Snapshot {
            watermark: EventId(7),
            state: b"seven".to_vec(),
        }
    }

    #[test]
    fn a_snapshot_reads_back_with_its_durability_and_identity_and_any_flip_or_cut_is_refused() {
        for durability in [Durability::Fsync, Durability::Buffered] {
            let bytes = encode(&sample(), durability, 0xdead_beef);
            let back = decode(&bytes).unwrap();
            assert_eq!(back.snapshot, sample());
            assert_eq!(back.durability, Some(durability));
            assert_eq!(back.record_crc, Some(0xdead_beef));
            for (what, bad) in crate::damage::damaged(&bytes) {
                assert!(decode(&bad).is_err(), "{what}");
            }
        }
    }

    #[test]
    fn a_version_1_snapshot_reads_without_durability_or_identity() {
        let state = b"v1".to_vec();
        let mut v1 = Vec::new();
        v1.extend_from_slice(MAGIC);
        v1.extend_from_slice(&1u32.to_le_bytes());
        v1.extend_from_slice(&5u64.to_le_bytes());
        v1.extend_from_slice(&(state.len() as u64).to_le_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&v1[8..28]);
        crc.update(&state);
        v1.extend_from_slice(&crc.finalize().to_le_bytes());
        v1.extend_from_slice(&state);
        let back = decode(&v1).unwrap();
        assert_eq!(
            (back.snapshot.watermark, back.snapshot.state.clone()),
            (EventId(5), state)
        );
        assert_eq!((back.durability, back.record_crc), (None, None));
        assert!(
            !proves_loss(&back, 1),
            "a version 1 snapshot says nothing of its durability"
        );
        assert_eq!(foreign(&back, Some(1)), None, "nor of its log");
    }

    #[test]
    fn only_an_fsync_snapshot_past_the_end_proves_loss_and_only_a_wrong_crc_is_foreign() {
        let fsync = decode(&encode(&sample(), Durability::Fsync, 9)).unwrap();
        let buffered = decode(&encode(&sample(), Durability::Buffered, 9)).unwrap();
        assert!(proves_loss(&fsync, 6));
        assert!(!proves_loss(&fsync, 7), "the watermark event is there");
        assert!(!proves_loss(&buffered, 6));
        assert_eq!(foreign(&fsync, Some(9)), None);
        assert!(foreign(&fsync, Some(10)).unwrap().contains("another log"));
    }
}
