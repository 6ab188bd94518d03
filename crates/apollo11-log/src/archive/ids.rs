//! Event ids an archive file holds are never given again. `gc` archives runs of sealed
//! segments only, so every archived id is at most the live log's last one, unless the live
//! log lost its end (`repair` cut it, after a `gc` that failed once its archive file was in
//! place): then `repair` reserves the ids up to the highest archived one with a compacted
//! segment holding no events ([`reserve`]), and a writing open refuses until it has. An id
//! the live log holds for another run than an archive does is damage too: two events would
//! answer to it. The tables alone are read (each run's last event id), never the events.

use super::{read::table_of, ArchivedRun, Generations};
use crate::durable_files::{sync_dir_of, write_atomically};
use crate::file_system::Fs;
use crate::format::segment::{compacted_header, file_name};
use crate::load::Damage;
use crate::run_index::Index;
use apollo11_core::RunId;
use apollo11_store::StoreError;
use std::path::{Path, PathBuf};

/// What the archive files' tables say against a live log.
#[derive(Debug, Default)]
pub(crate) struct Against {
    /// Where the archived runs are, for the writer ([`Generations`]).
    pub generations: Generations,
    /// The highest event id archived, past the live log's end, and the file holding it.
    pub past_end: Option<(String, u64)>,
    /// Per archive file, its first run whose last event id the live log holds for another
    /// run: every such file, so that `repair` sets them all aside at once.
    pub clashes: Vec<Damage>,
    /// Files every run of which the live log still holds whole: copies a `gc` stopped before
    /// its swap left (no manifest names them once an open finished the swaps), which nothing
    /// reads. Their runs are not in `generations`.
    pub leftovers: Vec<PathBuf>,
}

impl Against {
    /// The damage to report: an id held twice first, then ids past the end.
    pub(crate) fn damage(&self, last_event_id: u64) -> Option<Damage> {
        let past = (self.past_end.as_ref()).map(|(file, id)| past_end(file, *id, last_event_id));
        self.clashes.first().cloned().or(past)
    }
}

/// Whether the live log `index` holds the archived run `entry` whole: as many events, the
/// last one's id the same.
fn live_whole(index: &Index, entry: &ArchivedRun) -> bool {
    index.event_ids(entry.run_id.as_str()).is_some_and(|ids| {
        ids.len() == entry.events as usize && ids.last() == Some(&entry.last_event_id)
    })
}

/// The damage of the archive file `file` holding event `id`, past the live log's last event
/// `last_event_id`.
pub(crate) fn past_end(file: &str, id: u64, last_event_id: u64) -> Damage {
    Damage {
        file: file.to_owned(),
        offset: 0,
        reason: format!(
            "it holds event {id}, past the live log's last event {last_event_id}: committed \
             events are missing, and their ids would be given again; `repair` reserves them"
        ),
    }
}

/// The first run of the archive file `name`'s `table` whose last event id the live log
/// `index` holds for another run.
fn first_clash(index: &Index, name: &str, table: &[ArchivedRun]) -> Option<Damage> {
    table.iter().find_map(|entry| {
        let id = entry.last_event_id;
        let (segment, position) = index.locate(id).ok()?;
        let run = index.run_of(segment, position);
        (run != entry.run_id.as_str()).then(|| Damage {
            file: name.to_owned(),
            offset: entry.offset,
            reason: format!(
                "event {id} is run `{}`'s here and run `{run}`'s in the live log: two events \
                 share the id",
                entry.run_id
            ),
        })
    })
}

/// Reads the tables of the archive files at `paths` and compares them with the live log
/// `index`.
///
/// # Errors
///
/// [`StoreError::Corrupted`] naming an archive file whose table is damaged;
/// [`StoreError::Io`].
pub(crate) fn against(
    fs: &dyn Fs,
    paths: &[PathBuf],
    index: &Index,
) -> Result<Against, StoreError> {
    let mut out = Against::default();
    for path in paths {
        let name = super::name_of(path);
        let table = table_of(fs, path)?;
        if table.iter().all(|entry| live_whole(index, entry)) {
            out.leftovers.push(path.clone());
            continue;
        }
        let generation = super::generation_of(path).expect("archive files only");
        let runs: Vec<RunId> = table.iter().map(|entry| entry.run_id.clone()).collect();
        out.generations.add(&runs, generation);
        for entry in &table {
            let id = entry.last_event_id;
            if id > index.last_event_id && out.past_end.as_ref().is_none_or(|(_, top)| id > *top) {
                out.past_end = Some((name.clone(), id));
            }
        }
        out.clashes.extend(first_clash(index, &name, &table));
    }
    Ok(out)
}

/// Writes the segment after the live log's last event `last_event_id` that reserves the ids
/// up to `up_to`: compacted (version 2), holding no events, covering them, so the next
/// writing open starts a new segment after it. Returns its name.
///
/// # Errors
///
/// [`StoreError::Io`] naming the file.
pub(crate) fn reserve(
    fs: &dyn Fs,
    dir: &Path,
    last_event_id: u64,
    up_to: u64,
) -> Result<String, StoreError> {
    let base = last_event_id + 1;
    let name = format!("segments/{}", file_name(base));
    write_atomically(fs, &dir.join(&name), &compacted_header(base, up_to))?;
    Ok(name)
}

/// Removes the leftover archive files `paths` ([`Against::leftovers`]), the folder synced.
///
/// # Errors
///
/// [`StoreError::Io`] naming the file.
pub(crate) fn remove_leftovers(fs: &dyn Fs, paths: &[PathBuf]) -> Result<(), StoreError> {
    for path in paths {
        fs.remove(path)
            .map_err(|e| StoreError::io(format!("removing {}", path.display()), e))?;
    }
    match paths.first() {
        Some(path) => sync_dir_of(fs, path),
        None => Ok(()),
    }
}
