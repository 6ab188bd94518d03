//! Reading a data directory's segments back: what is committed, where a torn tail starts,
//! and what damage refuses an open. Shared by the writing open, the read-only open, verify
//! and repair, so they can never disagree about what the log holds.

use crate::file_system::{Fs, FsFile, Mode};
use crate::format::index_file;
use crate::format::segment::{
    batch_end, complete_batch_after, parse_file_name, scan, Scanned, Stop,
};
use crate::run_index::{Index, SegmentIndex, Sparse};
use apollo11_store::StoreError;
use std::path::Path;
use std::sync::Arc;

/// Damage at a place in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// File name, relative to the data directory.
    pub file: String,
    /// Byte offset.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

impl Damage {
    /// The store error for this damage.
    pub fn into_error(self) -> StoreError {
        StoreError::Corrupted {
            file: self.file,
            offset: self.offset,
            reason: self.reason,
        }
    }
}

/// What stops a segment's scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Only zeros after the last committed batch.
    Clean,
    /// Uncommitted or damaged bytes after the last committed batch of the last segment,
    /// followed by nothing or by one complete batch and zeros: what a crash leaves of the
    /// last two batches, unsynced. `offset` is where the
    /// committed data ends; `bytes` is how much non-zero data follows.
    Torn {
        offset: u64,
        bytes: u64,
        reason: String,
    },
    /// Damage that no crash can explain: refuse to open.
    Damaged(Damage),
}

/// One segment as found on disk.
pub struct Inspected {
    /// File name, relative to the data directory.
    pub name: String,
    /// The open file.
    pub file: Arc<dyn FsFile>,
    /// Its committed content (`None` when even the header is unreadable).
    pub scanned: Option<Scanned>,
    /// How its scan ended.
    pub verdict: Verdict,
    /// Whether its content came from its index file rather than a scan (then `last` is not
    /// used: an index file of the last segment is saved only at a clean close).
    pub from_index: bool,
    /// The kind of its index file, when it has one that passed its own checks.
    pub index_kind: Option<index_file::Kind>,
    /// An index file that is ignored, and why.
    pub index_problem: Option<Damage>,
    /// The file's size on disk when it is a compressed segment (`cold/`).
    pub stored_bytes: Option<u64>,
}

impl Inspected {
    /// Where its committed data ends (0 when the header is unreadable).
    pub fn end(&self) -> u64 {
        self.scanned.as_ref().map_or(0, |s| s.end)
    }
}

/// Segment file names in `segments/`, in event-id order.
pub fn segment_names(fs: &dyn Fs, dir: &Path) -> Result<Vec<String>, StoreError> {
    Ok(list_segments_dir(fs, dir)?
        .into_iter()
        .filter(|n| parse_file_name(n).is_some())
        .collect())
}

/// Every file name in `segments/`, sorted.
pub fn list_segments_dir(fs: &dyn Fs, dir: &Path) -> Result<Vec<String>, StoreError> {
    let segments = dir.join("segments");
    fs.list(&segments)
        .map_err(|e| StoreError::io(format!("listing {}", segments.display()), e))
}

/// Reads and classifies one segment. With `use_index`, a segment whose index file matches
/// it is taken from that file and not read. The index file is read before the segment: a
/// writer running meanwhile only ever adds to a segment after removing its index file, so
/// a segment read after its index file can never hold less than the file records unless
/// committed data was lost.
pub fn inspect(
    fs: &dyn Fs,
    dir: &Path,
    name: &str,
    last: bool,
    mode: Mode,
    use_index: bool,
) -> Result<Inspected, StoreError> {
    let rel = format!("segments/{name}");
    let path = dir.join(&rel);
    let base = parse_file_name(name).expect("listed names parse");
    let (recorded, mut index_problem) = read_index_file(fs, &path, base);
    let opened = crate::cold::open_segment(fs, &path, mode)
        .map_err(|e| StoreError::io(format!("opening {}", path.display()), e))?;
    let (file, stored_bytes) = (opened.file(), opened.stored_bytes());
    let index_kind = recorded.as_ref().map(|r| r.kind);
    let mismatch = recorded
        .as_ref()
        .and_then(|r| index_file::mismatch(r, file.as_ref()));
    if use_index && mismatch.is_none() {
        if let Some(recorded) = recorded {
            return Ok(Inspected {
                name: rel,
                file,
                scanned: Some(recorded.scanned),
                verdict: Verdict::Clean,
                from_index: true,
                index_kind,
                index_problem,
                stored_bytes,
            });
        }
    }
    let (bytes, broken) = opened
        .read_intact()
        .map_err(|e| StoreError::io(format!("reading {}", path.display()), e))?;
    // A compressed segment was sealed, whole and synced, before it was compressed: no crash
    // tears it, so it is never a torn tail.
    let (scanned, verdict) = classify(&bytes, &rel, base, last && stored_bytes.is_none());
    let end = scanned.as_ref().map_or(0, |s| s.end);
    let verdict = match (verdict, &recorded, broken) {
        // Damaged from where its intact batches end (where `repair` would cut it).
        (_, _, Some(broken)) => Verdict::Damaged(Damage {
            file: rel.clone(),
            offset: end,
            reason: format!(
                "compressed segment damaged, readable up to byte {}: {}",
                broken.offset, broken.reason
            ),
        }),
        (Verdict::Damaged(damage), _, None) => Verdict::Damaged(damage),
        (_, Some(recorded), None) if recorded.scanned.end > end => Verdict::Damaged(Damage {
            file: rel.clone(),
            offset: end,
            reason: lost_per_index(recorded, scanned.as_ref()),
        }),
        (verdict, _, None) => {
            if let Some(reason) = mismatch {
                index_problem = Some(index_damage(&path, format!("ignored: {reason}")));
            }
            verdict
        }
    };
    Ok(Inspected {
        name: rel,
        file,
        scanned,
        verdict,
        from_index: false,
        index_kind,
        index_problem,
        stored_bytes,
    })
}

/// The segment's index file if it passed its own checks and names the segment's base; else
/// why it is ignored.
fn read_index_file(
    fs: &dyn Fs,
    segment: &Path,
    base: u64,
) -> (Option<index_file::Recorded>, Option<Damage>) {
    let path = index_file::path_of(segment);
    match index_file::read(fs, &path) {
        Ok(Some(r)) if r.scanned.base == base => (Some(r), None),
        Ok(Some(r)) => {
            let reason = format!(
                "ignored: it names base event id {}, not {base}",
                r.scanned.base
            );
            (None, Some(index_damage(&path, reason)))
        }
        Ok(None) => (None, None),
        Err(reason) => (
            None,
            Some(index_damage(&path, format!("ignored: {reason}"))),
        ),
    }
}

fn index_damage(path: &Path, reason: String) -> Damage {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    Damage {
        file: format!("segments/{}", name.unwrap_or_default()),
        offset: 0,
        reason,
    }
}

/// The evidence an index file gives of committed data missing from its segment.
fn lost_per_index(recorded: &index_file::Recorded, scanned: Option<&Scanned>) -> String {
    let (events, end) = scanned.map_or((0, 0), |s| (s.events.len(), s.end));
    format!(
        "committed data is missing: the segment's index file ({}) records {} events up to \
         offset {}, but only {events} events up to offset {end} are there",
        recorded.kind.saved_when(),
        recorded.scanned.events.len(),
        recorded.scanned.end,
    )
}

/// What a scan of a whole segment finds, and what it means: damage, a torn tail (only in the
/// last segment, and only as a crash leaves one: see `after_the_stop`), or a clean end. A
/// damaged header of the last segment followed by any complete batch is damage: the header
/// is synced before any batch is written.
fn classify(bytes: &[u8], rel: &str, base: u64, last: bool) -> (Option<Scanned>, Verdict) {
    let damaged = |offset: u64, reason: String| {
        Verdict::Damaged(Damage {
            file: rel.to_owned(),
            offset,
            reason,
        })
    };
    let scanned = match scan(bytes) {
        Err(stop) if last && complete_batch_after(bytes, 0).is_none() => {
            let torn = Verdict::Torn {
                offset: 0,
                bytes: nonzero_len(bytes, 0),
                reason: stop.reason,
            };
            return (None, torn);
        }
        Err(stop) => return (None, damaged(stop.offset, stop.reason)),
        Ok(scanned) => scanned,
    };
    if scanned.base != base {
        let reason = format!(
            "header says base event id {}, file name says {base}",
            scanned.base
        );
        return (None, damaged(0, reason));
    }
    let verdict = match &scanned.stop {
        None => Verdict::Clean,
        Some(stop) if !last => damaged(stop.offset, stop.reason.clone()),
        Some(stop) => after_the_stop(bytes, &scanned, stop, rel),
    };
    (Some(scanned), verdict)
}

/// What the bytes after a failure in the last segment's records mean. The writer writes a
/// batch only while at most one other is unsynced, so a crash tears at most the last two:
/// the failure may be followed by one complete batch (the last one written, unsynced too),
/// then zeros. A complete batch with anything after it proves that the data at the failure
/// had been synced: damage.
fn after_the_stop(bytes: &[u8], scanned: &Scanned, stop: &Stop, rel: &str) -> Verdict {
    let torn = |reason: String| Verdict::Torn {
        offset: scanned.end,
        bytes: nonzero_len(bytes, scanned.end),
        reason,
    };
    let Some(at) = complete_batch_after(bytes, stop.offset) else {
        return torn(stop.reason.clone());
    };
    let end = batch_end(bytes, at);
    if nonzero_len(bytes, end) == 0 {
        return torn(format!(
            "{}; the complete batch at offset {at} after it is the last one written, unsynced \
             as well (a crash tears the last two batches at most)",
            stop.reason
        ));
    }
    Verdict::Damaged(Damage {
        file: rel.to_owned(),
        offset: stop.offset,
        reason: format!(
            "{}; a complete batch follows at offset {at} and more data at offset {end}, so this \
             is damage, not a torn write (a crash tears the last two batches at most)",
            stop.reason
        ),
    })
}

/// Bytes from `from` to the last non-zero byte.
fn nonzero_len(bytes: &[u8], from: u64) -> u64 {
    let from = from as usize;
    bytes[from.min(bytes.len())..]
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |p| p as u64 + 1)
}

/// Adds a segment's committed events to the index, checking that ids continue from the
/// previous segment (a compacted one's `covers to`) and that every run's seqs are consecutive.
pub fn add_to_index(index: &mut Index, inspected: &Inspected) -> Result<(), StoreError> {
    let Some(scanned) = &inspected.scanned else {
        return Ok(());
    };
    let mut segment =
        SegmentIndex::new(scanned.base, inspected.name.clone(), inspected.file.clone());
    segment.cold = inspected.stored_bytes.is_some();
    add_segment(index, segment, scanned)
}

/// Adds `segment` (its offsets and slots empty), holding what `scanned` found, to the index,
/// with the checks of [`add_to_index`].
pub fn add_segment(
    index: &mut Index,
    mut segment: SegmentIndex,
    scanned: &Scanned,
) -> Result<(), StoreError> {
    let damaged = |offset: u64, reason: String| {
        Damage {
            file: segment.name.clone(),
            offset,
            reason,
        }
        .into_error()
    };
    if scanned.base != index.last_event_id + 1 {
        return Err(damaged(
            0,
            format!(
                "segment starts at event {}, but the previous one ends at {}",
                scanned.base, index.last_event_id
            ),
        ));
    }
    segment.sparse = scanned.covers_to.map(|covers_to| Sparse {
        covers_to,
        ids: Vec::with_capacity(scanned.events.len()),
    });
    segment.offsets.reserve(scanned.events.len());
    segment.slots.reserve(scanned.events.len());
    let name = segment.name.clone();
    index.segments.push(segment);
    // Runs are looked up once per segment, not once per event (and only runs with a
    // committed event get a slot: a torn batch may name others).
    let mut slots: Vec<Option<u32>> = vec![None; scanned.runs.len()];
    for e in &scanned.events {
        let slot =
            *slots[e.run as usize].get_or_insert_with(|| index.slot(&scanned.runs[e.run as usize]));
        let expected = index.slot_last_seq(slot) + 1;
        if e.seq != expected {
            let run_id = &scanned.runs[e.run as usize];
            let reason = format!(
                "event {} of run `{run_id}` has seq {}, expected {expected}",
                e.id, e.seq
            );
            return Err(Damage {
                file: name,
                offset: u64::from(e.offset),
                reason,
            }
            .into_error());
        }
        index.push_to_slot(slot, e.id, e.offset);
    }
    // The ids a compacted segment skips at its end are taken: the next segment follows it.
    index.last_event_id = index.last_event_id.max(scanned.covers_to.unwrap_or(0));
    Ok(())
}

/// A log as an open finds it, every segment checked and nothing changed yet.
pub struct Loaded {
    /// Segment files found.
    pub segments: usize,
    /// Every committed event.
    pub index: Index,
    /// The last segment.
    pub last: Option<Inspected>,
    /// Segments before the last that were scanned, not taken from an index file: their
    /// position in the index, path and end (a writing open indexes them).
    pub unindexed: Vec<(usize, std::path::PathBuf, u64)>,
}

/// Reads every segment (the last one opened in `last_mode`) and refuses, changing nothing,
/// on damage or on evidence that committed data is missing at the end. Shared by the
/// writing and the read-only open, so they can never disagree about what the log holds.
///
/// An index file that passed its own checks but whose events do not follow from the
/// segments before it (no crash writes one) is distrusted: the load starts over, scanning
/// every segment, so that only the segments' own bytes can refuse the log, as in `verify`.
pub fn load(fs: &dyn Fs, dir: &Path, last_mode: Mode) -> Result<Loaded, StoreError> {
    match load_using(fs, dir, last_mode, true)? {
        Some(loaded) => Ok(loaded),
        None => Ok(load_using(fs, dir, last_mode, false)?
            .expect("a load that reads no index file never distrusts one")),
    }
}

/// [`load`], taking segments from their index files when `use_index`; `None` when an index
/// file's events do not follow from the segments before it.
fn load_using(
    fs: &dyn Fs,
    dir: &Path,
    last_mode: Mode,
    use_index: bool,
) -> Result<Option<Loaded>, StoreError> {
    let before = crate::missing::list_before(fs, dir)?;
    let names = segment_names(fs, dir)?;
    let mut loaded = Loaded {
        segments: names.len(),
        index: Index::default(),
        last: None,
        unindexed: Vec::new(),
    };
    let mut previous_kind = None;
    for (i, name) in names.iter().enumerate() {
        let last = i + 1 == names.len();
        let mode = if last { last_mode } else { Mode::Read };
        let inspected = inspect(fs, dir, name, last, mode, use_index)?;
        if let Verdict::Damaged(damage) = &inspected.verdict {
            return Err(damage.clone().into_error());
        }
        match add_to_index(&mut loaded.index, &inspected) {
            Err(_) if inspected.from_index => return Ok(None),
            added => added?,
        }
        if last {
            loaded.last = Some(inspected);
        } else {
            if !inspected.from_index {
                let path = dir.join(&inspected.name);
                loaded.unindexed.push((i, path, inspected.end()));
            }
            previous_kind = inspected.index_kind;
        }
    }
    let end = crate::missing::End {
        last: loaded.last.as_ref(),
        previous_kind,
        last_event_id: loaded.index.last_event_id,
    };
    match crate::missing::at_end(fs, dir, &before, &end)? {
        Some(damage) => Err(damage.into_error()),
        None => Ok(Some(loaded)),
    }
}
