//! Segment records: the store crate's record framing (`apollo11_store::frame`, shared with
//! run bundles), with the kinds a segment holds.
//!
//! A batch is one or more event records followed by a commit record naming how many events
//! and bytes it closes. Only committed batches count: a batch cut short by a crash has no
//! valid commit and is dropped as a whole.

#[cfg(test)]
use apollo11_core::limits;
#[cfg(test)]
use apollo11_store::frame::crc;
pub use apollo11_store::frame::{append_record, parse_frame, Parsed, HEADER_BYTES, KIND_EVENT};

/// Record kind of a batch's commit.
pub const KIND_COMMIT: u8 = 2;
/// Body length of a commit record: kind, event count, batch bytes.
pub const COMMIT_BODY_BYTES: u32 = 9;

/// Appends the commit record of a batch of `count` events spanning `bytes` bytes.
pub fn append_commit(out: &mut Vec<u8>, count: u32, bytes: u32) {
    append_record(out, KIND_COMMIT, |b| {
        b.extend_from_slice(&count.to_le_bytes());
        b.extend_from_slice(&bytes.to_le_bytes());
    });
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
