//! `gc`'s swap: finished runs moved out of the live segments into an archive file
//! ([`FileLog::collect`]), crash-safe, with the writer live. The layout and the protocol are
//! in `docs/log-format.md` (Archive); in short:
//!
//! 1. the runs are marked (the writer refuses appends to them from then on) and every batch
//!    taken before is waited for, so their events are final; runs with an event in the live
//!    segment are left for a later `gc`;
//! 2. the archive file is written (its rename is the commit point: the runs are archived);
//! 3. each sealed segment holding them is rewritten without them as
//!    `segments/<base>.seg.gc`, synced, and its index file removed (directory synced): a
//!    failure so far leaves the old state (the archive file, a copy of runs all still live,
//!    removed; one a crash left goes at the next writing open, `archive::ids`);
//! 4. the manifest `archive/<gen>.gc` names those segments (durable);
//! 5. under the index's write lock (the pause: appenders' batches are written meanwhile but
//!    wait to be acknowledged): each `.seg.gc` renamed over its segment, the directory
//!    synced, the in-memory index rebuilt without the runs;
//! 6. the manifest removed (directory synced).
//!
//! An open that finds a manifest finishes the swap ([`finish_at_open`]); `.seg.gc` files
//! without one are removed (the old state).

mod beside;
mod finish;
mod manifest;
mod rewrite;

pub(crate) use beside::look_beside_swaps;
pub(crate) use finish::{finish_at_open, unfinished};

use crate::durable_files::sync_dir_of;
use crate::file_log::Files;
use crate::file_system::Fs;
use crate::format::segment::Scanned;
use crate::load::{add_segment, segment_names};
use crate::run_index::{Index, SegmentIndex};
use crate::write::writer::Shared;
use crate::write::WriteError;
use apollo11_core::RunId;
use apollo11_store::StoreError;
use manifest::Manifest;
use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What [`FileLog::collect`](crate::FileLog::collect) did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Collected {
    /// The archive file written (relative to the data directory); `None` when no run moved.
    pub archive: Option<String>,
    /// The runs moved out of the live segments, by id.
    pub moved: Vec<RunId>,
    /// Their events.
    pub events: u64,
    /// Runs asked for that have an event in the live (unsealed) segment: left in the live log
    /// for a later `gc`, once the writer has moved past them.
    pub left: Vec<RunId>,
    /// Sealed segments rewritten.
    pub segments: usize,
    /// Bytes of the segment files on disk before and after.
    pub live_bytes_before: u64,
    /// See `live_bytes_before`.
    pub live_bytes_after: u64,
    /// How long the index's write lock was held for the swap: no append was acknowledged
    /// meanwhile.
    pub pause: Duration,
}

impl Files {
    /// Moves the runs `runs` out of the live segments (see [`crate::FileLog::collect`]).
    ///
    /// # Errors
    ///
    /// As [`crate::FileLog::collect`].
    pub(crate) fn collect(&self, runs: &[RunId]) -> Result<Collected, StoreError> {
        let files = self;
        let (fs, dir) = (files.fs.as_ref(), files.dir.as_path());
        // No compression pass meanwhile, and one gc at a time.
        let _pass = crate::cold::exclusive();
        let live_bytes_before = live_bytes(fs, dir)?;
        let runs: BTreeSet<RunId> = runs.iter().cloned().collect();
        mark(&files.shared, &runs)?;
        let swapped = self.collect_marked(&runs);
        let collecting = files.shared.collecting.write();
        (collecting.unwrap_or_else(|p| p.into_inner())).retain(|r| !runs.contains(r));
        let mut collected = swapped?;
        collected.live_bytes_before = live_bytes_before;
        collected.live_bytes_after = live_bytes(fs, dir)?;
        Ok(collected)
    }

    fn collect_marked(&self, runs: &BTreeSet<RunId>) -> Result<Collected, StoreError> {
        let files = self;
        let (fs, dir) = (files.fs.as_ref(), files.dir.as_path());
        let Choice {
            moved,
            left,
            positions,
        } = choose(&files.index(), runs)?;
        let mut collected = Collected {
            left,
            ..Collected::default()
        };
        if moved.is_empty() {
            return Ok(collected);
        }
        let written = crate::archive::write_archive(files, &moved)?;
        let index = files.index();
        let segments: Vec<(usize, String, u64)> = (positions.iter())
            .map(|&p| (p, index.segments[p].name.clone(), index.segments[p].base))
            .collect();
        drop(index);
        let manifest = Manifest {
            generation: written.generation,
            segments: segments.iter().map(|(_, _, base)| *base).collect(),
        };
        let moved_ids: HashSet<&str> = moved.iter().map(RunId::as_str).collect();
        let dropped = |run: &str| moved_ids.contains(run);
        // Before the manifest: a segment that does not rewrite (damaged) fails the collect
        // with the old state (the `.seg.gc` files written are leftovers the next open removes),
        // and the archive file, a copy of runs all still live, goes (else the next open's).
        let rewritten = rewrite::write_all(fs, dir, &segments, &dropped).inspect_err(|_| {
            let _ = crate::archive::remove_leftovers(fs, &[dir.join(&written.file)]);
        })?;
        // Once the manifest may be on disk the next open finishes the swap: a failure from
        // its write on stops the store until then (appends to the runs must not resume).
        let swap = || -> Result<Duration, StoreError> {
            manifest::write(fs, dir, &manifest)?;
            let pause = self.swap(&rewritten, &moved)?;
            manifest::remove(fs, dir, manifest.generation)?;
            Ok(pause)
        };
        collected.pause = swap().map_err(|e| poison(&files.shared, e))?;
        collected.archive = Some(written.file);
        collected.events = written.events;
        collected.segments = segments.len();
        collected.moved = moved;
        Ok(collected)
    }

    /// The index is rebuilt from the rewritten segments under the index's read lock
    /// (appends go on); then the pause, under its write lock: each rewritten segment renamed
    /// over its segment, the directory synced, the events published meanwhile added to the
    /// rebuilt index, which replaces the old one, and the writer told to forget the `moved`
    /// runs' last seqs (it looks at them before its next batch, under the read lock).
    fn swap(
        &self,
        rewritten: &[rewrite::Rewritten],
        moved: &[RunId],
    ) -> Result<Duration, StoreError> {
        let files = self;
        let fs = files.fs.as_ref();
        let replaced = (rewritten.iter())
            .map(|r| Ok((r.position, r.open(fs)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let (mut built, seen) = {
            let index = files.index();
            (rebuilt(&index, replaced)?, Seen::of(&index))
        };
        let mut index = (files.shared.index.write()).unwrap_or_else(|p| p.into_inner());
        let started = Instant::now();
        for r in rewritten {
            rewrite::rename_over(fs, &r.path)?;
        }
        if let Some(first) = rewritten.first() {
            sync_dir_of(fs, &first.path)?;
        }
        catch_up(&mut built, &index, seen)?;
        built.generation = index.generation + 1;
        (files.shared.moved.lock().unwrap_or_else(|p| p.into_inner())).extend_from_slice(moved);
        let old = std::mem::replace(&mut *index, built);
        let pause = started.elapsed();
        drop(index);
        // Freed once appends may go on again.
        drop(old);
        Ok(pause)
    }
}

/// How far the index went when a rebuilt one was taken from it: its segments, and the
/// events of the last one (the one the writer appends to).
#[derive(Clone, Copy)]
struct Seen {
    segments: usize,
    events: usize,
}

impl Seen {
    fn of(index: &Index) -> Seen {
        Seen {
            segments: index.segments.len(),
            events: index.segments.last().map_or(0, |s| s.offsets.len()),
        }
    }
}

/// Adds to `built` what `index` published after `seen`: the rest of what was the last
/// segment, and any segment the writer started since (none of them holds a moved run).
fn catch_up(built: &mut Index, index: &Index, seen: Seen) -> Result<(), StoreError> {
    let last = &index.segments[seen.segments - 1];
    for p in seen.events..last.offsets.len() {
        built.push(index.run_of(last, p), last.id_at(p), last.offsets[p]);
    }
    for position in seen.segments..index.segments.len() {
        let segment = &index.segments[position];
        let mut shell = SegmentIndex::new(segment.base, segment.name.clone(), segment.file.clone());
        shell.cold = segment.cold;
        add_segment(built, shell, &index.scanned(position, 0))?;
    }
    Ok(())
}

/// Marks `runs` (the writer refuses appends to them from now on) and waits until every batch
/// the writer took before is published, so that what the index holds of them is final.
fn mark(shared: &Shared, runs: &BTreeSet<RunId>) -> Result<(), StoreError> {
    let assigned = {
        let _index = shared.index.write().unwrap_or_else(|p| p.into_inner());
        let mut collecting = shared.collecting.write().unwrap_or_else(|p| p.into_inner());
        collecting.extend(runs.iter().cloned());
        shared.assigned.load(Ordering::Acquire)
    };
    loop {
        shared.check_poison()?;
        let published = shared.index.read().unwrap_or_else(|p| p.into_inner());
        if published.last_event_id >= assigned {
            return Ok(());
        }
        drop(published);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Which of the runs asked for move, and from which segments.
#[derive(Default)]
struct Choice {
    /// The runs to move.
    moved: Vec<RunId>,
    /// Those left: they have an event in the live segment.
    left: Vec<RunId>,
    /// The positions of the sealed segments holding the runs to move.
    positions: BTreeSet<usize>,
}

/// Chooses among `runs` as [`Choice`] says.
fn choose(index: &Index, runs: &BTreeSet<RunId>) -> Result<Choice, StoreError> {
    let live = index.segments.len() - 1;
    let mut choice = Choice::default();
    for run in runs {
        let ids = index
            .event_ids(run.as_str())
            .ok_or_else(|| StoreError::NotFound {
                what: format!("run `{run}` in the live log"),
            })?;
        let holding: BTreeSet<usize> = ids.iter().map(|&id| index.covering(id)).collect();
        if holding.contains(&live) {
            choice.left.push(run.clone());
        } else {
            choice.moved.push(run.clone());
            choice.positions.extend(holding);
        }
    }
    Ok(choice)
}

/// `index` with the segments at the positions of `replaced` taken from their rewritten
/// files (without the runs moved), every other one as it is.
fn rebuilt(
    index: &Index,
    replaced: Vec<(usize, (SegmentIndex, Scanned))>,
) -> Result<Index, StoreError> {
    let mut replaced = replaced.into_iter().peekable();
    let mut out = Index::default();
    for (position, segment) in index.segments.iter().enumerate() {
        let (shell, scanned) = match replaced.next_if(|(p, _)| *p == position) {
            Some((_, rewritten)) => rewritten,
            None => {
                let mut shell =
                    SegmentIndex::new(segment.base, segment.name.clone(), segment.file.clone());
                shell.cold = segment.cold;
                (shell, index.scanned(position, 0))
            }
        };
        add_segment(&mut out, shell, &scanned)?;
    }
    Ok(out)
}

/// A failure once the manifest is durable stops the store: only the next open may finish
/// the swap.
fn poison(shared: &Shared, error: StoreError) -> StoreError {
    shared.stop(WriteError::GcStopped { source: error })
}

/// Bytes of the segment files in `dir` as stored (compressed ones compressed).
fn live_bytes(fs: &dyn Fs, dir: &Path) -> Result<u64, StoreError> {
    let mut total = 0;
    for name in segment_names(fs, dir)? {
        let path = dir.join("segments").join(name);
        let size = fs
            .open(&path, crate::file_system::Mode::Read)
            .and_then(|f| f.size())
            .map_err(|e| StoreError::io(format!("sizing {}", path.display()), e))?;
        total += size;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_system::{FsFile, Mode, RealFs};
    use crate::format::segment::Indexed;
    use std::sync::Arc;

    /// A scan of a version 1 segment from `base` holding events of `runs`, in order, seqs
    /// following those of the runs `before` held.
    fn scanned(base: u64, runs: &[&str], before: &mut Vec<String>) -> Scanned {
        let mut names: Vec<String> = Vec::new();
        let events = (runs.iter().enumerate())
            .map(|(i, &run)| {
                if !names.iter().any(|n| n == run) {
                    names.push(run.to_owned());
                }
                before.push(run.to_owned());
                Indexed {
                    id: base + i as u64,
                    offset: 24 + 100 * i as u32,
                    seq: before.iter().filter(|r| *r == run).count() as u32,
                    run: names.iter().position(|n| n == run).unwrap() as u32,
                }
            })
            .collect();
        Scanned {
            base,
            covers_to: None,
            events,
            runs: names,
            end: 0,
            stop: None,
        }
    }

    /// An index of segments of `runs` each (each run's seqs counted across them).
    fn index_of(file: &Arc<dyn FsFile>, segments: &[&[&str]]) -> Index {
        let mut index = Index::default();
        let mut before = Vec::new();
        for runs in segments {
            let base = index.last_event_id + 1;
            let scan = scanned(base, runs, &mut before);
            let shell = SegmentIndex::new(base, format!("segments/{base}"), file.clone());
            add_segment(&mut index, shell, &scan).unwrap();
        }
        index
    }

    fn ids_by_run(index: &Index) -> Vec<(String, Vec<u64>)> {
        (index.list_runs().iter())
            .map(|r| {
                let ids = index.event_ids(r.run_id.as_str()).unwrap().to_vec();
                (r.run_id.to_string(), ids)
            })
            .collect()
    }

    #[test]
    fn events_published_after_the_rebuild_are_caught_up_in_the_pause() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file: Arc<dyn FsFile> = RealFs.open(&path, Mode::CreateNew).unwrap().into();
        // As the rebuild saw it: a sealed segment and one event in the live one.
        let seen = index_of(&file, &[&["x", "y", "x"], &["y"]]);
        // As the pause finds it: the live segment grew, then the writer rolled.
        let now = index_of(&file, &[&["x", "y", "x"], &["y", "z"], &["z", "x"]]);
        let mut built = rebuilt(&seen, Vec::new()).unwrap();
        catch_up(&mut built, &now, Seen::of(&seen)).unwrap();
        assert_eq!(ids_by_run(&built), ids_by_run(&now));
        assert_eq!(built.last_event_id, now.last_event_id);
        let offsets =
            |i: &Index| -> Vec<Vec<u32>> { i.segments.iter().map(|s| s.offsets.clone()).collect() };
        assert_eq!(offsets(&built), offsets(&now));
    }
}
