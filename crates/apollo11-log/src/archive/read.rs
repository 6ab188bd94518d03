//! Reading archive files: the table from the end record, one run's batch by its entry, and
//! the whole-file check of `verify`. Every record's CRC is checked where it is read, and every
//! failure names the file and the offset.

use super::{files, generation_of, END_BYTES, HEADER_BYTES, KIND_END, KIND_TABLE, MAGIC, VERSION};
use crate::file_system::{Fs, FsFile, Mode};
use crate::format::codec::decode_event;
use crate::format::record::{commit_fields, parse_frame, Parsed, KIND_COMMIT, KIND_EVENT};
use apollo11_core::{Event, EventId, RunId, Seq};
use apollo11_store::{RunSummary, StoreError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A run in an archive file's table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchivedRun {
    /// The run.
    pub run_id: RunId,
    /// Where its batch starts.
    pub offset: u64,
    /// Its batch's bytes, commit record included.
    pub bytes: u32,
    /// Its events (seq 1 to this).
    pub events: u32,
    /// Its last event's id.
    pub last_event_id: u64,
}

/// What a whole-file check found in an archive file that passed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The file, relative to the data directory.
    pub file: String,
    /// Runs.
    pub runs: usize,
    /// Events.
    pub events: u64,
    /// The highest event id it holds (0 when it holds no run).
    pub last_event_id: u64,
}

/// One archive file, open, with its table read.
struct Opened {
    name: String,
    file: Box<dyn FsFile>,
    table: Vec<ArchivedRun>,
    /// Where the table starts: the end of the last batch.
    table_at: u64,
}

impl Opened {
    fn open(fs: &dyn Fs, path: &Path) -> Result<Opened, StoreError> {
        let name = super::name_of(path);
        let file = fs
            .open(path, Mode::Read)
            .map_err(|e| StoreError::io(format!("opening {}", path.display()), e))?;
        let mut opened = Opened {
            name,
            file,
            table: Vec::new(),
            table_at: 0,
        };
        opened.read_table()?;
        Ok(opened)
    }

    fn damaged(&self, offset: u64, reason: impl Into<String>) -> StoreError {
        StoreError::Corrupted {
            file: self.name.clone(),
            offset,
            reason: reason.into(),
        }
    }

    fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        let mut buf =
            vec![0u8; usize::try_from(len).map_err(|_| self.damaged(offset, "too long"))?];
        (self.file.read_exact_at(&mut buf, offset))
            .map_err(|e| StoreError::io(format!("reading {} at offset {offset}", self.name), e))?;
        Ok(buf)
    }

    /// Checks the header, reads the end record and the table it points at.
    fn read_table(&mut self) -> Result<(), StoreError> {
        let size =
            (self.file.size()).map_err(|e| StoreError::io(format!("sizing {}", self.name), e))?;
        if size < (HEADER_BYTES + END_BYTES) as u64 {
            return Err(self.damaged(0, format!("{size} bytes, too short for an archive")));
        }
        let header = self.read(0, HEADER_BYTES as u64)?;
        let stored = u32::from_le_bytes(header[20..24].try_into().expect("4 bytes"));
        if crc32fast::hash(&header[..20]) != stored || &header[..8] != MAGIC {
            return Err(self.damaged(0, "not an archive header (magic or checksum)"));
        }
        let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            let reason = format!("archive version {version}; this build reads {VERSION}");
            return Err(self.damaged(0, reason));
        }
        let end_at = size - END_BYTES as u64;
        let end = self.read(end_at, END_BYTES as u64)?;
        let fields = match parse_frame(&end, 0) {
            Parsed::Record {
                kind: KIND_END,
                body,
                ..
            } if body.len() == 16 => body,
            _ => return Err(self.damaged(end_at, "no valid end record at the end")),
        };
        let table_at = u64::from_le_bytes(fields[0..8].try_into().expect("8 bytes"));
        let records = u32::from_le_bytes(fields[8..12].try_into().expect("4 bytes"));
        let runs = u32::from_le_bytes(fields[12..16].try_into().expect("4 bytes"));
        if !(HEADER_BYTES as u64..=end_at).contains(&table_at) {
            return Err(self.damaged(
                end_at,
                format!("the table offset {table_at} is outside the file"),
            ));
        }
        let bytes = self.read(table_at, end_at - table_at)?;
        let mut at = 0;
        for _ in 0..records {
            let here = table_at + at as u64;
            let Parsed::Record {
                kind: KIND_TABLE,
                body,
                next,
            } = parse_frame(&bytes, at)
            else {
                return Err(self.damaged(here, "a table record is damaged or missing"));
            };
            self.decode_entries(body, here)?;
            at = next;
        }
        if at != bytes.len() || self.table.len() != runs as usize {
            let reason = format!(
                "the end record says {records} table records of {runs} runs; the table holds \
                 {} runs in {at} of {} bytes",
                self.table.len(),
                bytes.len()
            );
            return Err(self.damaged(end_at, reason));
        }
        self.table_at = table_at;
        Ok(())
    }

    fn decode_entries(&mut self, mut body: &[u8], here: u64) -> Result<(), StoreError> {
        let mut take = |n: usize| -> Option<&[u8]> {
            let (head, rest) = body.split_at_checked(n)?;
            body = rest;
            Some(head)
        };
        let bad = || self.damaged(here, "a table entry is cut or not a run id");
        let mut entries = Vec::new();
        while let Some(len) = take(4) {
            let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
            let entry = (|| {
                let id = std::str::from_utf8(take(len)?).ok()?;
                let fields = take(24)?;
                Some(ArchivedRun {
                    run_id: RunId::from(id),
                    offset: u64::from_le_bytes(fields[0..8].try_into().ok()?),
                    bytes: u32::from_le_bytes(fields[8..12].try_into().ok()?),
                    events: u32::from_le_bytes(fields[12..16].try_into().ok()?),
                    last_event_id: u64::from_le_bytes(fields[16..24].try_into().ok()?),
                })
            })();
            entries.push(entry.ok_or_else(bad)?);
        }
        self.table.extend(entries);
        Ok(())
    }

    /// The events of the run of `entry`, each record checked: CRC, an event of this run,
    /// seqs from 1, ids increasing to the entry's last, closed by a commit record naming them.
    fn events(&self, entry: &ArchivedRun) -> Result<Vec<Event>, StoreError> {
        let in_batches = (HEADER_BYTES as u64..=self.table_at).contains(&entry.offset)
            && entry.offset + u64::from(entry.bytes) <= self.table_at;
        if !in_batches {
            let reason = format!("the table places run `{}` outside the runs", entry.run_id);
            return Err(self.damaged(entry.offset, reason));
        }
        let bytes = self.read(entry.offset, u64::from(entry.bytes))?;
        let mut events: Vec<Event> = Vec::with_capacity(entry.events.min(1 << 16) as usize);
        let mut at = 0;
        loop {
            let here = entry.offset + at as u64;
            let parsed = parse_frame(&bytes, at);
            let (kind, body, next) = match parsed {
                Parsed::Record { kind, body, next } => (kind, body, next),
                Parsed::End | Parsed::Invalid(_) => {
                    return Err(self.damaged(here, "a record of the run is damaged or cut"))
                }
            };
            if kind == KIND_COMMIT {
                let closes = (events.len() as u32, at as u32);
                let last = events.last().map(|e| e.event_id.0);
                if commit_fields(body) != Some(closes)
                    || next != bytes.len()
                    || events.len() != entry.events as usize
                    || last != Some(entry.last_event_id)
                {
                    let reason =
                        format!("the run `{}` does not end as its entry says", entry.run_id);
                    return Err(self.damaged(here, reason));
                }
                return Ok(events);
            }
            let event = (kind == KIND_EVENT)
                .then(|| decode_event(body).ok())
                .flatten()
                .ok_or_else(|| self.damaged(here, "not an event record"))?;
            let after = events.last().map_or(0, |e| e.event_id.0);
            if event.run_id != entry.run_id.as_str()
                || event.seq != Seq(events.len() as u32 + 1)
                || event.event_id.0 <= after
            {
                let reason = format!(
                    "event {} of run `{}` seq {} where run `{}` seq {} was expected",
                    event.event_id,
                    event.run_id,
                    event.seq.0,
                    entry.run_id,
                    events.len() + 1
                );
                return Err(self.damaged(here, reason));
            }
            events.push(event.to_event());
            at = next;
        }
    }
}

/// The archived run's events from `from_seq` on; `None` when no archive file holds it (the
/// newest file holding it answers).
///
/// # Errors
///
/// [`StoreError::Corrupted`] naming the archive file and offset of the damage met on the
/// way; [`StoreError::Io`].
pub fn read_run(
    fs: &dyn Fs,
    dir: &Path,
    run_id: &RunId,
    from_seq: Seq,
) -> Result<Option<Vec<Event>>, StoreError> {
    read_run_after(fs, dir, 0, run_id, from_seq)
}

/// As [`read_run`], in the archive files of generations above `after` only.
///
/// # Errors
///
/// As [`read_run`].
pub(crate) fn read_run_after(
    fs: &dyn Fs,
    dir: &Path,
    after: u64,
    run_id: &RunId,
    from_seq: Seq,
) -> Result<Option<Vec<Event>>, StoreError> {
    let files = files(fs, dir)?;
    let newer = |path: &&PathBuf| generation_of(path).is_some_and(|g| g > after);
    for path in files.iter().rev().filter(newer) {
        if let Some(events) = read_run_in(fs, path, run_id, from_seq)? {
            return Ok(Some(events));
        }
    }
    Ok(None)
}

/// The run's events from `from_seq` on in the archive file at `path` alone; `None` when it
/// does not hold the run.
///
/// # Errors
///
/// As [`read_run`].
pub(crate) fn read_run_in(
    fs: &dyn Fs,
    path: &Path,
    run_id: &RunId,
    from_seq: Seq,
) -> Result<Option<Vec<Event>>, StoreError> {
    let opened = Opened::open(fs, path)?;
    let Some(entry) = opened.table.iter().find(|e| e.run_id == *run_id) else {
        return Ok(None);
    };
    let skip = from_seq.0.saturating_sub(1) as usize;
    Ok(Some(opened.events(entry)?.into_iter().skip(skip).collect()))
}

/// The ids of the runs the archive file at `path` holds.
///
/// # Errors
///
/// As [`read_run`].
pub(crate) fn run_ids_of(fs: &dyn Fs, path: &Path) -> Result<Vec<RunId>, StoreError> {
    let table = table_of(fs, path)?;
    Ok(table.into_iter().map(|entry| entry.run_id).collect())
}

/// The table of the archive file at `path`: its runs, in run id order.
///
/// # Errors
///
/// As [`read_run`].
pub(crate) fn table_of(fs: &dyn Fs, path: &Path) -> Result<Vec<ArchivedRun>, StoreError> {
    Ok(Opened::open(fs, path)?.table)
}

/// Every archived run with its last seq and event id, by run id.
///
/// # Errors
///
/// As [`read_run`].
pub fn runs(fs: &dyn Fs, dir: &Path) -> Result<Vec<RunSummary>, StoreError> {
    let mut runs = BTreeMap::new();
    for path in files(fs, dir)? {
        for entry in Opened::open(fs, &path)?.table {
            let summary = RunSummary {
                run_id: entry.run_id.clone(),
                last_seq: Seq(entry.events),
                last_event_id: EventId(entry.last_event_id),
            };
            runs.insert(entry.run_id, summary);
        }
    }
    Ok(runs.into_values().collect())
}

/// Checks every byte of the archive file at `path`: its header, every run's batch (each
/// record as [`read_run`] checks it), the runs one after another from the header to the
/// table, the table and the end record.
///
/// # Errors
///
/// [`StoreError::Corrupted`] naming the file and offset of the first damage; [`StoreError::Io`].
pub fn check(fs: &dyn Fs, path: &Path) -> Result<Checked, StoreError> {
    let opened = Opened::open(fs, path)?;
    let mut at = HEADER_BYTES as u64;
    let mut events = 0;
    let mut previous: Option<&RunId> = None;
    for entry in &opened.table {
        if previous.is_some_and(|p| *p >= entry.run_id) {
            let reason = format!(
                "run `{}` is out of order or twice in the table",
                entry.run_id
            );
            return Err(opened.damaged(opened.table_at, reason));
        }
        previous = Some(&entry.run_id);
        if entry.offset != at {
            let reason = format!(
                "the table places run `{}` at offset {}, where the run before it ends at {at}",
                entry.run_id, entry.offset
            );
            return Err(opened.damaged(entry.offset, reason));
        }
        events += opened.events(entry)?.len() as u64;
        at += u64::from(entry.bytes);
    }
    if at != opened.table_at {
        let reason = format!(
            "the runs end at offset {at}, the table starts at {}",
            opened.table_at
        );
        return Err(opened.damaged(at, reason));
    }
    Ok(Checked {
        file: opened.name,
        runs: opened.table.len(),
        events,
        last_event_id: (opened.table.iter())
            .map(|entry| entry.last_event_id)
            .max()
            .unwrap_or(0),
    })
}
