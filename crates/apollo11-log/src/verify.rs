//! `verify`: check every record, segment and snapshot without changing anything, and report
//! what is there and the first damage. `repair`: the explicit, destructive answer to damage.

use crate::files::keep_torn;
use crate::fs::{Fs, Mode, RealFs};
use crate::index::Index;
use crate::recover::{add_to_index, inspect, segment_names, Damage, Verdict};
use crate::snapshot;
use apollo11_store::StoreError;
use std::path::Path;
use std::sync::Arc;

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
    /// Committed events readable up to the first damage.
    pub events: u64,
    /// A torn tail a writing open would cut (what a crash leaves; not damage).
    pub torn_tail: Option<Damage>,
    /// `.torn` files kept from earlier cuts.
    pub torn_files: Vec<String>,
    /// The first damage in the log.
    pub damage: Option<Damage>,
}

impl VerifyReport {
    /// True when no segment and no snapshot is damaged.
    pub fn is_clean(&self) -> bool {
        self.damage.is_none() && self.snapshots.iter().all(|s| s.problem.is_none())
    }
}

/// Verifies the data directory `dir` on the real file system.
pub fn verify(dir: impl AsRef<Path>) -> Result<VerifyReport, StoreError> {
    verify_with(Arc::new(RealFs), dir)
}

/// Verifies `dir` on `fs`. Works while a writer is running (it takes no lock).
pub fn verify_with(fs: Arc<dyn Fs>, dir: impl AsRef<Path>) -> Result<VerifyReport, StoreError> {
    let dir = dir.as_ref();
    let names = segment_names(fs.as_ref(), dir)?;
    let mut report = VerifyReport::default();
    let mut index = Index::default();
    for (i, name) in names.iter().enumerate() {
        let last = i + 1 == names.len();
        let inspected = inspect(fs.as_ref(), dir, name, last, Mode::Read, false)?;
        let scanned = inspected.scanned.as_ref();
        report.segments.push(SegmentReport {
            file: inspected.name.clone(),
            base_event_id: scanned.map_or(0, |s| s.base),
            events: scanned.map_or(0, |s| s.events.len() as u64),
            bytes: scanned.map_or(0, |s| s.end),
        });
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
    }
    report.torn_files = fs
        .list(&dir.join("segments"))
        .map_err(|e| StoreError::io("listing segments", e))?
        .into_iter()
        .filter(|n| n.contains(".torn"))
        .collect();
    report.snapshots = verify_snapshots(fs.as_ref(), dir, index.last_event_id)?;
    Ok(report)
}

fn verify_snapshots(
    fs: &dyn Fs,
    dir: &Path,
    last_event_id: u64,
) -> Result<Vec<SnapshotReport>, StoreError> {
    let snapshots = dir.join("snapshots");
    let names = match fs.list(&snapshots) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            return Err(StoreError::io(
                format!("listing {}", snapshots.display()),
                e,
            ))
        }
    };
    let mut out = Vec::new();
    for name in names.into_iter().filter(|n| snapshot::is_snapshot(n)) {
        let path = snapshots.join(&name);
        let decoded = fs
            .open(&path, Mode::Read)
            .and_then(|f| f.read_all())
            .map_err(|e| e.to_string())
            .and_then(|b| snapshot::decode(&b));
        let (watermark, problem) = match decoded {
            Ok(s) if s.watermark.0 > last_event_id => (
                Some(s.watermark.0),
                Some(format!(
                    "covers events up to {}, past the log's last event {last_event_id}",
                    s.watermark
                )),
            ),
            Ok(s) => (Some(s.watermark.0), None),
            Err(reason) => (None, Some(reason)),
        };
        out.push(SnapshotReport {
            file: format!("snapshots/{name}"),
            watermark,
            problem,
        });
    }
    Ok(out)
}

/// What `repair` removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// The damage that was cut at, if any.
    pub damage: Option<Damage>,
    /// Committed events kept.
    pub events_kept: u64,
    /// Files the removed bytes were kept in.
    pub kept_in: Vec<String>,
}

/// Cuts the log at its first damage: the damaged segment is truncated after its last intact
/// batch and every later segment is moved aside. Destroys acknowledged events after the
/// damage (their bytes are kept in `.torn` files): run it only on purpose. Takes the lock.
pub fn repair_with(fs: Arc<dyn Fs>, dir: impl AsRef<Path>) -> Result<RepairReport, StoreError> {
    let dir = dir.as_ref();
    let _lock = crate::log::take_lock(fs.as_ref(), dir)?;
    let report = verify_with(fs.clone(), dir)?;
    let Some(damage) = report.damage.clone() else {
        return Ok(RepairReport {
            damage: None,
            events_kept: report.events,
            kept_in: Vec::new(),
        });
    };
    let mut kept_in = Vec::new();
    let mut cutting = false;
    for segment in &report.segments {
        let path = dir.join(&segment.file);
        let file = fs
            .open(&path, Mode::Write)
            .map_err(|e| StoreError::io(format!("opening {}", path.display()), e))?;
        let io = |e| StoreError::io(format!("repairing {}", path.display()), e);
        if segment.file == damage.file || cutting {
            crate::idx::remove(fs.as_ref(), &path);
        }
        if segment.file == damage.file {
            cutting = true;
            let bytes = file.read_all().map_err(io)?;
            // Damage in the header takes the whole segment; elsewhere, keep what is intact.
            let cut_at = if damage.offset == 0 {
                0
            } else {
                segment.bytes.min(damage.offset)
            };
            kept_in.push(keep_torn(
                fs.as_ref(),
                &path,
                cut_at,
                &bytes[cut_at as usize..],
            )?);
            if cut_at == 0 {
                drop(file);
                fs.remove(&path).map_err(io)?;
            } else {
                file.set_len(cut_at).map_err(io)?;
                file.sync_data().map_err(io)?;
            }
        } else if cutting {
            let bytes = file.read_all().map_err(io)?;
            kept_in.push(keep_torn(fs.as_ref(), &path, 0, &bytes)?);
            drop(file);
            fs.remove(&path).map_err(io)?;
        }
    }
    let segments = dir.join("segments");
    fs.sync_dir(&segments)
        .map_err(|e| StoreError::io(format!("syncing {}", segments.display()), e))?;
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
    })
}

/// [`repair_with`] on the real file system.
pub fn repair(dir: impl AsRef<Path>) -> Result<RepairReport, StoreError> {
    repair_with(Arc::new(RealFs), dir)
}
