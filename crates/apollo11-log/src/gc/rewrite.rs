//! A sealed segment without some runs: its other events' records copied as they are (each
//! keeps its CRC), each batch closed by a commit record naming what is left of it (a batch
//! left empty is gone), under a version 2 header covering the ids the segment covered.

use crate::cold;
use crate::durable_files::sync_dir_of;
use crate::file_system::{Fs, Mode};
use crate::format::record::{append_commit, parse, Parsed};
use crate::format::segment::{compacted_header, read_header, scan, Scanned, Stop};
use crate::run_index::SegmentIndex;
use apollo11_store::StoreError;
use std::path::{Path, PathBuf};

/// The segment `bytes` (sealed, scanning cleanly to its end) without the events of the runs
/// `dropped` says; `None` when it holds none of them (so a segment rewritten already is left
/// as it is).
///
/// # Errors
///
/// Where and why the segment does not scan cleanly: damage is never rewritten.
pub fn without_runs(bytes: &[u8], dropped: &dyn Fn(&str) -> bool) -> Result<Option<Vec<u8>>, Stop> {
    let scanned = scan(bytes)?;
    if let Some(stop) = scanned.stop {
        return Err(stop);
    }
    let drops: Vec<bool> = scanned.runs.iter().map(|r| dropped(r)).collect();
    if !drops.contains(&true) {
        return Ok(None);
    }
    let header = read_header(bytes).expect("a segment that scans has a header");
    let mut out = compacted_header(scanned.base, covers_to(&scanned));
    let mut batch = Vec::new();
    let mut kept = 0u32;
    let mut events = scanned.events.iter().peekable();
    let mut at = header.len;
    while (at as u64) < scanned.end {
        let Parsed::Record { next, .. } = parse(bytes, at) else {
            unreachable!("a segment that scans cleanly parses up to its end");
        };
        match events.peek() {
            Some(e) if e.offset as usize == at => {
                if !drops[e.run as usize] {
                    batch.extend_from_slice(&bytes[at..next]);
                    kept += 1;
                }
                events.next();
            }
            // A commit record: the batch it closed ends here.
            _ if kept > 0 => {
                let len = batch.len() as u32;
                out.append(&mut batch);
                append_commit(&mut out, kept, len);
                kept = 0;
            }
            _ => {}
        }
        at = next;
    }
    Ok(Some(out))
}

/// The last id a segment covers: its header's, or (version 1) its last event's.
fn covers_to(scanned: &Scanned) -> u64 {
    let last = scanned.events.last().map_or(scanned.base, |e| e.id);
    scanned.covers_to.unwrap_or(last)
}

/// The name a rewritten segment is written under before the swap renames it over the
/// segment.
pub fn gc_path(segment: &Path) -> PathBuf {
    segment.with_extension("seg.gc")
}

/// A segment rewritten as `<segment>.seg.gc`, synced, waiting to be renamed over it.
pub struct Rewritten {
    /// The segment's position in the index.
    pub position: usize,
    /// The segment's path.
    pub path: PathBuf,
    /// Its name, relative to the data directory.
    pub name: String,
    /// What the rewritten segment holds.
    pub scanned: Scanned,
}

impl Rewritten {
    /// Opens the rewritten segment (before it is renamed over the segment: the file stays
    /// the same one): its index entry (its offsets and slots still empty) and what it holds.
    ///
    /// # Errors
    ///
    /// [`StoreError::Io`] naming the file.
    pub fn open(&self, fs: &dyn Fs) -> Result<(SegmentIndex, Scanned), StoreError> {
        let path = gc_path(&self.path);
        let opened = cold::open_segment(fs, &path, Mode::Read)
            .map_err(|e| StoreError::io(format!("opening {}", path.display()), e))?;
        let mut segment = SegmentIndex::new(self.scanned.base, self.name.clone(), opened.file());
        segment.cold = opened.stored_bytes().is_some();
        Ok((segment, self.scanned.clone()))
    }
}

/// Renames `<segment>.seg.gc` over the segment at `path`.
///
/// # Errors
///
/// [`StoreError::Io`] naming the file.
pub fn rename_over(fs: &dyn Fs, path: &Path) -> Result<(), StoreError> {
    let from = gc_path(path);
    fs.rename(&from, path)
        .map_err(|e| StoreError::io(format!("renaming {}", from.display()), e))
}

/// Rewrites each of `segments` (`(position, name, base)`) without the runs `dropped` says
/// (see [`write_without`]), then removes their index files, durably: an index file recording
/// more than its rewritten segment holds would be evidence of lost data.
///
/// # Errors
///
/// As [`write_without`].
pub fn write_all(
    fs: &dyn Fs,
    dir: &Path,
    segments: &[(usize, String, u64)],
    dropped: &dyn Fn(&str) -> bool,
) -> Result<Vec<Rewritten>, StoreError> {
    let mut out = Vec::with_capacity(segments.len());
    for (position, name, _) in segments {
        let path = dir.join(name);
        if let Some(scanned) = write_without(fs, &path, name, dropped)? {
            out.push(Rewritten {
                position: *position,
                path,
                name: name.clone(),
                scanned,
            });
        }
    }
    remove_index_files(fs, out.iter().map(|r| r.path.as_path()))?;
    Ok(out)
}

/// Removes the index files of `segments`, the directory synced if any was there.
///
/// # Errors
///
/// [`StoreError::Io`] when an index file there cannot be removed or the directory sync fails.
pub fn remove_index_files<'a>(
    fs: &dyn Fs,
    segments: impl Iterator<Item = &'a Path>,
) -> Result<(), StoreError> {
    let mut last = None;
    for path in segments {
        if crate::format::index_file::remove(fs, path)? {
            last = Some(path);
        }
    }
    last.map_or(Ok(()), |path| sync_dir_of(fs, path))
}

/// Writes the segment at `path` without the runs `dropped` says to `<segment>.seg.gc`,
/// synced, compressed again if the segment was (cold). Returns what the rewritten segment
/// holds, or `None` when the segment holds none of those runs (nothing written).
///
/// # Errors
///
/// [`StoreError::Corrupted`] naming the segment when it does not scan cleanly;
/// [`StoreError::Io`] naming the file when a read, write or sync fails.
pub fn write_without(
    fs: &dyn Fs,
    path: &Path,
    name: &str,
    dropped: &dyn Fn(&str) -> bool,
) -> Result<Option<Scanned>, StoreError> {
    let io = |what: &str, path: &Path, e| StoreError::io(format!("{what} {}", path.display()), e);
    let opened = cold::open_segment(fs, path, Mode::Read).map_err(|e| io("opening", path, e))?;
    let (bytes, broken) = opened.read_intact().map_err(|e| io("reading", path, e))?;
    let refused = |offset: u64, reason: String| StoreError::Corrupted {
        file: name.to_owned(),
        offset,
        reason: format!("{reason}; gc leaves the segment as it is"),
    };
    if let Some(broken) = broken {
        return Err(refused(broken.offset, broken.reason));
    }
    let plain = match without_runs(&bytes, dropped) {
        Ok(Some(plain)) => plain,
        Ok(None) => return Ok(None),
        Err(stop) => return Err(refused(stop.offset, stop.reason)),
    };
    let scanned = scan(&plain).map_err(|stop| refused(stop.offset, stop.reason))?;
    let stored = match opened.stored_bytes() {
        Some(_) => cold::compress_checked(&plain).map_err(|e| io("compressing", path, e))?,
        None => plain,
    };
    let target = gc_path(path);
    let _ = fs.remove(&target);
    let file = fs
        .open(&target, Mode::CreateNew)
        .map_err(|e| io("creating", &target, e))?;
    file.write_all_at(&stored, 0)
        .and_then(|()| file.sync_data())
        .map_err(|e| io("writing", &target, e))?;
    Ok(Some(scanned))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::codec::encode_event;
    use crate::format::record::{append_record, KIND_EVENT};
    use crate::format::segment::{header, COMPACTED_HEADER_BYTES, ID_MAX};
    use apollo11_core::{Event, EventId, EventKind, Payload, RunId, Seq};

    fn event(id: u64, run: &str, seq: u32) -> Event {
        Event {
            event_id: EventId(id),
            run_id: RunId::from(run),
            seq: Seq(seq),
            step: None,
            kind: EventKind::Started,
            attempt: 1,
            at_ms: id,
            instance: "i".into(),
            payload: Payload::inline(format!("p{id}")),
        }
    }

    /// A version 1 segment from 5 of batches of `(run, seq)` events, ids from 5 on.
    fn segment(batches: &[&[(&str, u32)]]) -> Vec<u8> {
        let mut out = header(5);
        let mut id = 5;
        for batch in batches {
            let start = out.len();
            for &(run, seq) in *batch {
                append_record(&mut out, KIND_EVENT, |b| {
                    encode_event(&event(id, run, seq), b).unwrap()
                });
                id += 1;
            }
            let len = (out.len() - start) as u32;
            append_commit(&mut out, batch.len() as u32, len);
        }
        out
    }

    fn ids_and_runs(scanned: &Scanned) -> Vec<(u64, &str)> {
        let run = |e: &crate::format::segment::Indexed| scanned.runs[e.run as usize].as_str();
        scanned.events.iter().map(|e| (e.id, run(e))).collect()
    }

    #[test]
    fn the_rewritten_segment_keeps_the_other_runs_ids_and_covers_the_same_ids() {
        let bytes = segment(&[&[("a", 1), ("b", 1)], &[("a", 2)], &[("b", 2), ("a", 3)]]);
        let drop_a = |run: &str| run == "a";
        let rewritten = without_runs(&bytes, &drop_a).unwrap().unwrap();
        let scanned = scan(&rewritten).unwrap();
        assert_eq!(scanned.stop, None);
        assert_eq!((scanned.base, scanned.covers_to), (5, Some(9)));
        assert_eq!(ids_and_runs(&scanned), [(6, "b"), (8, "b")]);
        assert_eq!(scanned.end as usize, rewritten.len());
        assert!(scanned.events[0].offset as usize == COMPACTED_HEADER_BYTES);
        // Rewriting it again (or for a run it lacks) changes nothing.
        assert_eq!(without_runs(&rewritten, &drop_a).unwrap(), None);
        assert_eq!(without_runs(&bytes, &|r: &str| r == "c").unwrap(), None);
        // Without every run: the header alone, still covering its ids.
        let empty = without_runs(&rewritten, &|_: &str| true).unwrap().unwrap();
        let scanned = scan(&empty).unwrap();
        assert_eq!((scanned.events.len(), scanned.covers_to), (0, Some(9)));
        assert_eq!(empty.len(), COMPACTED_HEADER_BYTES);
    }

    #[test]
    fn a_compacted_segments_ids_must_increase_within_what_it_covers() {
        let bytes = segment(&[&[("a", 1), ("b", 1)]]);
        let mut rewritten = without_runs(&bytes, &|r: &str| r == "a").unwrap().unwrap();
        // Narrow what the header covers to 5..=5: event 6 is out of it.
        rewritten[..COMPACTED_HEADER_BYTES].copy_from_slice(&compacted_header(5, 5));
        let scanned = scan(&rewritten).unwrap();
        let stop = scanned.stop.expect("refused");
        assert_eq!(stop.offset as usize, COMPACTED_HEADER_BYTES);
        assert_eq!(stop.reason, "event id 6 where one in 5..=5 was expected");
        // A header covering ids that end before they start is no header.
        rewritten[..COMPACTED_HEADER_BYTES].copy_from_slice(&compacted_header(5, 4));
        let refused = scan(&rewritten).unwrap_err();
        assert!(
            refused.reason.contains("ends before it starts"),
            "{}",
            refused.reason
        );
        // Nor one covering ids up to the largest u64, whose next segment's base would
        // overflow (found by the segment fuzz target), nor one starting past the largest id.
        for (base, covers_to) in [(5, u64::MAX), (5, ID_MAX + 1), (ID_MAX + 1, ID_MAX + 2)] {
            rewritten[..COMPACTED_HEADER_BYTES].copy_from_slice(&compacted_header(base, covers_to));
            let refused = scan(&rewritten).unwrap_err();
            assert!(
                refused.reason.contains("largest event id"),
                "{}",
                refused.reason
            );
        }
    }

    #[test]
    fn damage_is_never_rewritten() {
        let mut bytes = segment(&[&[("a", 1)], &[("b", 1)]]);
        let at = bytes.len() - 3;
        bytes[at] ^= 1;
        assert!(without_runs(&bytes, &|r: &str| r == "a").is_err());
    }
}
