//! Evidence that committed data is missing at the end of the log. A crash can tear only the
//! last, unacknowledged batch, and that looks like what losing whole committed batches off
//! the end (a truncated, zeroed or deleted last segment) looks like to a scan. What tells
//! them apart is what was durably written *after* that data, each piece only once the data
//! it vouches for was synced:
//!
//! - a snapshot written in `fsync` durability whose watermark is past the log's last event;
//! - a segment's index file recording more than the segment holds (checked per segment, in
//!   `load::inspect`);
//! - an index file saved when the log moved past its segment ([`index_file::Kind::Sealed`]), on
//!   the last segment (its successor is gone), or before a last segment whose header is
//!   unreadable (that successor was created with its header synced, so no crash tore it);
//! - an index file of a segment that is gone, recording events past the log's end.
//!
//! This module only reads. Readers run while a writer appends: what they list first
//! (snapshots) was written before the segments they read next, so a writer's own progress
//! never looks like a loss.

use crate::file_system::{Fs, Mode};
use crate::format::index_file;
use crate::format::segment::{file_name, parse_file_name};
use crate::load::{list_segments_dir, Damage, Inspected};
use crate::snapshot;
use apollo11_store::StoreError;
use std::path::Path;

/// What must be listed before the segments are read.
pub struct Before {
    /// Snapshot file names with the watermark their name states.
    snapshots: Vec<(String, u64)>,
}

/// Lists the snapshots, before the segments are read.
pub fn list_before(fs: &dyn Fs, dir: &Path) -> Result<Before, StoreError> {
    let snapshots = dir.join("snapshots");
    let names = match fs.list(&snapshots) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            let context = format!("listing {}", snapshots.display());
            return Err(StoreError::io(context, e));
        }
    };
    let snapshots = names
        .into_iter()
        .filter_map(|n| snapshot::watermark_of(&n).map(|w| (n, w)))
        .collect();
    Ok(Before { snapshots })
}

/// How the log ends, as the segments were read.
pub struct End<'a> {
    /// The last segment.
    pub last: Option<&'a Inspected>,
    /// The kind of the index file of the segment before it, if it has a valid one.
    pub previous_kind: Option<index_file::Kind>,
    /// The last committed event.
    pub last_event_id: u64,
}

impl End<'_> {
    /// Where missing data would have been: the last segment at its committed end, or the
    /// first segment's name when there is none.
    fn place(&self) -> (String, u64) {
        match self.last {
            Some(last) => (last.name.clone(), last.end()),
            None => (format!("segments/{}", file_name(self.last_event_id + 1)), 0),
        }
    }

    fn damage(&self, reason: String) -> Damage {
        let (file, offset) = self.place();
        Damage {
            file,
            offset,
            reason: format!("committed data is missing: {reason}"),
        }
    }
}

/// The first evidence that committed data is missing past `end`, if any.
pub fn at_end(
    fs: &dyn Fs,
    dir: &Path,
    before: &Before,
    end: &End<'_>,
) -> Result<Option<Damage>, StoreError> {
    let listed = list_segments_dir(fs, dir)?;
    if let Some(reason) = successor_missing(end, &listed) {
        return Ok(Some(end.damage(reason)));
    }
    if let Some(reason) = orphan_index(fs, dir, end, &listed) {
        return Ok(Some(end.damage(reason)));
    }
    Ok(snapshot_past_end(fs, dir, before, end).map(|reason| end.damage(reason)))
}

/// A sealed index file proves the segment after it was created, header synced.
fn successor_missing(end: &End<'_>, listed: &[String]) -> Option<String> {
    let last = end.last?;
    let last_name = last.name.trim_start_matches("segments/");
    if last.index_kind == Some(index_file::Kind::Sealed) {
        // Listed again now: a writer may have rolled since the segments were read.
        let rolled = listed
            .iter()
            .any(|n| parse_file_name(n).is_some() && n.as_str() > last_name);
        let next = file_name(end.last_event_id + 1);
        return (!rolled).then(|| {
            format!(
                "{} has an index file saved when the log moved past it to segments/{next}, \
                 which is gone",
                last.name
            )
        });
    }
    (last.scanned.is_none() && end.previous_kind == Some(index_file::Kind::Sealed)).then(|| {
        format!(
            "the header of {} is unreadable, but the segment before it has an index file saved \
             after this one was created with its header synced, so no crash tore it",
            last.name
        )
    })
}

/// An index file whose segment is gone, recording events past the log's end.
fn orphan_index(fs: &dyn Fs, dir: &Path, end: &End<'_>, listed: &[String]) -> Option<String> {
    for name in listed.iter().filter(|n| n.ends_with(".idx")) {
        let segment = name.replace(".idx", ".seg");
        if parse_file_name(&segment).is_none() || listed.contains(&segment) {
            continue;
        }
        let path = dir.join("segments").join(name);
        let Ok(Some(recorded)) = index_file::read(fs, &path) else {
            continue;
        };
        let Some(last) = recorded.scanned.events.last().map(|e| e.id) else {
            continue;
        };
        if last > end.last_event_id {
            return Some(format!(
                "segments/{name} ({}) records events {}..={last} of segments/{segment}, which \
                 is gone; the log ends at event {}",
                recorded.kind.saved_when(),
                recorded.scanned.base,
                end.last_event_id
            ));
        }
    }
    None
}

/// A snapshot written in `fsync` durability covers only synced events.
fn snapshot_past_end(fs: &dyn Fs, dir: &Path, before: &Before, end: &End<'_>) -> Option<String> {
    let past = before
        .snapshots
        .iter()
        .filter(|(_, w)| *w > end.last_event_id);
    for (name, _) in past {
        let path = dir.join("snapshots").join(name);
        let Ok(bytes) = fs.open(&path, Mode::Read).and_then(|f| f.read_all()) else {
            continue;
        };
        match snapshot::decode(&bytes) {
            Ok(file) if snapshot::proves_loss(&file, end.last_event_id) => {
                return Some(format!(
                    "snapshots/{name}, written in fsync durability, covers events up to {}, but \
                     the log ends at event {}",
                    file.snapshot.watermark, end.last_event_id
                ));
            }
            Ok(_) | Err(_) => continue,
        }
    }
    None
}
