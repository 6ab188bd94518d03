//! Verify's check of the blobs: every file in `blobs/` must hash to its name, and every blob
//! an event refers to must be there with the hash and length the event states. A problem is
//! reported with the blob's name and every event (run, step, id) that refers to it.

use crate::file_system::{Fs, Mode};
use crate::run_index::Index;
use apollo11_core::{EventId, PayloadRef};
use apollo11_store::{sha256_hex, StoreError};
use std::collections::BTreeMap;
use std::path::Path;

/// A damaged or missing blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobReport {
    /// `blobs/<sha256>`, relative to the data directory.
    pub file: String,
    /// What is wrong.
    pub problem: String,
    /// The events that refer to it (none for a damaged file no event refers to).
    pub used_by: Vec<BlobUse>,
}

/// An event that refers to a blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobUse {
    /// The event.
    pub event_id: u64,
    /// Its run.
    pub run_id: String,
    /// Its step (`None` for a run-level event).
    pub step: Option<String>,
}

/// Whether `name` is a blob's name: 64 lower-case hex digits (so it is also a safe path).
fn is_blob_name(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Hashes every blob file and checks every reference of the events in `index`; returns the
/// number of blob files and the problems, by blob.
pub fn verify(
    fs: &dyn Fs,
    dir: &Path,
    index: &Index,
) -> Result<(u64, Vec<BlobReport>), StoreError> {
    let files = hash_files(fs, &dir.join("blobs"))?;
    let mut problems: BTreeMap<(String, String), Vec<BlobUse>> = BTreeMap::new();
    let mut check = |event: &apollo11_core::EventRef<'_>| {
        let PayloadRef::Blob(blob) = &event.payload else {
            return;
        };
        let problem = match files.get(&blob.sha256) {
            _ if !is_blob_name(&blob.sha256) => "the reference is not a SHA-256".to_owned(),
            None => "missing".to_owned(),
            Some(Err(problem)) => problem.clone(),
            Some(Ok(bytes)) if *bytes != blob.bytes => format!(
                "the event says {} bytes, the file holds {bytes}",
                blob.bytes
            ),
            Some(Ok(_)) => return,
        };
        let used = BlobUse {
            event_id: event.event_id.0,
            run_id: event.run_id.to_owned(),
            step: event.step.map(str::to_owned),
        };
        let file = format!("blobs/{}", blob.sha256.escape_debug());
        problems.entry((file, problem)).or_default().push(used);
    };
    let mut from = 1;
    while let Some(last) = index.scan_from(EventId(from), 1 << 16, &mut check)? {
        from = last.0 + 1;
    }
    for (name, hashed) in &files {
        let file = format!("blobs/{name}");
        if let Err(problem) = hashed {
            if !problems.keys().any(|(f, _)| *f == file) {
                problems.insert((file, problem.clone()), Vec::new());
            }
        }
    }
    let reports = problems
        .into_iter()
        .map(|((file, problem), used_by)| BlobReport {
            file,
            problem,
            used_by,
        })
        .collect();
    Ok((files.len() as u64, reports))
}

/// Each blob file's length, or what is wrong with it.
fn hash_files(
    fs: &dyn Fs,
    blobs: &Path,
) -> Result<BTreeMap<String, Result<u64, String>>, StoreError> {
    let names = match fs.list(blobs) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(StoreError::io(format!("listing {}", blobs.display()), e)),
    };
    let mut files = BTreeMap::new();
    for name in names.into_iter().filter(|n| is_blob_name(n)) {
        let hashed = match fs
            .open(&blobs.join(&name), Mode::Read)
            .and_then(|f| f.read_all())
        {
            Ok(bytes) => {
                let actual = sha256_hex(&bytes);
                if actual == name {
                    Ok(bytes.len() as u64)
                } else {
                    Err(format!("its {} bytes hash to {actual}", bytes.len()))
                }
            }
            Err(e) => Err(format!("unreadable: {e}")),
        };
        files.insert(name, hashed);
    }
    Ok(files)
}
