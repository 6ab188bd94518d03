//! Record framing of the files that hold events (the file log's segments, run bundles):
//! `[len u32][crc32 u32][body]`, little-endian, where `body[0]` is the record kind and the CRC
//! covers the four length bytes and the whole body (so an all-zero header never validates:
//! length 0 is rejected before any CRC is computed).

use apollo11_core::limits;

/// Bytes before a record's body.
pub const HEADER_BYTES: usize = 8;
/// Record kind of an event.
pub const KIND_EVENT: u8 = 1;

/// Appends a record of `kind` whose body after the kind byte is produced by `fill`.
///
/// # Panics
///
/// When the record is over `RECORD_BYTES_MAX`: callers validate their data first.
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

/// The CRC of a record: its length bytes, then its body.
pub fn crc(len: &[u8], body: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(len);
    hasher.update(body);
    hasher.finalize()
}

/// What is found at an offset of a file of records.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A valid record.
    Record {
        /// Its kind.
        kind: u8,
        /// Its body after the kind byte.
        body: &'a [u8],
        /// The offset after it.
        next: usize,
    },
    /// Only zero bytes remain: the clean end of the written data.
    End,
    /// Not a valid record: why.
    Invalid(String),
}

/// Parses the framing of the record at `at`, whatever its kind.
///
/// # Panics
///
/// Never: it reads the header's fields only once it holds the header's eight bytes.
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
