//! The encoding of events that files hold (the file log's segments, run bundles): bincode 2's
//! standard configuration (varint integers, little-endian), always decoded with a size limit.

use apollo11_core::{limits, Event, EventRef};

const LIMIT: usize = limits::RECORD_BYTES_MAX as usize;

/// The bincode configuration of an encoded event: standard, limited to one record.
pub fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<LIMIT>()
}

/// Appends the encoding of `event` to `out`.
///
/// # Errors
///
/// Why bincode cannot encode it (over the record limit).
pub fn encode_event(event: &Event, out: &mut Vec<u8>) -> Result<(), String> {
    bincode::serde::encode_into_std_write(event, out, config())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Decodes one event that must fill `bytes` exactly, borrowing its strings and payload.
///
/// # Errors
///
/// Why the bytes are not one encoded event (bincode's reason, or the trailing bytes).
pub fn decode_event(bytes: &[u8]) -> Result<EventRef<'_>, String> {
    let (event, used): (EventRef<'_>, usize) =
        bincode::serde::borrow_decode_from_slice(bytes, config()).map_err(|e| e.to_string())?;
    if used != bytes.len() {
        return Err(format!(
            "{} trailing bytes after the event",
            bytes.len() - used
        ));
    }
    Ok(event)
}
