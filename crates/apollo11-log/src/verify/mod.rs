//! `verify`: check every record, segment, snapshot, blob and archive file without changing
//! anything, and report what is there, the first damage in the log, and every damaged
//! snapshot, blob and archive file.
//! It reads index files only as evidence (of missing data) and to report the ones an open
//! would ignore, never instead of a segment.

mod blobs;
mod snapshots;

use crate::file_system::{Fs, Mode, RealFs};
use crate::load::{add_to_index, inspect, segment_names, Damage, Inspected, Verdict};
use crate::missing::{self, End};
use crate::run_index::Index;
use apollo11_store::StoreError;
use std::path::{Path, PathBuf};
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
    /// count, [`VerifyReport::event_count`], once `gc` moved runs out, whose ids compacted
    /// segments skip).
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
    /// An archive file holding event ids past the log's last intact event (the highest of
    /// them): the live log lost its end, and those ids must not be given again. `repair`
    /// reserves them (docs/log-format.md, Archive).
    pub ids_past_end: Option<Damage>,
    /// Archive files every run of which the live log still holds whole, with no manifest:
    /// copies a `gc` stopped before its swap left, which nothing reads and the next writing
    /// open removes. They leave the report clean.
    pub leftover_archives: Vec<String>,
    /// Manifests of `gc` swaps a crash interrupted (`archive/<gen>.gc`), which the next
    /// writing open finishes: until then a run's events may be found in a segment not yet
    /// rewritten while its earlier ones are gone, which this report shows as damage.
    pub unfinished_gc: Vec<String>,
}

impl VerifyReport {
    /// Committed events readable up to the first damage, counted (`events` is the last one's
    /// id): those of the segments up to the damaged one, its intact ones included.
    pub fn event_count(&self) -> u64 {
        let damaged = self.damage.as_ref().map(|d| d.file.as_str());
        let upto = (self.segments.iter())
            .position(|s| Some(s.file.as_str()) == damaged)
            .map_or(self.segments.len(), |p| p + 1);
        self.segments[..upto].iter().map(|s| s.events).sum()
    }

    /// True when no segment, snapshot or blob is damaged and no committed data is missing.
    pub fn is_clean(&self) -> bool {
        self.damage.is_none()
            && self.snapshots.iter().all(|s| s.problem.is_none())
            && self.blob_problems.is_empty()
            && self.archive_problems.is_empty()
            && self.ids_past_end.is_none()
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
    let intact: Vec<PathBuf> = (report.archives.iter())
        .map(|checked| dir.join(&checked.file))
        .collect();
    let against = crate::archive::against(fs, &intact, &index)?;
    report.archive_problems.extend(against.clashes);
    // An unfinished swap's archive file holds runs still live too, until the swap is done.
    report.leftover_archives = (against.leftovers.iter())
        .map(|path| crate::archive::name_of(path))
        .filter(|name| !report.unfinished_gc.contains(&name.replace(".arc", ".gc")))
        .collect();
    report.ids_past_end = ids_past_end(fs, dir, &report)?;
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

/// The archive file holding the highest archived id, when that is past the log's last intact
/// event and no segment listed now starts past the id after it (a writer may have appended
/// and rolled since, and `gc` archived from the segment it sealed; an empty last segment
/// starting right after the last event, as a roll leaves, is no sign of that).
fn ids_past_end(
    fs: &dyn Fs,
    dir: &Path,
    report: &VerifyReport,
) -> Result<Option<Damage>, StoreError> {
    let top = (report.archives.iter()).max_by_key(|checked| checked.last_event_id);
    let Some(top) = top.filter(|t| t.last_event_id > report.events) else {
        return Ok(None);
    };
    let later = (segment_names(fs, dir)?.iter())
        .filter_map(|name| crate::format::segment::parse_file_name(name))
        .any(|base| base > report.events + 1);
    Ok((!later).then(|| crate::archive::past_end(&top.file, top.last_event_id, report.events)))
}
