//! Writing a bundle: header, sections (manifest, events, blobs, files), end record.

use super::{Bundle, SectionType, HEADER_BYTES, KIND_END, KIND_SECTION, MAGIC, VERSION};
use apollo11_core::limits;
use apollo11_store::codec;
use apollo11_store::frame;
use apollo11_store::{sha256_hex, StoreError};

/// Most data bytes in one chunk record (the body's kind byte fills the record's limit).
const CHUNK_BYTES_MAX: usize = limits::RECORD_BYTES_MAX as usize - 1;

/// The bytes of a bundle file holding `bundle`.
///
/// # Errors
///
/// [`StoreError::Invalid`] for an event that cannot be encoded in one record (no store holds
/// one).
pub fn encode(bundle: &Bundle) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::with_capacity(HEADER_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    let counts = [bundle.events.len(), bundle.blobs.len(), bundle.files.len()];
    let manifest: Vec<u8> = counts
        .iter()
        .flat_map(|n| (*n as u32).to_le_bytes())
        .collect();
    let mut sections = vec![chunked(SectionType::Manifest, &bundle.run_id.0, &manifest)];
    sections.push(events(bundle)?);
    for blob in &bundle.blobs {
        sections.push(chunked(SectionType::Blob, &sha256_hex(blob), blob));
    }
    for file in &bundle.files {
        let name = format!("{}/{}", file.step.0, file.name);
        sections.push(chunked(SectionType::File, &name, &file.bytes));
    }
    for section in &sections {
        out.extend_from_slice(section);
    }
    let crc = crc32fast::hash(&out);
    frame::append_record(&mut out, KIND_END, |b| {
        b.extend_from_slice(&(sections.len() as u32).to_le_bytes());
        b.extend_from_slice(&crc.to_le_bytes());
    });
    Ok(out)
}

/// The events section: one event record per event, encoded as in a segment.
fn events(bundle: &Bundle) -> Result<Vec<u8>, StoreError> {
    let mut bodies = Vec::with_capacity(bundle.events.len());
    for event in &bundle.events {
        let mut body = Vec::new();
        codec::encode_event(event, &mut body).map_err(|reason| invalid(event, reason))?;
        if body.len() > CHUNK_BYTES_MAX {
            let reason = format!("{} bytes encoded, over one record", body.len());
            return Err(invalid(event, reason));
        }
        bodies.push(body);
    }
    Ok(section(
        SectionType::Events,
        "",
        bodies.iter().map(Vec::as_slice),
    ))
}

fn invalid(event: &apollo11_core::Event, reason: String) -> StoreError {
    StoreError::Invalid {
        what: format!("event {} of run {}", event.event_id.0, event.run_id.0),
        reason,
    }
}

/// A section whose data is `data` cut into chunk records.
fn chunked(kind: SectionType, name: &str, data: &[u8]) -> Vec<u8> {
    section(kind, name, data.chunks(CHUNK_BYTES_MAX))
}

/// A section record naming `name`, then one data record per body.
fn section<'a>(kind: SectionType, name: &str, bodies: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let (mut data, mut records, mut bytes) = (Vec::new(), 0u32, 0u64);
    let mut crc = crc32fast::Hasher::new();
    for body in bodies {
        frame::append_record(&mut data, kind.data_kind(), |b| b.extend_from_slice(body));
        crc.update(body);
        records += 1;
        bytes += body.len() as u64;
    }
    let mut out = Vec::with_capacity(data.len() + 64);
    frame::append_record(&mut out, KIND_SECTION, |b| {
        b.push(kind as u8);
        b.extend_from_slice(&records.to_le_bytes());
        b.extend_from_slice(&bytes.to_le_bytes());
        b.extend_from_slice(&crc.finalize().to_le_bytes());
        b.extend_from_slice(name.as_bytes());
    });
    out.extend_from_slice(&data);
    out
}
