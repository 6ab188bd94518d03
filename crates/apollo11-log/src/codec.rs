//! The only place that knows bincode. Events are encoded with bincode 2's standard
//! configuration (varint integers, little-endian) and always decoded with a size limit. The
//! segment header carries a format version, so this codec can be replaced without breaking
//! old logs.

use apollo11_core::{limits, Event};
use serde::Deserialize;

const LIMIT: usize = limits::RECORD_BYTES_MAX as usize;

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<LIMIT>()
}

/// Appends the encoding of `event` to `out`.
pub fn encode_event(event: &Event, out: &mut Vec<u8>) -> Result<(), String> {
    bincode::serde::encode_into_std_write(event, out, config())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Decodes one event that must fill `bytes` exactly.
pub fn decode_event(bytes: &[u8]) -> Result<Event, String> {
    let (event, used): (Event, usize) =
        bincode::serde::decode_from_slice(bytes, config()).map_err(|e| e.to_string())?;
    if used != bytes.len() {
        return Err(format!(
            "{} trailing bytes after the event",
            bytes.len() - used
        ));
    }
    Ok(event)
}

/// The first fields of an encoded event: all that opening a log needs to index it.
#[derive(Deserialize)]
pub struct Head<'a> {
    /// The event's id.
    pub event_id: u64,
    /// Its run, borrowed from the record.
    #[serde(borrow)]
    pub run_id: &'a str,
    /// Its seq.
    pub seq: u32,
}

/// Decodes only the head of an encoded event (the fields `Event` starts with), borrowing the
/// run id: opening a log allocates nothing per event.
pub fn decode_head(bytes: &[u8]) -> Result<Head<'_>, String> {
    bincode::serde::borrow_decode_from_slice(bytes, config())
        .map(|(head, _)| head)
        .map_err(|e| e.to_string())
}
