//! Run bundles: one run (its events, the blobs they refer to, and files the caller adds,
//! such as step logs) in one self-contained, checksummed file that another store imports.
//! The format is in `docs/log-format.md` (Run bundle): the segments' record framing and event
//! codec, in sections that each carry a CRC of their data, and a last record holding the CRC
//! of everything before it. It reads from and writes to any store of `apollo11-store`'s
//! traits: the file log, PostgreSQL, `MemStore`.

#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod read;
mod transfer;
mod write;

pub use read::decode;
pub use transfer::{check_import, export, import, ImportError, Imported};
pub use write::encode;

use apollo11_core::{Event, RunId, StepName};
use std::fmt;

/// One run, whole: what a bundle file holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    /// The run.
    pub run_id: RunId,
    /// Its events in seq order (1, 2, …), with the ids they had in the source store.
    pub events: Vec<Event>,
    /// The bytes of every blob its events refer to (named by their SHA-256 in the file).
    pub blobs: Vec<Vec<u8>>,
    /// Files of its steps, kept by the step executor (the shell's logs and outputs).
    pub files: Vec<BundleFile>,
}

/// A file of one of the run's steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleFile {
    /// The step.
    pub step: StepName,
    /// The file's name in the step's folder (one path component, under the names rule).
    pub name: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Why a bundle file was refused: the offset of the record (or header) that fails, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleError {
    /// Byte offset in the file.
    pub offset: u64,
    /// What is wrong there.
    pub reason: String,
}

impl fmt::Display for BundleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at offset {}: {}", self.offset, self.reason)
    }
}

impl std::error::Error for BundleError {}

/// The first bytes of a bundle file.
const MAGIC: &[u8; 8] = b"A11BUNDL";
/// The version this crate writes and reads.
const VERSION: u32 = 1;
/// Magic, version, CRC of both.
const HEADER_BYTES: usize = 16;
/// Record kind of a section's first record.
const KIND_SECTION: u8 = 16;
/// Record kind of a piece of a blob's or file's data.
const KIND_CHUNK: u8 = 17;
/// Record kind of the last record.
const KIND_END: u8 = 18;
/// Bytes of a section record's body before its name: type, records, bytes, CRC.
const SECTION_FIXED_BYTES: usize = 17;

/// What a section holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SectionType {
    /// Named by the run id; one chunk: event, blob and file counts (u32 each).
    Manifest = 1,
    /// Unnamed; one event record per event.
    Events = 2,
    /// Named by the blob's SHA-256 (hex); chunks of its bytes.
    Blob = 3,
    /// Named `step/name`; chunks of its bytes.
    File = 4,
}

impl SectionType {
    fn from_u8(value: u8) -> Option<SectionType> {
        [
            SectionType::Manifest,
            SectionType::Events,
            SectionType::Blob,
            SectionType::File,
        ]
        .into_iter()
        .find(|t| *t as u8 == value)
    }

    /// The kind of its data records.
    fn data_kind(self) -> u8 {
        match self {
            SectionType::Events => apollo11_store::frame::KIND_EVENT,
            _ => KIND_CHUNK,
        }
    }
}

#[cfg(test)]
mod tests;
