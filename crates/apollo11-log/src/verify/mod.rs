//! `verify`: check every record, segment, snapshot, blob and archive file without changing
//! anything, and report what is there, the first damage in the log, and every damaged
//! snapshot, blob and archive file.
//! It reads index files only as evidence (of missing data) and to report the ones an open
//! would ignore, never instead of a segment.

mod blobs;
mod snapshots;

use crate::fs::{Fs, Mode, RealFs};
use crate::index::Index;
use crate::missing::{self, End};
use crate::recover::{add_to_index, inspect, segment_names, Damage, Inspected, Verdict};
use apollo11_store::StoreError;
use std::path::Path;
use std::sync::Arc;

pub use blobs::{BlobReport, BlobUse};

/// One segment as verify saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentReport {
    /// File, relative to the data directory.
    pub file: String,
    /// First event id (0 if the header is unreadable).
    pub base_event_id: u64,
    /// Committed events.
    pub events: u64,
    /// End of the committed data.
    pub bytes: u64,
    /// The file's size on disk when it is compressed (its records are checked decompressed).
    pub stored_bytes: Option<u64>,
}

/// One snapshot as verify saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotReport {
    /// File, relative to the data directory.
    pub file: String,
    /// Last event id it covers, if readable.
    pub watermark: Option<u64>,
    /// What is wrong with it, if anything.
    pub problem: Option<String>,
}

/// Everything verify found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Every segment, in order.
    pub segments: Vec<SegmentReport>,
    /// Every snapshot, oldest first.
    pub snapshots: Vec<SnapshotReport>,
    /// Committed events readable up to the first damage: the last one's id (more than their
    /// count once `gc` moved runs out, whose ids compacted segments skip).
    pub events: u64,
    /// A torn tail a writing open would cut (what a crash leaves; not damage).
    pub torn_tail: Option<Damage>,
    /// `.torn` files kept from earlier cuts.
    pub torn_files: Vec<String>,
    /// The first damage in the log, committed data found missing at its end included.
    pub damage: Option<Damage>,
    /// Index files an open ignores (damaged, or not matching their segment), and why. They
    /// are derived data, rebuilt by the next writing open, so they leave the report clean.
    pub ignored_index_files: Vec<Damage>,
    /// Blob files checked (each one's bytes hashed).
    pub blobs: u64,
    /// Damaged or missing blobs, with the events that refer to them.
    pub blob_problems: Vec<BlobReport>,
    /// Archive files that passed their check (every byte of them), oldest first.
    pub archives: Vec<crate::archive::Checked>,
    /// Archive files that fail it: the file, and the offset and reason of its first damage.
    pub archive_problems: Vec<Damage>,
    /// Manifests of `gc` swaps a crash interrupted (`archive/<gen>.gc`), which the next
    /// writing open finishes: until then a run's events may be found in a segment not yet
    /// rewritten while its earlier ones are gone, which this report shows as damage.
    pub unfinished_gc: Vec<String>,
}

impl VerifyReport {
    /// True when no segment, snapshot or blob is damaged and no committed data is missing.
    pub fn is_clean(&self) -> bool {
        self.damage.is_none()
            && self.snapshots.iter().all(|s| s.problem.is_none())
            && self.blob_problems.is_empty()
            && self.archive_problems.is_empty()
    }
}

/// Verifies the data directory `dir` on the real file system.
///
/// # Errors
///
/// As [`verify_with`].
pub fn verify(dir: impl AsRef<Path>) -> Result<VerifyReport, StoreError> {
    verify_with(Arc::new(RealFs), dir)
}

/// Verifies `dir` on `fs`. Works while a writer is running (it takes no lock). Damage
/// found while a `gc` manifest is there is looked at again a few times (the swap's renames
/// may have been met half done).
///
/// # Errors
///
/// [`StoreError::Io`] when a directory or file cannot be listed or read;
/// [`StoreError::GcInProgress`] when the segments still show damage and the manifest is still
/// there after the last look. Damage is not an error: the report holds it.
pub fn verify_with(fs: Arc<dyn Fs>, dir: impl AsRef<Path>) -> Result<VerifyReport, StoreError> {
    let (fs, dir) = (fs.as_ref(), dir.as_ref());
    let damaged = |r: &Result<VerifyReport, _>| r.as_ref().is_ok_and(|r| r.damage.is_some());
    crate::gc::look_beside_swaps(fs, dir, damaged, || verify_once(fs, dir))
}

/// One pass of [`verify_with`].
fn verify_once(fs: &dyn Fs, dir: &Path) -> Result<VerifyReport, StoreError> {
    let before = missing::list_before(fs, dir)?;
    let mut report = VerifyReport {
        unfinished_gc: crate::gc::unfinished(fs, dir)?,
        ..VerifyReport::default()
    };
    let index = verify_segments(fs, dir, &before, &mut report)?;
    report.torn_files = fs
        .list(&dir.join("segments"))
        .map_err(|e| StoreError::io("listing segments", e))?
        .into_iter()
        .filter(|n| n.contains(".torn"))
        .collect();
    report.snapshots = snapshots::verify(fs, dir, &index)?;
    (report.blobs, report.blob_problems) = blobs::verify(fs, dir, &index)?;
    for path in crate::archive::files(fs, dir)? {
        match crate::archive::check(fs, &path) {
            Ok(checked) => report.archives.push(checked),
            Err(StoreError::Corrupted {
                file,
                offset,
                reason,
            }) => report.archive_problems.push(Damage {
                file,
                offset,
                reason,
            }),
            Err(other) => return Err(other),
        }
    }
    Ok(report)
}

/// Scans every segment into `report` and returns the index of the intact events (up to the
/// first damage).
fn verify_segments(
    fs: &dyn Fs,
    dir: &Path,
    before: &missing::Before,
    report: &mut VerifyReport,
) -> Result<Index, StoreError> {
    let names = segment_names(fs, dir)?;
    let mut index = Index::default();
    let (mut last, mut previous_kind) = (None::<Inspected>, None);
    for name in &names {
        let is_last = Some(name) == names.last();
        let inspected = inspect(fs, dir, name, is_last, Mode::Read, false)?;
        let scanned = inspected.scanned.as_ref();
        report.segments.push(SegmentReport {
            file: inspected.name.clone(),
            base_event_id: scanned.map_or(0, |s| s.base),
            events: scanned.map_or(0, |s| s.events.len() as u64),
            bytes: scanned.map_or(0, |s| s.end),
            stored_bytes: inspected.stored_bytes,
        });
        report
            .ignored_index_files
            .extend(inspected.index_problem.clone());
        if report.damage.is_some() {
            continue;
        }
        match &inspected.verdict {
            Verdict::Clean => {}
            Verdict::Torn { offset, reason, .. } => {
                report.torn_tail = Some(Damage {
                    file: inspected.name.clone(),
                    offset: *offset,
                    reason: reason.clone(),
                });
            }
            Verdict::Damaged(damage) => report.damage = Some(damage.clone()),
        }
        if let Err(StoreError::Corrupted {
            file,
            offset,
            reason,
        }) = add_to_index(&mut index, &inspected)
        {
            report.damage = Some(Damage {
                file,
                offset,
                reason,
            });
        }
        // Intact events up to the first damage, the damaged segment's intact prefix included.
        report.events = index.last_event_id;
        if is_last {
            last = Some(inspected);
        } else {
            previous_kind = inspected.index_kind;
        }
    }
    if report.damage.is_none() {
        let end = End {
            last: last.as_ref(),
            previous_kind,
            last_event_id: index.last_event_id,
        };
        if let Some(damage) = missing::at_end(fs, dir, before, &end)? {
            // Not a torn tail: the data after it was committed.
            report.torn_tail = None;
            report.damage = Some(damage);
        }
    }
    Ok(index)
}
