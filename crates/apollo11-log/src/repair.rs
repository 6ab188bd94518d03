//! `repair`: the explicit, destructive answer to damage, and to committed data found missing
//! at the end of the log. It accepts the loss: it cuts the log at the damage (the bytes cut
//! are kept in `.torn` files), then drops what described the lost data (snapshots past the
//! new end, index files of the new last segment and of segments that are gone), so that the
//! next open finds a clean log. Nothing else ever cuts committed data or those files.

use crate::files::keep_torn;
use crate::fs::{Fs, Mode, RealFs};
use crate::recover::{list_segments_dir, Damage};
use crate::segment::parse_file_name;
use crate::verify::{verify_with, SegmentReport};
use crate::{idx, snapshot};
use apollo11_store::StoreError;
use std::path::Path;
use std::sync::Arc;

/// What `repair` removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// The damage that was cut at, if any.
    pub damage: Option<Damage>,
    /// Committed events kept.
    pub events_kept: u64,
    /// Files the removed bytes were kept in.
    pub kept_in: Vec<String>,
    /// Derived files removed: snapshots past the new end, stale index files.
    pub dropped: Vec<String>,
}

/// Cuts the log at its first damage: the damaged segment is truncated after its last intact
/// batch and every later segment is moved aside; then snapshots past the new end and stale
/// index files are removed. Destroys acknowledged events after the damage (their bytes are
/// kept in `.torn` files): run it only on purpose. Takes the lock.
pub fn repair_with(fs: Arc<dyn Fs>, dir: impl AsRef<Path>) -> Result<RepairReport, StoreError> {
    let dir = dir.as_ref();
    let _lock = crate::log::take_lock(fs.as_ref(), dir)?;
    let report = verify_with(fs.clone(), dir)?;
    let Some(damage) = report.damage.clone() else {
        return Ok(RepairReport {
            events_kept: report.events,
            ..RepairReport::default()
        });
    };
    let kept_in = cut(fs.as_ref(), dir, &report.segments, &damage)?;
    let cut_report = verify_with(fs.clone(), dir)?;
    let dropped = drop_derived(fs.as_ref(), dir, cut_report.events)?;
    let after = verify_with(fs, dir)?;
    assert!(
        after.damage.is_none(),
        "repair left damage: {:?}",
        after.damage
    );
    Ok(RepairReport {
        damage: Some(damage),
        events_kept: after.events,
        kept_in,
        dropped,
    })
}

/// Truncates the damaged segment after its intact data (all of it when the header is
/// damaged) and moves every later segment aside; returns the `.torn` files written.
fn cut(
    fs: &dyn Fs,
    dir: &Path,
    segments: &[SegmentReport],
    damage: &Damage,
) -> Result<Vec<String>, StoreError> {
    let mut kept_in = Vec::new();
    let mut cutting = false;
    for segment in segments {
        let path = dir.join(&segment.file);
        cutting |= segment.file == damage.file;
        if !cutting {
            continue;
        }
        let io = |e| StoreError::io(format!("repairing {}", path.display()), e);
        idx::remove(fs, &path);
        let file = fs.open(&path, Mode::Write).map_err(io)?;
        let bytes = file.read_all().map_err(io)?;
        // Damage in the header takes the whole segment; elsewhere, keep what is intact.
        let cut_at = match (segment.file == damage.file, damage.offset) {
            (true, 0) | (false, _) => 0,
            (true, offset) => segment.bytes.min(offset),
        };
        let rest = &bytes[(cut_at as usize).min(bytes.len())..];
        if rest.iter().any(|&b| b != 0) {
            kept_in.push(keep_torn(fs, &path, cut_at, rest)?);
        }
        if cut_at == 0 {
            drop(file);
            fs.remove(&path).map_err(io)?;
        } else {
            file.set_len(cut_at).map_err(io)?;
            file.sync_data().map_err(io)?;
        }
    }
    let segments = dir.join("segments");
    fs.sync_dir(&segments)
        .map_err(|e| StoreError::io(format!("syncing {}", segments.display()), e))?;
    Ok(kept_in)
}

/// Removes the snapshots past event `last` and the index files that could vouch for data the
/// cut removed: the new last segment's (it will grow) and those of segments that are gone.
fn drop_derived(fs: &dyn Fs, dir: &Path, last: u64) -> Result<Vec<String>, StoreError> {
    let listed = list_segments_dir(fs, dir)?;
    let last_segment = listed.iter().rfind(|n| parse_file_name(n).is_some());
    let mut dropped = Vec::new();
    for name in listed.iter().filter(|n| n.ends_with(".idx")) {
        let segment = name.replace(".idx", ".seg");
        if !listed.contains(&segment) || Some(&segment) == last_segment {
            let path = dir.join("segments").join(name);
            fs.remove(&path)
                .map_err(|e| StoreError::io(format!("removing {}", path.display()), e))?;
            dropped.push(format!("segments/{name}"));
        }
    }
    let snapshots = dir.join("snapshots");
    let names = fs.list(&snapshots).unwrap_or_default();
    let past = names
        .iter()
        .filter(|n| snapshot::watermark_of(n).is_some_and(|w| w > last));
    dropped.extend(past.map(|n| format!("snapshots/{n}")));
    snapshot::remove_past(fs, &snapshots, last)?;
    let segments = dir.join("segments");
    fs.sync_dir(&segments)
        .map_err(|e| StoreError::io(format!("syncing {}", segments.display()), e))?;
    Ok(dropped)
}

/// [`repair_with`] on the real file system.
pub fn repair(dir: impl AsRef<Path>) -> Result<RepairReport, StoreError> {
    repair_with(Arc::new(RealFs), dir)
}
