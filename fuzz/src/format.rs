//! The log's file formats as `docs/log-format.md` describes them, written here from the
//! document rather than borrowed from the log's private code: framing a body as a record,
//! a segment header, and putting right the checksums a fuzzer cannot forge.

/// Bytes of a segment header (version 1).
pub const SEGMENT_HEADER_BYTES: usize = 24;
/// Bytes of a compacted segment's header (version 2: `covers to` added).
const COMPACTED_HEADER_BYTES: usize = 32;
/// Bytes of a record header: length, then CRC.
const RECORD_HEADER_BYTES: usize = 8;
/// Record kind of an event.
pub const KIND_EVENT: u8 = 1;
/// Record kind of a batch's commit.
pub const KIND_COMMIT: u8 = 2;

/// The header of a segment whose first event id is `base`.
pub fn segment_header(base: u64) -> Vec<u8> {
    let mut out = b"APOLLO11".to_vec();
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&base.to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Appends a record of `kind` with `body` after its kind byte.
pub fn push_record(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    let len = (body.len() + 1) as u32;
    out.extend_from_slice(&len.to_le_bytes());
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    out.push(kind);
    out.extend_from_slice(body);
    let crc = record_crc(&out[at - 4..at], &out[at + 4..]);
    out[at..at + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Appends one batch holding `bodies` as event records, closed by its commit record.
pub fn push_batch(out: &mut Vec<u8>, bodies: &[&[u8]]) {
    let start = out.len();
    for body in bodies {
        push_record(out, KIND_EVENT, body);
    }
    let mut commit = (bodies.len() as u32).to_le_bytes().to_vec();
    commit.extend_from_slice(&((out.len() - start) as u32).to_le_bytes());
    push_record(out, KIND_COMMIT, &commit);
}

fn record_crc(len: &[u8], body: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(len);
    hasher.update(body);
    hasher.finalize()
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// Gives a segment a valid header checksum (when it is long enough to have a header).
pub fn fix_segment_header(segment: &mut [u8]) {
    let end = header_bytes(segment);
    if segment.len() >= end {
        let crc = crc32fast::hash(&segment[..end - 4]);
        segment[end - 4..end].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Bytes of the segment's header: a compacted segment's when its version field says 2.
fn header_bytes(segment: &[u8]) -> usize {
    match u32_at(segment, 8) {
        Some(2) => COMPACTED_HEADER_BYTES,
        _ => SEGMENT_HEADER_BYTES,
    }
}

/// Gives every record of a segment a valid checksum, walking the length fields from the
/// header on while the records they announce fit in the file.
pub fn fix_record_crcs(segment: &mut [u8]) {
    let mut at = header_bytes(segment);
    while let Some(len) = u32_at(segment, at) {
        let (body, end) = (
            at + RECORD_HEADER_BYTES,
            at + RECORD_HEADER_BYTES + len as usize,
        );
        if len == 0 || end > segment.len() {
            return;
        }
        let crc = record_crc(&segment[at..at + 4], &segment[body..end]);
        segment[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
        at = end;
    }
}

/// Gives a snapshot file a valid checksum: the CRC of version 2's header (40 bytes, version
/// 1's 32) covers everything after the magic but itself.
pub fn fix_snapshot_crc(snapshot: &mut [u8]) {
    let header = match u32_at(snapshot, 8) {
        Some(1) => 32,
        _ => 40,
    };
    if snapshot.len() < header {
        return;
    }
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&snapshot[8..header - 4]);
    hasher.update(&snapshot[header..]);
    let crc = hasher.finalize();
    snapshot[header - 4..header].copy_from_slice(&crc.to_le_bytes());
}

/// Gives an index file a valid checksum: its last four bytes, the CRC of all before.
pub fn fix_index_crc(index: &mut [u8]) {
    if let Some(at) = index.len().checked_sub(4) {
        let crc = crc32fast::hash(&index[..at]);
        index[at..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The body after the kind byte of a segment's first record, if it has one.
pub fn first_record_body(segment: &[u8]) -> Option<&[u8]> {
    let len = u32_at(segment, SEGMENT_HEADER_BYTES)? as usize;
    let body = SEGMENT_HEADER_BYTES + RECORD_HEADER_BYTES;
    segment.get(body + 1..body + len)
}
