//! Segment files: a header (magic, format version, base event id, for version 2 the last id
//! it covers, CRC) then batches of records. Scanning a segment yields its committed events and
//! where and why it stopped. The writer writes version 1 (ids consecutive from the base);
//! `gc` rewrites sealed segments without the archived runs as version 2 (ids increasing
//! within `base..=covers_to`, skipping those moved out).

use crate::format::codec::{decode_event, decode_head};
use crate::format::record::{
    commit_fields, parse, Parsed, COMMIT_BODY_BYTES, KIND_COMMIT, KIND_EVENT,
};
use std::collections::HashMap;

/// Magic bytes at the start of every segment.
pub const MAGIC: &[u8; 8] = b"APOLLO11";
/// Format version the writer writes (bincode 2 standard encoding of `Event`, consecutive ids).
pub const FORMAT_VERSION: u32 = 1;
/// Format version of a compacted segment: version 1's records, ids that may skip.
pub const COMPACTED_VERSION: u32 = 2;
/// Bytes of the segment header (version 1).
pub const HEADER_BYTES: usize = 24;
/// Bytes of a compacted segment's header (version 2: `covers to` added).
pub const COMPACTED_HEADER_BYTES: usize = 32;

/// File name of the segment whose first event id is `base`.
pub fn file_name(base: u64) -> String {
    format!("{base:020}.seg")
}

/// The base event id a segment file name stands for.
pub fn parse_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    (digits.len() == 20).then(|| digits.parse().ok()).flatten()
}

/// The header of a new segment (version 1).
pub fn header(base: u64) -> Vec<u8> {
    sealed_header(FORMAT_VERSION, &[base])
}

/// The header of a compacted segment (version 2) covering ids `base..=covers_to`.
pub fn compacted_header(base: u64, covers_to: u64) -> Vec<u8> {
    sealed_header(COMPACTED_VERSION, &[base, covers_to])
}

fn sealed_header(version: u32, fields: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(COMPACTED_HEADER_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    for field in fields {
        out.extend_from_slice(&field.to_le_bytes());
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A segment header as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The first id the segment covers (its name).
    pub base: u64,
    /// Version 2: the last id it covers (its events' ids lie in `base..=covers_to`, the next
    /// segment starts at `covers_to + 1`); `None` for version 1 (ids consecutive from `base`).
    pub covers_to: Option<u64>,
    /// Bytes of the header: where the first record starts.
    pub len: usize,
}

/// The largest event id a segment may name (PostgreSQL's `bigint`, the other store's): ids
/// from a header above it are damage, so that no id arithmetic overflows (`covers to + 1`
/// is the next segment's base).
pub const ID_MAX: u64 = i64::MAX as u64;

/// Checks a header (either version).
pub fn read_header(bytes: &[u8]) -> Result<Header, String> {
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let too_short = |needed: usize| {
        (bytes.len() < needed).then(|| {
            format!(
                "{} bytes, too short for a segment header of {needed}",
                bytes.len()
            )
        })
    };
    if let Some(reason) = too_short(HEADER_BYTES) {
        return Err(reason);
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let len = match version {
        COMPACTED_VERSION => COMPACTED_HEADER_BYTES,
        _ => HEADER_BYTES,
    };
    if let Some(reason) = too_short(len) {
        return Err(reason);
    }
    let stored = u32::from_le_bytes(bytes[len - 4..len].try_into().expect("4 bytes"));
    if crc32fast::hash(&bytes[..len - 4]) != stored {
        return Err("segment header checksum mismatch".into());
    }
    if &bytes[..8] != MAGIC {
        return Err("not an Apollo-11 segment (bad magic)".into());
    }
    let base = u64_at(12);
    if base > ID_MAX {
        return Err(format!(
            "segment header's first id {base} is above the largest event id, {ID_MAX}"
        ));
    }
    let covers_to = match version {
        FORMAT_VERSION => None,
        COMPACTED_VERSION if (base..=ID_MAX).contains(&u64_at(20)) => Some(u64_at(20)),
        COMPACTED_VERSION => {
            return Err(format!(
                "segment header covers ids {base}..={}, which ends before it starts or past \
                 the largest event id, {ID_MAX}",
                u64_at(20)
            ))
        }
        _ => {
            return Err(format!(
                "segment format version {version}; this build reads {FORMAT_VERSION} and \
                 {COMPACTED_VERSION}"
            ))
        }
    };
    Ok(Header {
        base,
        covers_to,
        len,
    })
}

impl Header {
    /// Why `id` cannot be the event after `previous` (`None`: the first) in this segment.
    fn misplaced(&self, previous: Option<u64>, id: u64) -> Option<String> {
        let low = previous.map_or(self.base, |p| p + 1);
        match self.covers_to {
            None if id != low => Some(format!("event id {id} where {low} was expected")),
            Some(high) if id < low || id > high => Some(format!(
                "event id {id} where one in {low}..={high} was expected"
            )),
            _ => None,
        }
    }
}

/// Why a scan stopped before the end of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    /// Offset of the first bad record (or of an uncommitted batch).
    pub offset: u64,
    /// What is wrong there.
    pub reason: String,
}

/// One committed event as indexed at open.
#[derive(Clone, Copy, Debug)]
pub struct Indexed {
    /// Its event id.
    pub id: u64,
    /// Offset of its record.
    pub offset: u32,
    /// Its seq.
    pub seq: u32,
    /// Its run, as an index into [`Scanned::runs`].
    pub run: u32,
}

/// The committed content of a segment.
#[derive(Clone, Debug)]
pub struct Scanned {
    /// Base event id from the header.
    pub base: u64,
    /// The last id a compacted (version 2) segment covers; `None` for version 1.
    pub covers_to: Option<u64>,
    /// Committed events, in order.
    pub events: Vec<Indexed>,
    /// The run ids the events name, each once.
    pub runs: Vec<String>,
    /// Offset just after the last committed batch.
    pub end: u64,
    /// `None` when only zeros follow `end`.
    pub stop: Option<Stop>,
}

/// Scans a whole segment. Events must carry consecutive ids from the header's base (version
/// 1), or increasing ids within `base..=covers_to` (version 2).
pub fn scan(bytes: &[u8]) -> Result<Scanned, Stop> {
    let header = read_header(bytes).map_err(|reason| Stop { offset: 0, reason })?;
    let mut scanned = Scanned {
        base: header.base,
        covers_to: header.covers_to,
        events: Vec::new(),
        runs: Vec::new(),
        end: header.len as u64,
        stop: None,
    };
    let mut pending: Vec<Indexed> = Vec::new();
    let mut interned: HashMap<&str, u32> = HashMap::new();
    let mut at = header.len;
    let mut batch_start = at;
    loop {
        let stop = |offset: usize, reason: String| {
            Some(Stop {
                offset: offset as u64,
                reason,
            })
        };
        match parse(bytes, at) {
            Parsed::End if pending.is_empty() => break,
            Parsed::End => {
                scanned.stop = stop(batch_start, "a batch without its commit record".into());
                break;
            }
            Parsed::Invalid(reason) => {
                scanned.stop = stop(at, reason);
                break;
            }
            Parsed::Record {
                kind: KIND_EVENT,
                body,
                next,
            } => {
                let previous = pending.last().or(scanned.events.last()).map(|e| e.id);
                match decode_head(body) {
                    Ok(head) => {
                        if let Some(reason) = header.misplaced(previous, head.event_id) {
                            scanned.stop = stop(at, reason);
                            break;
                        }
                        let count = interned.len() as u32;
                        let run = *interned.entry(head.run_id).or_insert_with(|| {
                            scanned.runs.push(head.run_id.to_owned());
                            count
                        });
                        pending.push(Indexed {
                            id: head.event_id,
                            offset: at as u32,
                            seq: head.seq,
                            run,
                        });
                    }
                    Err(e) => {
                        scanned.stop = stop(at, format!("undecodable event: {e}"));
                        break;
                    }
                }
                at = next;
            }
            Parsed::Record { body, next, .. } => {
                let closes = (pending.len() as u32, (at - batch_start) as u32);
                if commit_fields(body) != Some(closes) || pending.is_empty() {
                    scanned.stop = stop(at, "commit record does not match its batch".into());
                    break;
                }
                scanned.events.append(&mut pending);
                at = next;
                batch_start = at;
                scanned.end = at as u64;
            }
        }
    }
    Ok(scanned)
}

/// Whether a complete, valid batch starts after `offset`: if one does, the damage at
/// `offset` is not a torn tail (a batch is only written after the previous one was synced).
/// Looks for commit records first, since their length and kind are fixed.
pub fn complete_batch_after(bytes: &[u8], offset: u64) -> Option<u64> {
    let from = offset as usize + 1;
    let commit_len = COMMIT_BODY_BYTES.to_le_bytes();
    for p in from..bytes
        .len()
        .saturating_sub(crate::format::record::HEADER_BYTES)
    {
        // A cheap filter before the CRC: the parse below decides.
        if bytes[p..p + 4] != commit_len || bytes[p + 8] != KIND_COMMIT {
            continue;
        }
        let Parsed::Record {
            kind: KIND_COMMIT,
            body,
            ..
        } = parse(bytes, p)
        else {
            continue;
        };
        let Some((count, batch_bytes)) = commit_fields(body) else {
            continue;
        };
        let Some(start) = p.checked_sub(batch_bytes as usize).filter(|&s| s >= from) else {
            continue;
        };
        if count > 0 && batch_is_valid(bytes, start, p, count) {
            return Some(start as u64);
        }
    }
    None
}

fn batch_is_valid(bytes: &[u8], start: usize, commit_at: usize, count: u32) -> bool {
    let mut at = start;
    let mut seen = 0;
    while at < commit_at {
        match parse(bytes, at) {
            Parsed::Record {
                kind: KIND_EVENT,
                body,
                next,
            } if decode_event(body).is_ok() => {
                seen += 1;
                at = next;
            }
            _ => return false,
        }
    }
    at == commit_at && seen == count
}

/// Where the complete batch starting at `start` (as [`complete_batch_after`] found it) ends:
/// the offset after its commit record.
pub fn batch_end(bytes: &[u8], start: u64) -> u64 {
    let mut at = start as usize;
    loop {
        match parse(bytes, at) {
            Parsed::Record {
                kind: KIND_COMMIT,
                next,
                ..
            } => return next as u64,
            Parsed::Record { next, .. } => at = next,
            Parsed::End | Parsed::Invalid(_) => return at as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::codec::encode_event;
    use crate::format::record::{append_commit, append_record};
    use apollo11_core::{Event, EventId, EventKind, Payload, RunId, Seq};

    fn event(id: u64, seq: u32) -> Event {
        Event {
            event_id: EventId(id),
            run_id: RunId::from("r"),
            seq: Seq(seq),
            step: None,
            kind: EventKind::Started,
            attempt: 1,
            at_ms: 0,
            instance: "i".into(),
            payload: Payload::inline("p"),
        }
    }

    /// A batch of the events with ids `ids` (seqs equal to ids), closed by a commit record
    /// saying `count` events and `bytes` bytes (`None`: the true values).
    fn batch(ids: &[u64], count: Option<u32>, bytes: Option<u32>) -> Vec<u8> {
        let mut out = Vec::new();
        for &id in ids {
            append_record(&mut out, KIND_EVENT, |b| {
                encode_event(&event(id, id as u32), b).unwrap()
            });
        }
        let len = out.len() as u32;
        append_commit(
            &mut out,
            count.unwrap_or(ids.len() as u32),
            bytes.unwrap_or(len),
        );
        out
    }

    fn segment(batches: &[Vec<u8>]) -> Vec<u8> {
        let mut out = header(1);
        for b in batches {
            out.extend_from_slice(b);
        }
        out.extend_from_slice(&[0; 64]);
        out
    }

    #[test]
    fn a_clean_segment_scans_to_its_end() {
        let bytes = segment(&[batch(&[1, 2], None, None), batch(&[3], None, None)]);
        let scanned = scan(&bytes).unwrap();
        assert_eq!(scanned.events.len(), 3);
        assert_eq!(scanned.stop, None);
        assert_eq!(scanned.end as usize, bytes.len() - 64);
    }

    #[test]
    fn event_ids_must_run_consecutively_within_a_segment() {
        let first = batch(&[1], None, None);
        let bytes = segment(&[first.clone(), batch(&[3], None, None)]);
        let scanned = scan(&bytes).unwrap();
        assert_eq!(scanned.events.len(), 1);
        let stop = scanned.stop.unwrap();
        assert_eq!(stop.offset as usize, HEADER_BYTES + first.len());
        assert_eq!(stop.reason, "event id 3 where 2 was expected");
        let within = segment(&[batch(&[1, 1], None, None)]);
        assert!(scan(&within).unwrap().stop.is_some(), "a repeated id");
    }

    #[test]
    fn a_commit_record_must_name_exactly_the_batch_it_closes() {
        let good = batch(&[1, 2], None, None);
        let true_bytes = (good.len() - COMMIT_BODY_BYTES as usize - 8) as u32;
        for (count, bytes) in [
            (Some(1), None),
            (Some(3), None),
            (None, Some(true_bytes - 1)),
        ] {
            let bytes = segment(&[batch(&[1, 2], count, bytes)]);
            let scanned = scan(&bytes).unwrap();
            assert!(scanned.events.is_empty(), "{count:?} {bytes:?}");
            let stop = scanned.stop.unwrap();
            assert_eq!(stop.reason, "commit record does not match its batch");
            assert_eq!(stop.offset, HEADER_BYTES as u64 + u64::from(true_bytes));
        }
        let empty = segment(&[batch(&[], None, None)]);
        let stop = scan(&empty).unwrap().stop.unwrap();
        assert_eq!(
            stop.reason, "commit record does not match its batch",
            "no events"
        );
    }

    #[test]
    fn a_complete_batch_is_found_after_damage_at_its_exact_offset() {
        let first = batch(&[1], None, None);
        let second = batch(&[2, 3], None, None);
        let mut bytes = segment(&[first.clone(), second]);
        bytes[HEADER_BYTES + 10] ^= 0xff;
        let at = (HEADER_BYTES + first.len()) as u64;
        assert_eq!(complete_batch_after(&bytes, HEADER_BYTES as u64), Some(at));
        assert_eq!(
            complete_batch_after(&bytes, at),
            None,
            "none after the last"
        );
    }

    #[test]
    fn a_commit_record_over_anything_but_valid_events_is_no_complete_batch() {
        // A valid commit record whose batch would be 40 bytes of garbage.
        let mut garbage = vec![0xa5u8; 40];
        append_commit(&mut garbage, 1, 40);
        let bytes = segment(&[garbage]);
        assert_eq!(complete_batch_after(&bytes, 0), None);
        // A valid event under a commit record that counts two.
        let miscounted = segment(&[batch(&[1], Some(2), None)]);
        assert_eq!(complete_batch_after(&miscounted, 0), None);
        // Records framed and checksummed as events, closed by a matching commit record, but
        // holding no event: no batch either.
        let mut undecodable = Vec::new();
        append_record(&mut undecodable, KIND_EVENT, |b| {
            b.extend_from_slice(&[0xff; 30])
        });
        let len = undecodable.len() as u32;
        append_commit(&mut undecodable, 1, len);
        let bytes = segment(&[undecodable]);
        assert_eq!(complete_batch_after(&bytes, 0), None);
        // A commit record closing no event is no batch (the writer never writes one).
        let mut empty = segment(&[]);
        empty.truncate(HEADER_BYTES);
        empty.extend_from_slice(&[0xa5; 10]);
        append_commit(&mut empty, 0, 0);
        assert_eq!(complete_batch_after(&empty, HEADER_BYTES as u64), None);
        // A batch reaching back before the damage does not follow it.
        let whole = segment(&[batch(&[1], None, None)]);
        assert_eq!(complete_batch_after(&whole, HEADER_BYTES as u64 + 1), None);
        assert_eq!(
            complete_batch_after(&whole, HEADER_BYTES as u64 - 1),
            Some(HEADER_BYTES as u64)
        );
    }
}
