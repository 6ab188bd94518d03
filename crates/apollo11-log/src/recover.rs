//! Reading a data directory's segments back: what is committed, where a torn tail starts,
//! and what damage refuses an open. Shared by the writing open, the read-only open, verify
//! and repair, so they can never disagree about what the log holds.

use crate::fs::{Fs, FsFile, Mode};
use crate::index::{Index, SegmentIndex};
use crate::segment::{complete_batch_after, parse_file_name, scan, Scanned};
use apollo11_store::StoreError;
use std::path::Path;
use std::sync::Arc;

/// Damage at a place in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// File name, relative to the data directory.
    pub file: String,
    /// Byte offset.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

impl Damage {
    /// The store error for this damage.
    pub fn into_error(self) -> StoreError {
        StoreError::Corrupted {
            file: self.file,
            offset: self.offset,
            reason: self.reason,
        }
    }
}

/// What stops a segment's scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Only zeros after the last committed batch.
    Clean,
    /// Uncommitted or damaged bytes after the last committed batch of the last segment, with
    /// no complete batch after them: what a crash mid-write leaves. `offset` is where the
    /// committed data ends; `bytes` is how much non-zero data follows.
    Torn {
        offset: u64,
        bytes: u64,
        reason: String,
    },
    /// Damage that no crash can explain: refuse to open.
    Damaged(Damage),
}

/// One segment as found on disk.
pub struct Inspected {
    /// File name, relative to the data directory.
    pub name: String,
    /// The open file.
    pub file: Arc<dyn FsFile>,
    /// Its committed content (`None` when even the header is unreadable).
    pub scanned: Option<Scanned>,
    /// How its scan ended.
    pub verdict: Verdict,
    /// Whether its content came from its index file rather than a scan (then `last` is not
    /// used: an index file of the last segment is saved only at a clean close).
    pub from_index: bool,
}

/// Segment file names in `segments/`, in event-id order.
pub fn segment_names(fs: &dyn Fs, dir: &Path) -> Result<Vec<String>, StoreError> {
    let segments = dir.join("segments");
    let names = fs
        .list(&segments)
        .map_err(|e| StoreError::io(format!("listing {}", segments.display()), e))?;
    Ok(names
        .into_iter()
        .filter(|n| parse_file_name(n).is_some())
        .collect())
}

/// Reads and classifies one segment. With `use_index`, a segment whose index file matches
/// it is taken from that file and not read.
pub fn inspect(
    fs: &dyn Fs,
    dir: &Path,
    name: &str,
    last: bool,
    mode: Mode,
    use_index: bool,
) -> Result<Inspected, StoreError> {
    let rel = format!("segments/{name}");
    let path = dir.join(&rel);
    let file: Arc<dyn FsFile> = fs
        .open(&path, mode)
        .map_err(|e| StoreError::io(format!("opening {}", path.display()), e))?
        .into();
    let base = parse_file_name(name).expect("listed names parse");
    let indexed = use_index.then(|| crate::idx::load(fs, &path, file.as_ref(), base));
    if let Some(Some(scanned)) = indexed {
        return Ok(Inspected {
            name: rel,
            file,
            scanned: Some(scanned),
            verdict: Verdict::Clean,
            from_index: true,
        });
    }
    let bytes = file
        .read_all()
        .map_err(|e| StoreError::io(format!("reading {}", path.display()), e))?;
    let damaged = |offset: u64, reason: String| {
        Verdict::Damaged(Damage {
            file: rel.clone(),
            offset,
            reason,
        })
    };
    let (scanned, verdict) = match scan(&bytes) {
        Err(stop) if last && complete_batch_after(&bytes, 0).is_none() => {
            let bytes = nonzero_len(&bytes, 0);
            (
                None,
                Verdict::Torn {
                    offset: 0,
                    bytes,
                    reason: stop.reason,
                },
            )
        }
        Err(stop) => (None, damaged(stop.offset, stop.reason)),
        Ok(scanned) => {
            let verdict = match &scanned.stop {
                None => Verdict::Clean,
                Some(stop) if !last => damaged(stop.offset, stop.reason.clone()),
                Some(stop) => match complete_batch_after(&bytes, stop.offset) {
                    Some(at) => damaged(
                        stop.offset,
                        format!("{}; a complete batch follows at offset {at}, so this is damage, not a torn write", stop.reason),
                    ),
                    None => Verdict::Torn { offset: scanned.end, bytes: nonzero_len(&bytes, scanned.end), reason: stop.reason.clone() },
                },
            };
            if scanned.base != base {
                (
                    None,
                    damaged(
                        0,
                        format!(
                            "header says base event id {}, file name says {base}",
                            scanned.base
                        ),
                    ),
                )
            } else {
                (Some(scanned), verdict)
            }
        }
    };
    Ok(Inspected {
        name: rel,
        file,
        scanned,
        verdict,
        from_index: false,
    })
}

/// Bytes from `from` to the last non-zero byte.
fn nonzero_len(bytes: &[u8], from: u64) -> u64 {
    let from = from as usize;
    bytes[from.min(bytes.len())..]
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |p| p as u64 + 1)
}

/// Adds a segment's committed events to the index, checking that ids continue from the
/// previous segment and that every run's seqs are consecutive.
pub fn add_to_index(index: &mut Index, inspected: &Inspected) -> Result<(), StoreError> {
    let Some(scanned) = &inspected.scanned else {
        return Ok(());
    };
    let damaged = |offset: u64, reason: String| {
        Damage {
            file: inspected.name.clone(),
            offset,
            reason,
        }
        .into_error()
    };
    if scanned.base != index.last_event_id + 1 {
        return Err(damaged(
            0,
            format!(
                "segment starts at event {}, but the previous one ends at {}",
                scanned.base, index.last_event_id
            ),
        ));
    }
    let mut segment =
        SegmentIndex::new(scanned.base, inspected.name.clone(), inspected.file.clone());
    segment.offsets.reserve(scanned.events.len());
    segment.slots.reserve(scanned.events.len());
    index.segments.push(segment);
    // Runs are looked up once per segment, not once per event (and only runs with a
    // committed event get a slot: a torn batch may name others).
    let mut slots: Vec<Option<u32>> = vec![None; scanned.runs.len()];
    for (i, e) in scanned.events.iter().enumerate() {
        let slot =
            *slots[e.run as usize].get_or_insert_with(|| index.slot(&scanned.runs[e.run as usize]));
        let event_id = scanned.base + i as u64;
        let expected = index.slot_last_seq(slot) + 1;
        if e.seq != expected {
            let run_id = &scanned.runs[e.run as usize];
            let reason = format!(
                "event {event_id} of run `{run_id}` has seq {}, expected {expected}",
                e.seq
            );
            return Err(damaged(u64::from(e.offset), reason));
        }
        index.push_to_slot(slot, event_id, e.offset);
    }
    Ok(())
}
