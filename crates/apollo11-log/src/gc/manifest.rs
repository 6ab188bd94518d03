//! The manifest of a swap, `archive/<generation:020>.gc`: which archive file holds the runs
//! moved out and which sealed segments are rewritten without them. Written (temp file,
//! `fdatasync`, rename, directory `fsync`) once the archive file is in place and before any
//! segment is replaced; removed (directory synced) once every one is. An open that finds one
//! finishes the swap before it reads the segments.
//!
//! `[magic "A11GCMAN"][version u32 = 1][generation u64][segments u32]([base u64])*
//! [crc32 u32 of everything before]`, little-endian.

use crate::durable_files::write_atomically;
use crate::file_system::{Fs, Mode};
use apollo11_store::StoreError;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"A11GCMAN";
const VERSION: u32 = 1;

/// A swap in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The archive file's generation.
    pub generation: u64,
    /// The base event ids of the segments rewritten.
    pub segments: Vec<u64>,
}

/// The manifest of `generation` in the data directory `dir`.
pub fn path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(crate::archive::DIR)
        .join(format!("{generation:020}.gc"))
}

/// Every manifest in `dir` (an unreadable one is an error: the swap it names is unfinished).
///
/// # Errors
///
/// [`StoreError::Io`] when the archive folder cannot be listed or a manifest read;
/// [`StoreError::Corrupted`] naming a manifest that fails its checks.
pub fn found(fs: &dyn Fs, dir: &Path) -> Result<Vec<Manifest>, StoreError> {
    let folder = dir.join(crate::archive::DIR);
    let names = match fs.list(&folder) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io(format!("listing {}", folder.display()), e)),
    };
    let mut out = Vec::new();
    for name in names.iter().filter(|n| n.ends_with(".gc")) {
        let path = folder.join(name);
        let bytes = (fs.open(&path, Mode::Read).and_then(|f| f.read_all()))
            .map_err(|e| StoreError::io(format!("reading {}", path.display()), e))?;
        out.push(decode(&bytes).map_err(|reason| StoreError::Corrupted {
            file: format!("{}/{name}", crate::archive::DIR),
            offset: 0,
            reason,
        })?);
    }
    Ok(out)
}

/// Writes `manifest` durably.
///
/// # Errors
///
/// [`StoreError::Io`] naming the file.
pub fn write(fs: &dyn Fs, dir: &Path, manifest: &Manifest) -> Result<(), StoreError> {
    write_atomically(fs, &path(dir, manifest.generation), &encode(manifest))
}

/// Removes the manifest of `generation`, durably: the swap it named is done.
///
/// # Errors
///
/// [`StoreError::Io`] naming the file.
pub fn remove(fs: &dyn Fs, dir: &Path, generation: u64) -> Result<(), StoreError> {
    let path = path(dir, generation);
    fs.remove(&path)
        .map_err(|e| StoreError::io(format!("removing {}", path.display()), e))?;
    crate::durable_files::sync_dir_of(fs, &path)
}

fn encode(manifest: &Manifest) -> Vec<u8> {
    let mut out = Vec::with_capacity(28 + 8 * manifest.segments.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&manifest.generation.to_le_bytes());
    out.extend_from_slice(&(manifest.segments.len() as u32).to_le_bytes());
    for base in &manifest.segments {
        out.extend_from_slice(&base.to_le_bytes());
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn decode(bytes: &[u8]) -> Result<Manifest, String> {
    let body = bytes.len().checked_sub(4).map(|at| bytes.split_at(at));
    let Some((body, _)) = body.filter(|(body, crc)| crc32fast::hash(body).to_le_bytes() == **crc)
    else {
        return Err(format!(
            "gc manifest fails its checksum ({} bytes)",
            bytes.len()
        ));
    };
    if body.len() < 24 || &body[..8] != MAGIC {
        return Err("not a gc manifest (bad magic)".into());
    }
    let u32_at = |at: usize| u32::from_le_bytes(body[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
    if u32_at(8) != VERSION {
        return Err(format!(
            "gc manifest version {}; this build reads {VERSION}",
            u32_at(8)
        ));
    }
    let count = u32_at(20) as usize;
    if body.len() != 24 + 8 * count {
        return Err(format!(
            "gc manifest of {} bytes names {count} segments",
            bytes.len()
        ));
    }
    Ok(Manifest {
        generation: u64_at(12),
        segments: (0..count).map(|i| u64_at(24 + 8 * i)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_back_and_any_flip_or_cut_is_refused() {
        let manifest = Manifest {
            generation: 3,
            segments: vec![1, 70, 900],
        };
        let bytes = encode(&manifest);
        assert_eq!(decode(&bytes), Ok(manifest));
        for (what, bad) in crate::damage::damaged(&bytes) {
            assert!(decode(&bad).is_err(), "{what}");
        }
    }
}
