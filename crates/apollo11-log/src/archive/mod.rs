//! Archive files: finished runs moved out of the live segments by `gc`, in
//! `archive/<generation:020>.arc`, read by the segments' record framing and event codec. Each
//! run is one batch (its event records in seq order, then a commit record), then a table of the
//! runs and an end record pointing at it, so that one run is read without the others and
//! nothing of the archive is kept in memory. Written whole or not at all: a temp file, synced,
//! renamed, the directory synced. The layout is in `docs/log-format.md` (Archive).

mod ids;
mod read;

pub(crate) use ids::{against, past_end, remove_leftovers, reserve};
pub use read::{check, read_run, runs, ArchivedRun, Checked};
pub(crate) use read::{run_ids_of, table_of};

use crate::durable_files::sync_dir_of;
use crate::file_log::Files;
use crate::file_system::{Fs, Mode};
use crate::format::codec::encode_event;
use crate::format::record::{append_commit, append_record, KIND_EVENT};
use apollo11_core::{Event, RunId, Seq};
use apollo11_store::StoreError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The first bytes of an archive file.
const MAGIC: &[u8; 8] = b"A11ARCHV";
/// The version this crate writes and reads.
const VERSION: u32 = 1;
/// Magic, version, generation, CRC of the 20 bytes before it.
const HEADER_BYTES: usize = 24;
/// Record kind of a piece of the run table.
const KIND_TABLE: u8 = 19;
/// Record kind of the last record: where the table starts, its records, the runs.
const KIND_END: u8 = 20;
/// Bytes of the end record: header, kind, table offset u64, records u32, runs u32.
const END_BYTES: usize = crate::format::record::HEADER_BYTES + 1 + 16;
/// Most bytes of entries in one table record (the record's limit, less its kind byte).
const TABLE_RECORD_BYTES_MAX: usize = apollo11_core::limits::RECORD_BYTES_MAX as usize - 1;

/// The folder of archive files in a data directory.
pub const DIR: &str = "archive";

/// What [`write`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The file, relative to the data directory.
    pub file: String,
    /// Its generation.
    pub generation: u64,
    /// Runs archived.
    pub runs: usize,
    /// Their events.
    pub events: u64,
    /// The file's size.
    pub bytes: u64,
}

/// The 64-bit hash (FNV-1a) of a run id the writer keeps for each archived run.
pub(crate) fn id_hash(run_id: &str) -> u64 {
    run_id.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Where the archived runs are: the newest generation holding a run whose id has each hash
/// ([`id_hash`]), and the newest generation known. A writing open keeps it (8 + 8 bytes a
/// run), so that a read of an archived run opens one archive file, and an append to a new
/// run none.
#[derive(Debug, Default)]
pub(crate) struct Generations {
    by_hash: HashMap<u64, u64>,
    newest: u64,
}

impl Generations {
    /// `runs` are in the archive file of `generation`, the newest.
    pub fn add(&mut self, runs: &[RunId], generation: u64) {
        (self.by_hash).extend(runs.iter().map(|r| (id_hash(r.as_str()), generation)));
        self.newest = self.newest.max(generation);
    }

    /// Where to look for `run_id`.
    pub fn place(&self, run_id: &RunId) -> Place {
        match self.by_hash.get(&id_hash(run_id.as_str())) {
            Some(&generation) => Place::In(generation),
            None => Place::NewerThan(self.newest),
        }
    }
}

/// Where to look for a run in the archive files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// The file of this generation holds a run whose id hashes as the run's: most likely
    /// the run itself; else (another run's id, rarely) every file is looked in.
    In(u64),
    /// No file a writing open knows of holds it: only files newer than this generation
    /// (put there since, by hand: normally none) are looked in.
    NewerThan(u64),
    /// A read-only open knows nothing: every file, newest first.
    Anywhere,
}

/// The run's events from `from_seq` on in the archive of `dir`, looked for at `place`;
/// `None` when the archive files looked in lack it.
///
/// # Errors
///
/// As [`read_run`].
pub(crate) fn find_run(
    fs: &dyn Fs,
    dir: &Path,
    place: Place,
    run_id: &RunId,
    from_seq: Seq,
) -> Result<Option<Vec<Event>>, StoreError> {
    match place {
        Place::In(generation) => {
            let path = path_of(dir, generation);
            match read::read_run_in(fs, &path, run_id, from_seq)? {
                Some(events) => Ok(Some(events)),
                None => read_run(fs, dir, run_id, from_seq),
            }
        }
        Place::NewerThan(generation) => read::read_run_after(fs, dir, generation, run_id, from_seq),
        Place::Anywhere => read_run(fs, dir, run_id, from_seq),
    }
}

/// File name of the archive of `generation`.
fn file_name(generation: u64) -> String {
    format!("{generation:020}.arc")
}

/// The name of the archive file at `path`, relative to the data directory.
pub(crate) fn name_of(path: &Path) -> String {
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    format!("{DIR}/{}", file_name.unwrap_or_default())
}

/// The name in the archive folder of `name`, relative to the data directory.
pub(crate) fn name_in_folder(name: &str) -> &str {
    (name.strip_prefix(DIR))
        .and_then(|n| n.strip_prefix('/'))
        .unwrap_or(name)
}

/// The archive file of `generation` in the data directory `dir`.
pub(crate) fn path_of(dir: &Path, generation: u64) -> PathBuf {
    dir.join(DIR).join(file_name(generation))
}

/// The generation an archive file name stands for.
fn parse_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".arc")?;
    (digits.len() == 20).then(|| digits.parse().ok()).flatten()
}

/// The generation a name in the archive folder is numbered with: `<20 digits>.` then anything
/// (`.arc`, `.arc.damaged`, `.gc`, `.arc.tmp`).
fn numbered(name: &str) -> Option<u64> {
    let (digits, _) = name.split_once('.')?;
    (digits.len() == 20).then(|| digits.parse().ok()).flatten()
}

/// The highest generation any name in the archive folder `folder` is numbered with: a new
/// archive file takes the next, so that it never takes the name of a file set aside, a
/// manifest or a temp file (a later `repair` would set it aside onto an earlier one).
fn newest_generation(fs: &dyn Fs, folder: &Path) -> Result<Option<u64>, StoreError> {
    let names = (fs.list(folder))
        .map_err(|e| StoreError::io(format!("listing {}", folder.display()), e))?;
    Ok(names.iter().filter_map(|n| numbered(n)).max())
}

/// The archive files of `dir`, oldest first (none when there is no archive folder).
///
/// # Errors
///
/// [`StoreError::Io`] when the folder exists but cannot be listed.
pub fn files(fs: &dyn Fs, dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let folder = dir.join(DIR);
    let names = match fs.list(&folder) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io(format!("listing {}", folder.display()), e)),
    };
    Ok(names
        .into_iter()
        .filter(|n| parse_file_name(n).is_some())
        .map(|n| folder.join(n))
        .collect())
}

/// Writes the runs `runs` to a new archive file (see [`crate::FileLog::write_archive`]).
///
/// # Errors
///
/// As [`crate::FileLog::write_archive`].
pub(crate) fn write_archive(files: &Files, runs: &[RunId]) -> Result<Written, StoreError> {
    let read = |run: &RunId| files.index().read_run(run, Seq(1));
    let written = write(files.fs.as_ref(), &files.dir, runs, &read)?;
    let mut archived = (files.shared.archived.write()).unwrap_or_else(|p| p.into_inner());
    archived
        .get_or_insert_with(Generations::default)
        .add(runs, written.generation);
    Ok(written)
}

/// Writes `runs` as `read` gives their events to a new archive file after the newest.
fn write(
    fs: &dyn Fs,
    dir: &Path,
    runs: &[RunId],
    read: &dyn Fn(&RunId) -> Result<Vec<Event>, StoreError>,
) -> Result<Written, StoreError> {
    let mut runs = runs.to_vec();
    runs.sort();
    runs.dedup();
    let (bytes, events) = encode(&runs, read)?;
    let folder = dir.join(DIR);
    let io = |what: &str, path: &Path, e| StoreError::io(format!("{what} {}", path.display()), e);
    fs.create_dir_all(&folder)
        .map_err(|e| io("creating", &folder, e))?;
    sync_dir_of(fs, &folder)?;
    let generation = newest_generation(fs, &folder)?.map_or(1, |g| g + 1);
    let name = file_name(generation);
    let path = folder.join(&name);
    let tmp = path.with_extension("arc.tmp");
    // A temp file left by a crash is garbage by definition: it was never renamed.
    let _ = fs.remove(&tmp);
    let file = fs
        .open(&tmp, Mode::CreateNew)
        .map_err(|e| io("creating", &tmp, e))?;
    file.write_all_at(&header(generation), 0)
        .and_then(|()| file.write_all_at(&bytes, HEADER_BYTES as u64))
        .and_then(|()| file.sync_data())
        .map_err(|e| io("writing", &tmp, e))?;
    drop(file);
    fs.rename(&tmp, &path)
        .map_err(|e| io("renaming", &tmp, e))?;
    sync_dir_of(fs, &path)?;
    Ok(Written {
        file: format!("{DIR}/{name}"),
        generation,
        runs: runs.len(),
        events,
        bytes: (HEADER_BYTES + bytes.len()) as u64,
    })
}

/// The generation of the archive file at `path`, by its name.
fn generation_of(path: &Path) -> Option<u64> {
    parse_file_name(path.file_name()?.to_str()?)
}

fn header(generation: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Everything after the header: each run's batch, the table, the end record. Returns the
/// bytes and the number of events.
fn encode(
    runs: &[RunId],
    read: &dyn Fn(&RunId) -> Result<Vec<Event>, StoreError>,
) -> Result<(Vec<u8>, u64), StoreError> {
    let mut out = Vec::new();
    let mut table = Vec::with_capacity(runs.len());
    let mut total = 0u64;
    for run in runs {
        let events = read(run)?;
        let last = events.last().ok_or_else(|| StoreError::NotFound {
            what: format!("run `{run}`"),
        })?;
        let start = out.len();
        for event in &events {
            append_record(&mut out, KIND_EVENT, |b| {
                encode_event(event, b).expect("events read back from the log encode");
            });
        }
        let batch = (out.len() - start) as u32;
        append_commit(&mut out, events.len() as u32, batch);
        table.push(ArchivedRun {
            run_id: run.clone(),
            offset: (HEADER_BYTES + start) as u64,
            bytes: (out.len() - start) as u32,
            events: events.len() as u32,
            last_event_id: last.event_id.0,
        });
        total += events.len() as u64;
    }
    let table_at = (HEADER_BYTES + out.len()) as u64;
    let mut records = 0u32;
    for piece in table_pieces(&table) {
        append_record(&mut out, KIND_TABLE, |b| b.extend_from_slice(&piece));
        records += 1;
    }
    append_record(&mut out, KIND_END, |b| {
        b.extend_from_slice(&table_at.to_le_bytes());
        b.extend_from_slice(&records.to_le_bytes());
        b.extend_from_slice(&(table.len() as u32).to_le_bytes());
    });
    Ok((out, total))
}

/// The table's entries, as many to a record as fit.
fn table_pieces(table: &[ArchivedRun]) -> Vec<Vec<u8>> {
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    for entry in table {
        let bytes = entry.encode();
        match pieces.last_mut() {
            Some(piece) if piece.len() + bytes.len() <= TABLE_RECORD_BYTES_MAX => {
                piece.extend_from_slice(&bytes);
            }
            _ => pieces.push(bytes),
        }
    }
    pieces
}

impl ArchivedRun {
    /// `[len u32][run id][offset u64][bytes u32][events u32][last event id u64]`.
    fn encode(&self) -> Vec<u8> {
        let id = self.run_id.as_str().as_bytes();
        let mut out = Vec::with_capacity(28 + id.len());
        out.extend_from_slice(&(id.len() as u32).to_le_bytes());
        out.extend_from_slice(id);
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.bytes.to_le_bytes());
        out.extend_from_slice(&self.events.to_le_bytes());
        out.extend_from_slice(&self.last_event_id.to_le_bytes());
        out
    }
}

#[cfg(test)]
mod tests;
