//! Small durable-file helpers: write a whole file atomically (temp, sync, rename, sync dir),
//! and keep removed bytes in a `.torn` file instead of destroying them.

use crate::file_system::{Fs, Mode};
use apollo11_store::StoreError;
use std::path::Path;

/// Writes `bytes` to `path` so that after a crash the path holds either the old content or
/// all of the new one.
pub fn write_atomically(fs: &dyn Fs, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = path.with_extension("tmp");
    let io = |what: &str, e| StoreError::io(format!("{what} {}", tmp.display()), e);
    // A temp file left by a crash is garbage by definition.
    let _ = fs.remove(&tmp);
    let file = fs
        .open(&tmp, Mode::CreateNew)
        .map_err(|e| io("creating", e))?;
    file.write_all_at(bytes, 0).map_err(|e| io("writing", e))?;
    file.sync_data().map_err(|e| io("syncing", e))?;
    drop(file);
    fs.rename(&tmp, path).map_err(|e| io("renaming", e))?;
    sync_dir_of(fs, path)
}

/// Syncs the directory holding `path`.
pub fn sync_dir_of(fs: &dyn Fs, path: &Path) -> Result<(), StoreError> {
    let dir = path.parent().expect("data files live in a directory");
    fs.sync_dir(dir)
        .map_err(|e| StoreError::io(format!("syncing directory {}", dir.display()), e))
}

/// The `n`th name a file kept aside is tried under: `base`, then `base.N`.
pub(crate) fn nth_name(base: &str, n: u32) -> String {
    if n == 0 {
        base.to_owned()
    } else {
        format!("{base}.{n}")
    }
}

/// Saves `bytes` cut from `file` at `offset` as `<file>.<offset>.torn` (`.torn.N` if that
/// exists), synced. Returns the name used.
pub fn keep_torn(
    fs: &dyn Fs,
    file: &Path,
    offset: u64,
    bytes: &[u8],
) -> Result<String, StoreError> {
    let base = format!("{}.{offset}.torn", file.display());
    for n in 0..1000 {
        let name = nth_name(&base, n);
        let path = Path::new(&name);
        match fs.open(path, Mode::CreateNew) {
            Ok(torn) => {
                let io = |e| StoreError::io(format!("writing {name}"), e);
                torn.write_all_at(bytes, 0).map_err(io)?;
                torn.sync_data().map_err(io)?;
                sync_dir_of(fs, path)?;
                return Ok(name);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(StoreError::io(format!("creating {name}"), e)),
        }
    }
    Err(StoreError::Invalid {
        what: "torn files".into(),
        reason: format!("1000 files named {base}.N exist"),
    })
}
