//! Record framing: `[len u32][crc32 u32][body]`, little-endian, where `body[0]` is the record
//! kind and the CRC covers the four length bytes and the whole body (so an all-zero header
//! never validates: length 0 is rejected before any CRC is computed).
//!
//! A batch is one or more event records followed by a commit record naming how many events
//! and bytes it closes. Only committed batches count: a batch cut short by a crash has no
//! valid commit and is dropped as a whole.

use apollo11_core::limits;

/// Bytes before a record's body.
pub const HEADER_BYTES: usize = 8;
/// Record kind of an event.
pub const KIND_EVENT: u8 = 1;
/// Record kind of a batch's commit.
pub const KIND_COMMIT: u8 = 2;
/// Body length of a commit record: kind, event count, batch bytes.
pub const COMMIT_BODY_BYTES: u32 = 9;

/// Appends a record of `kind` whose body after the kind byte is produced by `fill`.
pub fn append_record(out: &mut Vec<u8>, kind: u8, fill: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_BYTES]);
    out.push(kind);
    fill(out);
    let len = (out.len() - start - HEADER_BYTES) as u32;
    assert!(
        len <= limits::RECORD_BYTES_MAX,
        "record of {len} bytes passed validation"
    );
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    let crc = crc(&out[start..start + 4], &out[start + HEADER_BYTES..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Appends the commit record of a batch of `count` events spanning `bytes` bytes.
pub fn append_commit(out: &mut Vec<u8>, count: u32, bytes: u32) {
    append_record(out, KIND_COMMIT, |b| {
        b.extend_from_slice(&count.to_le_bytes());
        b.extend_from_slice(&bytes.to_le_bytes());
    });
}

fn crc(len: &[u8], body: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(len);
    hasher.update(body);
    hasher.finalize()
}

/// What is found at an offset of a segment.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A valid record: its kind, body after the kind byte, and the offset after it.
    Record {
        kind: u8,
        body: &'a [u8],
        next: usize,
    },
    /// Only zero bytes remain: the clean end of the written data.
    End,
    /// Not a valid record.
    Invalid(String),
}

/// Parses the record at `at` of a segment: an event or a commit record.
pub fn parse(bytes: &[u8], at: usize) -> Parsed<'_> {
    match parse_frame(bytes, at) {
        Parsed::Record { kind, .. } if kind != KIND_EVENT && kind != KIND_COMMIT => {
            Parsed::Invalid(format!("unknown record kind {kind}"))
        }
        other => other,
    }
}

/// Parses the framing of the record at `at`, whatever its kind (run bundles have kinds of
/// their own).
pub fn parse_frame(bytes: &[u8], at: usize) -> Parsed<'_> {
    let rest = &bytes[at.min(bytes.len())..];
    let zeros = |r: &[u8]| r.iter().all(|&b| b == 0);
    if rest.len() < HEADER_BYTES {
        if zeros(rest) {
            return Parsed::End;
        }
        return Parsed::Invalid(format!(
            "{} bytes left, too few for a record header",
            rest.len()
        ));
    }
    let len = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes"));
    let stored_crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
    if len == 0 {
        // Only the end of the written data (the preallocated zeros) may start with length 0.
        if zeros(rest) {
            return Parsed::End;
        }
        return Parsed::Invalid("record length 0".into());
    }
    if len > limits::RECORD_BYTES_MAX {
        return Parsed::Invalid(format!(
            "record length {len} over the limit {}",
            limits::RECORD_BYTES_MAX
        ));
    }
    let end = HEADER_BYTES + len as usize;
    if end > rest.len() {
        return Parsed::Invalid(format!(
            "record of {len} bytes runs past the end of the file"
        ));
    }
    let body = &rest[HEADER_BYTES..end];
    if crc(&rest[0..4], body) != stored_crc {
        return Parsed::Invalid("checksum mismatch".into());
    }
    Parsed::Record {
        kind: body[0],
        body: &body[1..],
        next: at + end,
    }
}

/// Reads a commit body: (event count, batch bytes).
pub fn commit_fields(body: &[u8]) -> Option<(u32, u32)> {
    if body.len() != COMMIT_BODY_BYTES as usize - 1 {
        return None;
    }
    let count = u32::from_le_bytes(body[0..4].try_into().ok()?);
    let bytes = u32::from_le_bytes(body[4..8].try_into().ok()?);
    Some((count, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of `kind` whose length field says `len`, with a body of that many bytes and
    /// a valid CRC: only the length limit can refuse it.
    fn record_of_len(len: u32) -> Vec<u8> {
        let mut out = len.to_le_bytes().to_vec();
        out.extend_from_slice(&[0; 4]);
        out.push(KIND_EVENT);
        out.resize(HEADER_BYTES + len as usize, 7);
        let crc = crc(&out[0..4], &out[HEADER_BYTES..]);
        out[4..8].copy_from_slice(&crc.to_le_bytes());
        out
    }

    #[test]
    fn a_record_of_exactly_the_limit_is_valid_and_one_byte_more_is_not() {
        let max = limits::RECORD_BYTES_MAX;
        let at_limit = record_of_len(max);
        assert!(
            matches!(parse(&at_limit, 0), Parsed::Record { next, .. } if next == at_limit.len()),
            "{max} bytes is allowed"
        );
        let over = record_of_len(max + 1);
        match parse(&over, 0) {
            Parsed::Invalid(reason) => assert!(reason.contains("over the limit"), "{reason}"),
            other => panic!("{} bytes accepted: {other:?}", max + 1),
        }
        let mut built = Vec::new();
        append_record(&mut built, KIND_EVENT, |b| {
            b.resize(b.len() + max as usize - 1, 7)
        });
        assert_eq!(
            built, at_limit,
            "the writer may write a record of the limit"
        );
    }

    #[test]
    #[should_panic(expected = "passed validation")]
    fn the_writer_never_writes_a_record_over_the_limit() {
        let max = limits::RECORD_BYTES_MAX as usize;
        append_record(&mut Vec::new(), KIND_EVENT, |b| b.resize(b.len() + max, 7));
    }

    #[test]
    fn a_whole_header_over_a_missing_body_is_named_for_its_length() {
        // Eight bytes are a whole header: what is wrong is the body it announces.
        let mut header = 5u32.to_le_bytes().to_vec();
        header.extend_from_slice(&[1; 4]);
        assert_eq!(
            parse(&header, 0),
            Parsed::Invalid("record of 5 bytes runs past the end of the file".into())
        );
        assert_eq!(
            parse(&header[..7], 0),
            Parsed::Invalid("7 bytes left, too few for a record header".into())
        );
        assert_eq!(parse(&[0; 8], 0), Parsed::End);
    }

    #[test]
    fn a_commit_body_reads_back_and_any_other_length_is_refused() {
        let mut out = Vec::new();
        append_commit(&mut out, 3, 700);
        let Parsed::Record { kind, body, .. } = parse(&out, 0) else {
            panic!("a commit record parses")
        };
        assert_eq!((kind, commit_fields(body)), (KIND_COMMIT, Some((3, 700))));
        assert_eq!(commit_fields(&body[..7]), None);
        assert_eq!(commit_fields(&[body, &[0]].concat()), None);
    }
}
