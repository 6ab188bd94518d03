//! `repair`: the explicit, destructive answer to damage, and to committed data found missing
//! at the end of the log. It accepts the loss: it cuts the log at the damage (the bytes cut
//! are kept in `.torn` files), then drops what described the lost data (snapshots past the
//! new end, index files of the new last segment and of segments that are gone), so that the
//! next open finds a clean log. Nothing else ever cuts committed data or those files.
//!
//! [`plan_repair`] says what a repair would do and changes nothing; [`repair`] carries out
//! exactly that plan, so a front end can show it and ask before anything is cut.

use crate::cold::open_segment;
use crate::durable_files::{keep_torn, nth_name, sync_dir_of, write_atomically};
use crate::file_system::{Fs, Mode, RealFs};
use crate::format::segment::parse_file_name;
use crate::load::{list_segments_dir, Damage};
use crate::snapshot;
use crate::verify::{verify_with, SegmentReport, VerifyReport};
use apollo11_core::RunId;
use apollo11_store::StoreError;
use std::path::Path;
use std::sync::Arc;

/// What `repair` would do, found without changing anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairPlan {
    /// The first damage, where the log is cut; `None` when there is nothing to repair.
    pub damage: Option<Damage>,
    /// Committed events before the damage: what the log keeps (the last one's id).
    pub events_kept: u64,
    /// Those events, counted (fewer than `events_kept` once `gc` moved runs out).
    pub event_count: u64,
    /// Segment files cut, in order: the damaged one, then every later one.
    pub cuts: Vec<SegmentCut>,
    /// Derived files removed (relative to the data directory): index files that describe cut
    /// data or a segment that will grow, snapshots past the new end or found damaged.
    pub drops: Vec<String>,
    /// Archive files set aside (renamed `<name>.damaged`, never removed nor overwritten):
    /// damaged ones, and ones holding an id the live log holds for another run. Their runs are
    /// no longer read.
    pub set_aside: Vec<SetAside>,
    /// The highest id an archive file holds (one set aside too, when its table reads), when it
    /// is past the events kept: the ids up to it are reserved (a compacted segment holding no events), never given again.
    pub reserve: Option<u64>,
}

impl RepairPlan {
    /// True when the repair would change nothing.
    pub fn is_empty(&self) -> bool {
        self.damage.is_none()
            && self.drops.is_empty()
            && self.set_aside.is_empty()
            && self.reserve.is_none()
    }
}

/// An archive file a repair sets aside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetAside {
    /// What is wrong with it: file (relative to the data directory), offset, reason.
    pub damage: Damage,
    /// The runs its table names (lost with it), `None` when the table itself is damaged.
    pub runs: Option<Vec<RunId>>,
    /// The highest event id its table names, when it reads: reserved like those of the
    /// archive files kept, so that the file renamed back later holds no id given again.
    pub last_event_id: Option<u64>,
    /// What it is renamed to (relative to the data directory): `<name>.damaged`, or
    /// `<name>.damaged.N` when that is taken (an earlier one may be the only copy of its runs).
    pub to: String,
}

/// One segment file a repair cuts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentCut {
    /// File, relative to the data directory.
    pub file: String,
    /// Where it is cut: 0 moves the whole file aside.
    pub at: u64,
    /// Bytes removed from it.
    pub bytes: u64,
    /// Whether any of them is not zero (those are kept in a `.torn` file).
    pub kept: bool,
}

/// What `repair` removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// The damage that was cut at, if any.
    pub damage: Option<Damage>,
    /// Committed events kept (the last one's id).
    pub events_kept: u64,
    /// Those events, counted.
    pub event_count: u64,
    /// Files the removed bytes were kept in.
    pub kept_in: Vec<String>,
    /// Derived files removed: snapshots past the new end, stale index files.
    pub dropped: Vec<String>,
    /// Archive files set aside, as renamed (`archive/<name>.damaged`).
    pub set_aside: Vec<String>,
    /// The segment written to reserve archived ids past the events kept, if any.
    pub reserved: Option<String>,
}

/// What [`repair_with`] would do to `dir` now. Reads only and takes no lock.
///
/// # Errors
///
/// What [`verify_with`] returns, and [`StoreError::Io`] when a file to cut cannot be read.
pub fn plan_repair_with(fs: Arc<dyn Fs>, dir: impl AsRef<Path>) -> Result<RepairPlan, StoreError> {
    let dir = dir.as_ref();
    let report = verify_with(fs.clone(), dir)?;
    plan(fs.as_ref(), dir, &report)
}

/// [`plan_repair_with`] on the real file system.
///
/// # Errors
///
/// As [`plan_repair_with`].
pub fn plan_repair(dir: impl AsRef<Path>) -> Result<RepairPlan, StoreError> {
    plan_repair_with(Arc::new(RealFs), dir)
}

/// Cuts the log at its first damage: the damaged segment is truncated after its last intact
/// batch and every later segment is moved aside; then snapshots past the new end or damaged
/// and stale index files are removed ([`plan_repair_with`] lists all of it first). Destroys
/// acknowledged events after the damage (their bytes are kept in `.torn` files): run it only
/// on purpose. Takes the lock.
///
/// # Errors
///
/// [`StoreError::Locked`] when another process holds the data directory; what
/// [`plan_repair_with`] returns; [`StoreError::Io`] when a cut, move or removal fails (the
/// repair can be run again); [`StoreError::Invalid`] naming the file when the log still holds
/// damage after the repair (a bug in it, never left unsaid).
pub fn repair_with(fs: Arc<dyn Fs>, dir: impl AsRef<Path>) -> Result<RepairReport, StoreError> {
    let dir = dir.as_ref();
    let lock = crate::open::take_lock(fs.as_ref(), dir, &crate::LockHolder::this_process(None))?;
    // A swap a crash interrupted is finished first, as a writing open does: what it left
    // half done is no damage to cut.
    crate::gc::finish_at_open(fs.as_ref(), dir)?;
    let report = verify_with(fs.clone(), dir)?;
    let plan = plan(fs.as_ref(), dir, &report)?;
    if plan.is_empty() {
        return Ok(RepairReport {
            events_kept: report.events,
            event_count: report.event_count(),
            ..RepairReport::default()
        });
    }
    lock.claim()
        .map_err(|e| StoreError::io(format!("writing {}", dir.join("LOCK").display()), e))?;
    // Index files go first: one left over a cut segment would vouch for what was cut.
    let (index_files, snapshots): (Vec<&String>, Vec<&String>) =
        plan.drops.iter().partition(|f| f.starts_with("segments/"));
    remove_all(fs.as_ref(), dir, &index_files, "segments")?;
    let kept_in = cut(fs.as_ref(), dir, &plan.cuts)?;
    remove_all(fs.as_ref(), dir, &snapshots, "snapshots")?;
    let set_aside = set_aside(fs.as_ref(), dir, &plan.set_aside)?;
    let reserved = (plan.reserve)
        .map(|up_to| crate::archive::reserve(fs.as_ref(), dir, plan.events_kept, up_to))
        .transpose()?;
    let after = verify_with(fs, dir)?;
    if let Some(left) = (after.damage.iter())
        .chain(&after.ids_past_end)
        .chain(&after.archive_problems)
        .next()
    {
        return Err(StoreError::Invalid {
            what: left.file.clone(),
            reason: format!(
                "damage left after a repair, at offset {}: {} (a bug in the repair; what it \
                 did is done: run it again)",
                left.offset, left.reason
            ),
        });
    }
    Ok(RepairReport {
        damage: plan.damage,
        events_kept: after.events,
        event_count: after.event_count(),
        kept_in,
        dropped: plan.drops,
        set_aside,
        reserved,
    })
}

/// [`repair_with`] on the real file system.
///
/// # Errors
///
/// As [`repair_with`].
pub fn repair(dir: impl AsRef<Path>) -> Result<RepairReport, StoreError> {
    repair_with(Arc::new(RealFs), dir)
}

/// The cuts and drops that get past the first damage `report` found, and the snapshots it
/// found damaged (caches every open skips, but damage `verify` keeps reporting).
fn plan(fs: &dyn Fs, dir: &Path, report: &VerifyReport) -> Result<RepairPlan, StoreError> {
    if let Some(manifest) = report.unfinished_gc.first() {
        return Err(StoreError::Invalid {
            what: manifest.clone(),
            reason: "a gc swap a crash interrupted is unfinished, so the segments may look \
                     damaged where they are not: a writing open (or `repair --yes`, under the lock) \
                     finishes it first; plan the repair after that"
                .into(),
        });
    }
    let damaged_snapshots = report
        .snapshots
        .iter()
        .filter(|s| s.problem.is_some())
        .map(|s| s.file.clone());
    let set_aside = archives_set_aside(fs, dir, report)?;
    let reserve = archived_past(report, &set_aside);
    let Some(damage) = report.damage.clone() else {
        // A torn tail is cut before the reserve segment goes after it, as a writing open
        // would cut it: left there, it would be in a segment that is not the last (damage).
        let torn = reserve.and(report.torn_tail.as_ref());
        let segment = torn.and_then(|t| report.segments.iter().find(|s| s.file == t.file));
        let cut = segment.map(|s| segment_cut(fs, dir, s, torn)).transpose()?;
        return Ok(RepairPlan {
            events_kept: report.events,
            event_count: report.event_count(),
            cuts: cut.into_iter().collect(),
            drops: damaged_snapshots.collect(),
            set_aside,
            reserve,
            ..RepairPlan::default()
        });
    };
    let mut cuts = Vec::new();
    let mut cutting = false;
    for segment in &report.segments {
        cutting |= segment.file == damage.file;
        if cutting {
            cuts.push(segment_cut(fs, dir, segment, Some(&damage))?);
        }
    }
    let mut drops = derived_drops(fs, dir, &cuts, report.events)?;
    for file in damaged_snapshots {
        if !drops.contains(&file) {
            drops.push(file);
        }
    }
    Ok(RepairPlan {
        damage: Some(damage),
        events_kept: report.events,
        event_count: report.event_count(),
        cuts,
        drops,
        set_aside,
        reserve,
    })
}

/// The cut of `segment`, at `damage` when that is in it, else whole.
fn segment_cut(
    fs: &dyn Fs,
    dir: &Path,
    segment: &SegmentReport,
    damage: Option<&Damage>,
) -> Result<SegmentCut, StoreError> {
    // Damage in the header takes the whole segment; elsewhere, keep what is intact.
    let at = match damage.filter(|d| d.file == segment.file) {
        None => 0,
        Some(d) => segment.bytes.min(d.offset),
    };
    let rest = rest_of(fs, &dir.join(&segment.file), at)?;
    Ok(SegmentCut {
        file: segment.file.clone(),
        at,
        bytes: rest.len() as u64,
        // A compressed segment is kept whole.
        kept: segment.stored_bytes.is_some() || rest.iter().any(|&b| b != 0),
    })
}

/// The archive files `report` found damaged, with what each table names when it reads and
/// the name each is set aside as.
fn archives_set_aside(
    fs: &dyn Fs,
    dir: &Path,
    report: &VerifyReport,
) -> Result<Vec<SetAside>, StoreError> {
    let folder = dir.join(crate::archive::DIR);
    let mut taken = match fs.list(&folder) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        listed => listed.map_err(|e| StoreError::io(format!("listing {}", folder.display()), e))?,
    };
    let mut out = Vec::new();
    for damage in &report.archive_problems {
        let table = crate::archive::table_of(fs, &dir.join(&damage.file)).ok();
        let to = unused_name(&format!("{}.damaged", damage.file), &taken)?;
        taken.push(crate::archive::name_in_folder(&to).to_owned());
        out.push(SetAside {
            damage: damage.clone(),
            runs: (table.as_ref()).map(|t| t.iter().map(|e| e.run_id.clone()).collect()),
            last_event_id: (table.as_ref()).and_then(|t| t.iter().map(|e| e.last_event_id).max()),
            to,
        });
    }
    Ok(out)
}

/// The highest id the archive files hold (those set aside too, when their table reads), when
/// it is past the events `report` keeps.
fn archived_past(report: &VerifyReport, set_aside: &[SetAside]) -> Option<u64> {
    let kept = (report.archives.iter())
        .filter(|a| !set_aside.iter().any(|s| s.damage.file == a.file))
        .map(|a| a.last_event_id);
    (kept.chain(set_aside.iter().filter_map(|s| s.last_event_id)))
        .max()
        .filter(|&top| top > report.events)
}

/// Renames each archive file of `files` to its new name, the folder synced; returns those.
fn set_aside(fs: &dyn Fs, dir: &Path, files: &[SetAside]) -> Result<Vec<String>, StoreError> {
    for file in files {
        let (from, to) = (&file.damage.file, &file.to);
        fs.rename(&dir.join(from), &dir.join(to))
            .map_err(|e| StoreError::io(format!("renaming {from} to {to}"), e))?;
    }
    if let Some(first) = files.first() {
        sync_dir_of(fs, &dir.join(&first.to))?;
    }
    Ok(files.iter().map(|f| f.to.clone()).collect())
}

/// The first of `base`, `base.1`, `base.2`... (relative to the data directory) whose name is
/// not one of `taken` (names in the archive folder).
fn unused_name(base: &str, taken: &[String]) -> Result<String, StoreError> {
    (0..1000)
        .map(|n| nth_name(base, n))
        .find(|name| {
            !taken
                .iter()
                .any(|t| t == crate::archive::name_in_folder(name))
        })
        .ok_or_else(|| StoreError::Invalid {
            what: base.to_owned(),
            reason: format!("1000 files named {base}.N exist: move some away"),
        })
}

/// The bytes of the segment at `path` from `at` on (of a compressed one, those that
/// decompress).
fn rest_of(fs: &dyn Fs, path: &Path, at: u64) -> Result<Vec<u8>, StoreError> {
    let (bytes, _) = open_segment(fs, path, Mode::Read)
        .and_then(|segment| segment.read_intact())
        .map_err(|e| StoreError::io(format!("reading {}", path.display()), e))?;
    Ok(bytes[(at as usize).min(bytes.len())..].to_vec())
}

/// The index files that could vouch for data the cuts remove (those of segments that will be
/// gone, and the new last segment's, which will grow), and the snapshots past event `last`.
fn derived_drops(
    fs: &dyn Fs,
    dir: &Path,
    cuts: &[SegmentCut],
    last: u64,
) -> Result<Vec<String>, StoreError> {
    let listed = list_segments_dir(fs, dir)?;
    let removed = |name: &str| {
        cuts.iter()
            .any(|c| c.at == 0 && c.file.strip_prefix("segments/") == Some(name))
    };
    let remaining: Vec<&String> = listed
        .iter()
        .filter(|n| parse_file_name(n).is_some() && !removed(n))
        .collect();
    let new_last = remaining.last().copied();
    let mut drops = Vec::new();
    for name in listed.iter().filter(|n| n.ends_with(".idx")) {
        let segment = name.replace(".idx", ".seg");
        if !remaining.contains(&&segment) || Some(&segment) == new_last {
            drops.push(format!("segments/{name}"));
        }
    }
    let names = fs.list(&dir.join("snapshots")).unwrap_or_default();
    let past = names
        .iter()
        .filter(|n| snapshot::watermark_of(n).is_some_and(|w| w > last));
    drops.extend(past.map(|n| format!("snapshots/{n}")));
    Ok(drops)
}

/// Truncates each cut segment at its cut (removing it when that is 0), keeping the bytes
/// removed in `.torn` files; returns those files.
fn cut(fs: &dyn Fs, dir: &Path, cuts: &[SegmentCut]) -> Result<Vec<String>, StoreError> {
    let mut kept_in = Vec::new();
    for c in cuts {
        let path = dir.join(&c.file);
        let io = |e| StoreError::io(format!("repairing {}", path.display()), e);
        let segment = open_segment(fs, &path, Mode::Write).map_err(io)?;
        if segment.stored_bytes().is_some() {
            kept_in.push(cut_cold(fs, &path, c.at)?);
            continue;
        }
        let file = segment.file();
        let rest = rest_of(fs, &path, c.at)?;
        if rest.iter().any(|&b| b != 0) {
            kept_in.push(keep_torn(fs, &path, c.at, &rest)?);
        }
        if c.at == 0 {
            drop(file);
            fs.remove(&path).map_err(io)?;
        } else {
            file.set_len(c.at).map_err(io)?;
            file.sync_data().map_err(io)?;
        }
    }
    let segments = dir.join("segments");
    fs.sync_dir(&segments)
        .map_err(|e| StoreError::io(format!("syncing {}", segments.display()), e))?;
    Ok(kept_in)
}

/// Cuts the compressed segment at `path` at `at`: the file is kept whole, compressed, in a
/// `.torn` file (offset 0), and replaced by the plain bytes of the segment before `at`
/// (removed when that is 0). Returns the `.torn` file.
fn cut_cold(fs: &dyn Fs, path: &Path, at: u64) -> Result<String, StoreError> {
    let io = |e| StoreError::io(format!("repairing {}", path.display()), e);
    let compressed = fs.open(path, Mode::Read).and_then(|f| f.read_all());
    let kept_in = keep_torn(fs, path, 0, &compressed.map_err(io)?)?;
    if at == 0 {
        fs.remove(path).map_err(io)?;
    } else {
        let kept = open_segment(fs, path, Mode::Read).and_then(|s| s.read_intact());
        let (bytes, _) = kept.map_err(io)?;
        write_atomically(fs, path, &bytes[..(at as usize).min(bytes.len())])?;
    }
    Ok(kept_in)
}

/// Removes `files` (relative to `dir`, all in its folder `sub`) and syncs that folder.
fn remove_all(fs: &dyn Fs, dir: &Path, files: &[&String], sub: &str) -> Result<(), StoreError> {
    if files.is_empty() {
        return Ok(());
    }
    for file in files {
        let path = dir.join(file);
        fs.remove(&path)
            .map_err(|e| StoreError::io(format!("removing {}", path.display()), e))?;
    }
    let folder = dir.join(sub);
    fs.sync_dir(&folder)
        .map_err(|e| StoreError::io(format!("syncing {}", folder.display()), e))
}
