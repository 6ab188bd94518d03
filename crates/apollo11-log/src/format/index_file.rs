//! Index files: what a segment holds (each event's id, record offset, run and seq), saved next
//! to it as `<segment>.idx` once the log has rolled past it, and for the last segment when
//! the log is closed cleanly, so that opening the log loads them instead of reading and
//! checking every segment. A writing open removes the last segment's index file, durably,
//! before anything is appended to it.
//!
//! An index file is also evidence. It is saved only after the data it describes was synced,
//! so a segment holding less than its index file records has lost committed data; and one
//! saved when the log moved past its segment ([`Kind::Sealed`]) proves that the next
//! segment had been created, durably, before it.
//!
//! An index file is derived data, saved only once its segment's data is synced. It is
//! written without a sync itself (a crash may leave it missing, short or garbled) and
//! trusted only when its own CRC holds, when it names the segment's base, when the
//! segment's size is the one it records, when zeros follow the data end, and when the
//! segment's fingerprint is the one it recorded: the stored CRC of the last event record
//! (which covers that event's id, run and payload) and the last 16 bytes of data (the end of
//! the final commit record, its CRC included). Otherwise the segment is scanned, as it always was. The records
//! themselves are still checked: every read checks their CRCs, and `verify` reads them all.

use crate::file_system::{Fs, FsFile, Mode};
use crate::format::segment::{Indexed, Scanned, HEADER_BYTES};
use apollo11_store::StoreError;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"A11INDEX";
/// Version 3 adds the segment's `covers to` and each event's id (a compacted segment's ids
/// skip); version 2 added the kind. Versions 1 (read as [`Kind::Unknown`]) and 2 are still
/// read, their ids consecutive from the base.
const VERSION: u32 = 3;

/// When an index file was saved, which says what else it proves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Saved once the log had moved past the segment (at a roll, or at a writing open for a
    /// segment that is not the last): a later segment existed, durably.
    Sealed,
    /// Saved for the last segment at a clean close.
    Closed,
    /// A version 1 file, which does not say.
    Unknown,
}

impl Kind {
    fn code(self) -> u32 {
        match self {
            Kind::Sealed => 1,
            Kind::Closed => 2,
            Kind::Unknown => 0,
        }
    }

    /// How a report names it.
    pub fn saved_when(self) -> &'static str {
        match self {
            Kind::Sealed => "saved when the log moved past the segment",
            Kind::Closed => "saved at a clean close",
            Kind::Unknown => "saved after its data was synced",
        }
    }
}

/// An index file that passed its own checks (CRC, magic, version, layout): what it records.
#[derive(Debug)]
pub struct Recorded {
    /// When it was saved.
    pub kind: Kind,
    /// The segment's content as it was then.
    pub scanned: Scanned,
    size: u64,
    fingerprint: [u8; FINGERPRINT],
}
/// Bytes of a segment's fingerprint: the last event record's CRC, then the last 16 bytes.
const FINGERPRINT: usize = 4 + TAIL;
/// Bytes at the end of a segment's data that its fingerprint holds.
const TAIL: usize = 16;

/// The index file of a segment file.
pub fn path_of(segment: &Path) -> PathBuf {
    segment.with_extension("idx")
}

/// Saves the index of a segment whose data is synced, best effort: a failure only means the
/// next open scans the segment.
pub fn save(fs: &dyn Fs, segment: &Path, file: &dyn FsFile, scanned: &Scanned, kind: Kind) {
    let (Ok(fingerprint), Ok(size)) = (fingerprint(file, scanned), file.size()) else {
        return;
    };
    let path = path_of(segment);
    let tmp = path.with_extension("idx.tmp");
    let _ = fs.remove(&tmp);
    let written = fs.open(&tmp, Mode::CreateNew).and_then(|f| {
        f.write_all_at(&encode(scanned, kind, size, &fingerprint), 0)?;
        drop(f);
        fs.rename(&tmp, &path)
    });
    if written.is_err() {
        let _ = fs.remove(&tmp);
    }
}

/// Reads the index file at `path`: `Ok(None)` when there is none, `Err` with what is wrong
/// when it fails its own checks (it is then ignored).
pub fn read(fs: &dyn Fs, path: &Path) -> Result<Option<Recorded>, String> {
    let bytes = match fs.open(path, Mode::Read).and_then(|f| f.read_all()) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("unreadable: {e}")),
    };
    decode(&bytes).map(Some)
}

/// Why `recorded` does not describe the segment `file` as it is now (`None` when it does;
/// see the module's notes).
pub fn mismatch(recorded: &Recorded, file: &dyn FsFile) -> Option<String> {
    let scanned = &recorded.scanned;
    let size = match file.size() {
        Ok(size) => size,
        Err(e) => return Some(format!("segment unreadable: {e}")),
    };
    if size != recorded.size {
        return Some(format!(
            "records a segment of {} bytes, the segment has {size}",
            recorded.size
        ));
    }
    if fingerprint(file, scanned).ok() != Some(recorded.fingerprint) {
        return Some("the segment's last records differ from those it recorded".into());
    }
    if !zeros_follow(file, scanned.end, size).unwrap_or(false) {
        return Some(format!(
            "the segment holds data past offset {}, where it recorded the end",
            scanned.end
        ));
    }
    None
}

/// Removes a segment's index file; true if there was one.
///
/// # Errors
///
/// [`StoreError::Io`] naming the index file when it is there but cannot be removed (only
/// its absence is no error: a file left would describe a segment it may no longer match).
pub fn remove(fs: &dyn Fs, segment: &Path) -> Result<bool, StoreError> {
    let path = path_of(segment);
    match fs.remove(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StoreError::io(format!("removing {}", path.display()), e)),
    }
}

/// Whether the bytes after the data end (up to 4 KiB of them) are zeros, as a clean close
/// leaves them: anything written there since is for a scan to judge.
fn zeros_follow(file: &dyn FsFile, end: u64, size: u64) -> std::io::Result<bool> {
    let mut next = vec![0u8; (size - end).min(4096) as usize];
    file.read_exact_at(&mut next, end)?;
    Ok(next.iter().all(|&b| b == 0))
}

fn fingerprint(file: &dyn FsFile, scanned: &Scanned) -> std::io::Result<[u8; FINGERPRINT]> {
    let last_event = scanned.events.last().map(|e| u64::from(e.offset));
    let last_event = last_event.filter(|&at| scanned.end >= at + TAIL as u64);
    let Some(at) = last_event.filter(|&at| at >= HEADER_BYTES as u64) else {
        return Err(std::io::Error::other(
            "a segment without events has no fingerprint",
        ));
    };
    let mut print = [0u8; FINGERPRINT];
    file.read_exact_at(&mut print[..4], at + 4)?;
    file.read_exact_at(&mut print[4..], scanned.end - TAIL as u64)?;
    Ok(print)
}

/// `[magic][version u32][kind u32][base u64][covers to u64, 0: none][end u64][size u64]
/// [fingerprint 20][runs u32]([len u32][id])*[events u32]([id u64][offset u32][seq u32]
/// [run u32])*[crc32 of all before]`, little-endian (version 2 has no `covers to` nor ids,
/// version 1 no kind either).
fn encode(scanned: &Scanned, kind: Kind, size: u64, fingerprint: &[u8; FINGERPRINT]) -> Vec<u8> {
    let mut out = Vec::with_capacity(72 + scanned.events.len() * 20);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&kind.code().to_le_bytes());
    out.extend_from_slice(&scanned.base.to_le_bytes());
    out.extend_from_slice(&scanned.covers_to.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&scanned.end.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(fingerprint);
    out.extend_from_slice(&(scanned.runs.len() as u32).to_le_bytes());
    for run in &scanned.runs {
        out.extend_from_slice(&(run.len() as u32).to_le_bytes());
        out.extend_from_slice(run.as_bytes());
    }
    out.extend_from_slice(&(scanned.events.len() as u32).to_le_bytes());
    for e in &scanned.events {
        out.extend_from_slice(&e.id.to_le_bytes());
        for field in [e.offset, e.seq, e.run] {
            out.extend_from_slice(&field.to_le_bytes());
        }
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Reads fields off the front of a byte slice; every read fails cleanly past the end.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

fn decode(bytes: &[u8]) -> Result<Recorded, String> {
    let body = bytes.len().checked_sub(4).map(|at| bytes.split_at(at));
    let Some((body, _)) = body.filter(|(body, crc)| crc32fast::hash(body).to_le_bytes() == **crc)
    else {
        return Err(format!("fails its checksum ({} bytes)", bytes.len()));
    };
    let mut c = Cursor(body);
    if c.take(MAGIC.len()) != Some(MAGIC.as_slice()) {
        return Err("not an index file (bad magic)".into());
    }
    let version = c.u32();
    let kind = match version {
        Some(1) => Kind::Unknown,
        Some(2 | VERSION) => match c.u32() {
            Some(1) => Kind::Sealed,
            Some(2) => Kind::Closed,
            other => return Err(format!("unknown kind {other:?}")),
        },
        other => {
            return Err(format!(
                "index file version {other:?}; this build reads 1 to {VERSION}"
            ))
        }
    };
    let (scanned, size, fingerprint) = decode_body(c, body.len(), version == Some(VERSION))
        .ok_or("its fields are inconsistent")?;
    Ok(Recorded {
        kind,
        scanned,
        size,
        fingerprint,
    })
}

/// The fields after the kind; `with_ids`: version 3's `covers to` and event ids.
fn decode_body(
    mut c: Cursor<'_>,
    body_len: usize,
    with_ids: bool,
) -> Option<(Scanned, u64, [u8; FINGERPRINT])> {
    let base = c.u64()?;
    let covers_to = if with_ids { c.u64()? } else { 0 };
    let covers_to = (covers_to != 0).then_some(covers_to);
    let (end, size) = (c.u64()?, c.u64()?);
    if end > size || covers_to.is_some_and(|to| to < base) {
        return None;
    }
    let fingerprint = c.take(FINGERPRINT)?.try_into().ok()?;
    let run_count = c.u32()? as usize;
    let mut runs = Vec::with_capacity(run_count.min(body_len));
    for _ in 0..run_count {
        let len = c.u32()? as usize;
        runs.push(std::str::from_utf8(c.take(len)?).ok()?.to_owned());
    }
    let event_count = c.u32()? as usize;
    let mut events: Vec<Indexed> = Vec::with_capacity(event_count.min(body_len / 12));
    for i in 0..event_count {
        let id = if with_ids { c.u64()? } else { base + i as u64 };
        let (offset, seq, run) = (c.u32()?, c.u32()?, c.u32()?);
        // Records follow one another: an offset at or before the one before it (only a
        // forged CRC gets that far) would send reads backwards; ids as a scan checks them.
        let previous = events.last();
        let after_previous = previous.is_none_or(|p| offset > p.offset);
        let id_fits = match covers_to {
            None => id == base + i as u64,
            Some(to) => id <= to && previous.map_or(base, |p| p.id + 1) <= id,
        };
        if run as usize >= runs.len() || u64::from(offset) >= end || !after_previous || !id_fits {
            return None;
        }
        events.push(Indexed {
            id,
            offset,
            seq,
            run,
        });
    }
    let scanned = Scanned {
        base,
        covers_to,
        events,
        runs,
        end,
        stop: None,
    };
    c.0.is_empty().then_some((scanned, size, fingerprint))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Scanned {
        Scanned {
            base: 7,
            covers_to: None,
            events: vec![
                Indexed {
                    id: 7,
                    offset: 24,
                    seq: 3,
                    run: 0,
                },
                Indexed {
                    id: 8,
                    offset: 300,
                    seq: 1,
                    run: 1,
                },
            ],
            runs: vec!["a".into(), "bé".into()],
            end: 600,
            stop: None,
        }
    }

    /// Found by the `index_file` fuzz target (fuzz/regressions/index_file/): with a valid
    /// CRC, offsets out of order made a read subtract past zero.
    #[test]
    fn offsets_out_of_order_are_refused() {
        for second in [24, 20] {
            let mut scanned = sample();
            scanned.events[1].offset = second;
            let bytes = encode(&scanned, Kind::Sealed, 4096, &[9u8; FINGERPRINT]);
            assert!(decode(&bytes).is_err(), "offsets 24 then {second}");
        }
    }

    #[test]
    fn an_index_reads_back_and_any_damage_or_cut_is_refused() {
        let fingerprint = [9u8; FINGERPRINT];
        for kind in [Kind::Sealed, Kind::Closed] {
            let bytes = encode(&sample(), kind, 4096, &fingerprint);
            let back = decode(&bytes).expect("reads back");
            assert_eq!(format!("{:?}", back.scanned), format!("{:?}", sample()));
            assert_eq!(
                (back.kind, back.size, back.fingerprint),
                (kind, 4096, fingerprint)
            );
            for (what, bad) in crate::damage::damaged(&bytes) {
                assert!(decode(&bad).is_err(), "{what}");
            }
        }
    }

    /// The version 2 (or, without the kind, 1) encoding of `scanned`: version 3's without
    /// `covers to` and the events' ids.
    fn older(version: u32, scanned: &Scanned) -> Vec<u8> {
        let v3 = encode(scanned, Kind::Sealed, 4096, &[3u8; FINGERPRINT]);
        let body = &v3[..v3.len() - 4];
        let events_at = body.len() - scanned.events.len() * 20;
        let mut out = body[..24].to_vec();
        out.extend_from_slice(&body[32..events_at]);
        for entry in body[events_at..].chunks(20) {
            out.extend_from_slice(&entry[8..]);
        }
        out[8..12].copy_from_slice(&version.to_le_bytes());
        if version == 1 {
            out.drain(12..16);
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    #[test]
    fn versions_1_and_2_still_read_with_consecutive_ids() {
        for (version, kind) in [(1, Kind::Unknown), (2, Kind::Sealed)] {
            let back = decode(&older(version, &sample())).expect("an older version reads");
            assert_eq!(back.kind, kind, "version {version}");
            assert_eq!(format!("{:?}", back.scanned), format!("{:?}", sample()));
        }
    }

    #[test]
    fn a_compacted_segments_ids_read_back_and_must_increase_within_what_it_covers() {
        let mut sparse = sample();
        sparse.covers_to = Some(20);
        sparse.events[0].id = 9;
        sparse.events[1].id = 20;
        let back = decode(&encode(&sparse, Kind::Sealed, 4096, &[1; FINGERPRINT])).unwrap();
        assert_eq!(format!("{:?}", back.scanned), format!("{:?}", sparse));
        for (first, second) in [(6, 20), (9, 9), (12, 9), (9, 21)] {
            sparse.events[0].id = first;
            sparse.events[1].id = second;
            let bytes = encode(&sparse, Kind::Sealed, 4096, &[1; FINGERPRINT]);
            assert!(decode(&bytes).is_err(), "ids {first}, {second} in 7..=20");
        }
    }

    #[test]
    fn only_a_missing_index_file_is_no_error_when_removing_one() {
        let dir = tempfile::tempdir().unwrap();
        let segment = dir.path().join("00000000000000000001.seg");
        let fs = crate::file_system::RealFs;
        assert!(!remove(&fs, &segment).unwrap(), "none there");
        std::fs::write(path_of(&segment), b"index").unwrap();
        assert!(remove(&fs, &segment).unwrap(), "removed");
        // Something there that cannot be removed as a file: an error naming it.
        std::fs::create_dir(path_of(&segment)).unwrap();
        let refused = remove(&fs, &segment).unwrap_err().to_string();
        assert!(refused.contains("00000000000000000001.idx"), "{refused}");
    }
}
