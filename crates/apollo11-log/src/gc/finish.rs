//! A swap a crash interrupted, at a writing open, before the segments are read: a manifest
//! found means the archive file is in place (the runs are archived), so the swap is finished
//! (each segment it names rewritten again from what is there, which changes nothing in one
//! rewritten already, and renamed over) and the manifest removed: the new state. Without a
//! manifest, `.seg.gc` and `.tmp` files (an archive file's or a manifest's) are what a crash
//! left before the commit point (or of a swap finished but for their removal): removed, the
//! old state.

use super::manifest::{self, Manifest};
use super::rewrite::{remove_index_files, rename_over, write_without};
use crate::durable_files::sync_dir_of;
use crate::file_system::Fs;
use crate::format::segment::file_name;
use apollo11_store::StoreError;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Finishes every swap a manifest names, then removes the leftovers of any other.
///
/// # Errors
///
/// [`StoreError::Corrupted`] naming a manifest that fails its checks, the archive file of a
/// manifest that is damaged or a segment that does not scan cleanly; [`StoreError::Io`].
pub(crate) fn finish_at_open(fs: &dyn Fs, dir: &Path) -> Result<(), StoreError> {
    for found in manifest::found(fs, dir)? {
        finish(fs, dir, &found)?;
    }
    remove_leftovers(fs, &dir.join("segments"), ".seg.gc")?;
    // `.arc.tmp` (an archive file's) and `<gen>.tmp` (a manifest's).
    remove_leftovers(fs, &dir.join(crate::archive::DIR), ".tmp")
}

/// The manifests in `dir` (`archive/<gen>.gc`, relative to it): swaps a crash interrupted,
/// which the next writing open finishes.
///
/// # Errors
///
/// [`StoreError::Io`] when the archive folder cannot be listed.
pub(crate) fn unfinished(fs: &dyn Fs, dir: &Path) -> Result<Vec<String>, StoreError> {
    let folder = dir.join(crate::archive::DIR);
    let names = match fs.list(&folder) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io(format!("listing {}", folder.display()), e)),
    };
    Ok((names.into_iter().filter(|n| n.ends_with(".gc")))
        .map(|n| format!("{}/{n}", crate::archive::DIR))
        .collect())
}

fn finish(fs: &dyn Fs, dir: &Path, found: &Manifest) -> Result<(), StoreError> {
    let archive = crate::archive::path_of(dir, found.generation);
    let runs = crate::archive::run_ids_of(fs, &archive)?;
    let runs: HashSet<&str> = runs.iter().map(|r| r.as_str()).collect();
    let mut rewritten: Vec<PathBuf> = Vec::new();
    for &base in &found.segments {
        let name = format!("segments/{}", file_name(base));
        let path = dir.join(&name);
        if write_without(fs, &path, &name, &|run| runs.contains(run))?.is_some() {
            rewritten.push(path);
        }
    }
    remove_index_files(fs, rewritten.iter().map(PathBuf::as_path))?;
    for path in &rewritten {
        rename_over(fs, path)?;
    }
    // Even when every segment was rewritten already: the crash may have come before the
    // directory sync that made those renames durable, and the manifest is all that redoes them.
    if let Some(&base) = found.segments.first() {
        sync_dir_of(fs, &dir.join("segments").join(file_name(base)))?;
    }
    manifest::remove(fs, dir, found.generation)
}

/// Removes the files of `folder` whose names end with `suffix`, the folder synced if any.
fn remove_leftovers(fs: &dyn Fs, folder: &Path, suffix: &str) -> Result<(), StoreError> {
    let names = match fs.list(folder) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io(format!("listing {}", folder.display()), e)),
    };
    let mut removed = false;
    for name in names.iter().filter(|n| n.ends_with(suffix)) {
        let path = folder.join(name);
        fs.remove(&path)
            .map_err(|e| StoreError::io(format!("removing {}", path.display()), e))?;
        removed = true;
    }
    if removed {
        fs.sync_dir(folder)
            .map_err(|e| StoreError::io(format!("syncing {}", folder.display()), e))?;
    }
    Ok(())
}
