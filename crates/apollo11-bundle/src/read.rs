//! Reading a bundle: every record's CRC, every section's CRC and size, the end record's CRC
//! of the whole file, then what the data says (one run, seqs 1, 2, … and every blob its
//! events refer to). Nothing is allocated from a length the file states: data grows only by
//! records actually read, each at most `RECORD_BYTES_MAX`.

use super::{
    Bundle, BundleError, BundleFile, SectionType, HEADER_BYTES, KIND_END, KIND_SECTION, MAGIC,
    SECTION_FIXED_BYTES, VERSION,
};
use apollo11_core::{check_name, Event, NameKind, Payload, RunId, StepName};
use apollo11_store::codec;
use apollo11_store::frame::{self, Parsed};
use apollo11_store::sha256_hex;
use std::collections::BTreeSet;

/// Reads a bundle file's bytes.
///
/// # Errors
///
/// [`BundleError`] naming the offset of the first record (or the header) that fails a check,
/// and why: a bad magic or version, a CRC, a truncated or extra byte, a section out of place,
/// an event of another run or out of seq, a blob missing or not matching its name, a file
/// name that is not one path component.
pub fn decode(bytes: &[u8]) -> Result<Bundle, BundleError> {
    header(bytes)?;
    let mut reader = Reader {
        bytes,
        at: HEADER_BYTES,
    };
    let manifest = reader.section(SectionType::Manifest)?;
    let run_id = RunId(manifest.name.to_owned());
    check_name(NameKind::Run, &run_id.0).map_err(|e| manifest.error(e.to_string()))?;
    let [events, blobs, files] = manifest.counts()?;
    let (offsets, events) = reader.events(&run_id, events)?;
    let mut bundle = Bundle {
        run_id,
        events,
        blobs: Vec::new(),
        files: Vec::new(),
    };
    let mut names = BTreeSet::new();
    for _ in 0..blobs {
        let section = reader.section(SectionType::Blob)?;
        let data = section.data();
        if sha256_hex(&data) != section.name {
            return Err(section.error("the blob's bytes do not have the SHA-256 it is named by"));
        }
        names.insert(section.name.to_owned());
        bundle.blobs.push(data);
    }
    let mut paths = BTreeSet::new();
    for _ in 0..files {
        let section = reader.section(SectionType::File)?;
        if !paths.insert(section.name) {
            return Err(section.error(format!("file {:?} appears twice", section.name)));
        }
        bundle.files.push(section.file()?);
    }
    reader.end(2 + u64::from(blobs) + u64::from(files))?;
    check_blobs(&bundle.events, &offsets, &names)?;
    Ok(bundle)
}

fn header(bytes: &[u8]) -> Result<(), BundleError> {
    let at0 = |reason: String| BundleError { offset: 0, reason };
    if bytes.len() < HEADER_BYTES {
        return Err(at0(format!(
            "{} bytes, too few for a bundle header",
            bytes.len()
        )));
    }
    if &bytes[..8] != MAGIC {
        return Err(at0("not an Apollo-11 run bundle (bad magic)".into()));
    }
    let stored = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
    if crc32fast::hash(&bytes[..12]) != stored {
        return Err(at0("the header fails its checksum".into()));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(at0(format!(
            "bundle version {version}; this build reads version {VERSION}"
        )));
    }
    Ok(())
}

/// Every blob an event refers to is in the bundle.
fn check_blobs(
    events: &[Event],
    offsets: &[usize],
    names: &BTreeSet<String>,
) -> Result<(), BundleError> {
    for (event, at) in events.iter().zip(offsets) {
        if let Payload::Blob(blob) = &event.payload {
            if !names.contains(&blob.sha256) {
                return Err(BundleError {
                    offset: *at as u64,
                    reason: format!(
                        "event seq {} refers to blob {}, which the bundle does not hold",
                        event.seq.0, blob.sha256
                    ),
                });
            }
        }
    }
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// A section read and checked: its name and the bodies of its data records.
struct Section<'a> {
    at: usize,
    name: &'a str,
    records: Vec<(usize, &'a [u8])>,
}

impl<'a> Reader<'a> {
    /// The record at the current offset, of `kind`; returns its offset and body.
    fn record(&mut self, kind: u8, what: &str) -> Result<(usize, &'a [u8]), BundleError> {
        let at = self.at;
        let error = |reason: String| BundleError {
            offset: at as u64,
            reason,
        };
        match frame::parse_frame(self.bytes, at) {
            Parsed::Record {
                kind: k,
                body,
                next,
            } if k == kind => {
                self.at = next;
                Ok((at, body))
            }
            Parsed::Record { kind: k, .. } => Err(error(format!(
                "a record of kind {k} where {what} (kind {kind}) belongs"
            ))),
            Parsed::End if at == self.bytes.len() => Err(error(format!(
                "the file ends where {what} belongs: the bundle is truncated"
            ))),
            Parsed::End => Err(error(format!(
                "only zeros where {what} belongs: the bundle is truncated or zeroed"
            ))),
            Parsed::Invalid(reason) => Err(error(format!("{what}: {reason}"))),
        }
    }

    /// A section of type `expected`, with its data records, checked against its CRC.
    fn section(&mut self, expected: SectionType) -> Result<Section<'a>, BundleError> {
        let (at, body) = self.record(KIND_SECTION, "a section record")?;
        let error = |reason: String| BundleError {
            offset: at as u64,
            reason,
        };
        if body.len() < SECTION_FIXED_BYTES {
            return Err(error(format!("section record of {} bytes", body.len())));
        }
        if SectionType::from_u8(body[0]) != Some(expected) {
            return Err(error(format!(
                "section type {} where a {expected:?} section belongs",
                body[0]
            )));
        }
        let kind = expected;
        let records = u32::from_le_bytes(body[1..5].try_into().expect("4 bytes"));
        let bytes = u64::from_le_bytes(body[5..13].try_into().expect("8 bytes"));
        let crc = u32::from_le_bytes(body[13..17].try_into().expect("4 bytes"));
        let name = std::str::from_utf8(&body[SECTION_FIXED_BYTES..])
            .map_err(|_| error("section name is not UTF-8".into()))?;
        let mut section = Section {
            at,
            name,
            records: Vec::new(),
        };
        let mut hasher = crc32fast::Hasher::new();
        let mut read = 0u64;
        for _ in 0..records {
            let data = self.record(kind.data_kind(), "a data record of the section")?;
            hasher.update(data.1);
            read += data.1.len() as u64;
            section.records.push(data);
        }
        if read != bytes || hasher.finalize() != crc {
            return Err(error(format!(
                "the section's {read} data bytes do not match its size ({bytes}) and checksum"
            )));
        }
        Ok(section)
    }

    /// The events section: `count` events of `run`, seqs 1, 2, …, ids increasing; with the
    /// offset of each one's record.
    fn events(&mut self, run: &RunId, count: u32) -> Result<(Vec<usize>, Vec<Event>), BundleError> {
        let section = self.section(SectionType::Events)?;
        if section.records.len() as u64 != u64::from(count) {
            return Err(section.error(format!(
                "{} events where the manifest says {count}",
                section.records.len()
            )));
        }
        let mut events: Vec<Event> = Vec::new();
        for (at, body) in &section.records {
            let error = |reason: String| BundleError {
                offset: *at as u64,
                reason,
            };
            let event = codec::decode_event(body).map_err(error)?.to_event();
            let seq = events.len() as u64 + 1;
            if event.run_id != *run || u64::from(event.seq.0) != seq {
                return Err(error(format!(
                    "event of run {:?} seq {} where seq {seq} of run {:?} belongs",
                    event.run_id.0, event.seq.0, run.0
                )));
            }
            if events.last().is_some_and(|e| e.event_id >= event.event_id) {
                return Err(error(format!(
                    "event id {} is not after the previous event's",
                    event.event_id.0
                )));
            }
            events.push(event);
        }
        Ok((section.records.iter().map(|(at, _)| *at).collect(), events))
    }

    /// The end record: the section count and the CRC of every byte before it, at the end.
    fn end(&mut self, sections: u64) -> Result<(), BundleError> {
        let (at, body) = self.record(KIND_END, "the end record")?;
        let error = |reason: String| BundleError {
            offset: at as u64,
            reason,
        };
        if body.len() != 8 {
            return Err(error(format!("end record of {} bytes", body.len())));
        }
        let count = u32::from_le_bytes(body[0..4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(body[4..8].try_into().expect("4 bytes"));
        if u64::from(count) != sections {
            return Err(error(format!(
                "the end record counts {count} sections where the manifest makes {sections}"
            )));
        }
        if crc32fast::hash(&self.bytes[..at]) != crc {
            return Err(error("the file fails its checksum".into()));
        }
        if self.at != self.bytes.len() {
            return Err(BundleError {
                offset: self.at as u64,
                reason: format!("{} bytes after the end record", self.bytes.len() - self.at),
            });
        }
        Ok(())
    }
}

impl Section<'_> {
    fn error(&self, reason: impl Into<String>) -> BundleError {
        BundleError {
            offset: self.at as u64,
            reason: reason.into(),
        }
    }

    fn data(&self) -> Vec<u8> {
        self.records
            .iter()
            .flat_map(|(_, b)| b.iter().copied())
            .collect()
    }

    /// The manifest's counts: events, blobs, files.
    fn counts(&self) -> Result<[u32; 3], BundleError> {
        let data = self.data();
        if data.len() != 12 {
            return Err(self.error(format!("manifest of {} bytes, not 12", data.len())));
        }
        let count = |i: usize| u32::from_le_bytes(data[i..i + 4].try_into().expect("4 bytes"));
        Ok([count(0), count(4), count(8)])
    }

    /// A file section: `step/name`, both under the names rule.
    fn file(&self) -> Result<BundleFile, BundleError> {
        let Some((step, name)) = self.name.split_once('/') else {
            return Err(self.error(format!("file name {:?} is not step/name", self.name)));
        };
        check_name(NameKind::Step, step).map_err(|e| self.error(e.to_string()))?;
        check_name(NameKind::Step, name)
            .map_err(|e| self.error(format!("file name of step {step}: {e}")))?;
        Ok(BundleFile {
            step: StepName(step.to_owned()),
            name: name.to_owned(),
            bytes: self.data(),
        })
    }
}
