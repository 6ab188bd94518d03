//! The in-memory index rebuilt on open: where every event's record is, and each run's event
//! ids, so reads go straight to their records and never scan the log.

use crate::file_system::FsFile;
use crate::format::segment::{Indexed, Scanned};
use crate::scan::Part;
use apollo11_core::{Event, EventId, RunId, Seq};
use apollo11_store::{RunSummary, StoreError};
use std::collections::HashMap;
use std::sync::Arc;

/// One segment: its file and the record offset of each of its events.
pub struct SegmentIndex {
    /// First event id the segment covers.
    pub base: u64,
    /// A compacted (version 2) segment's ids; `None` when they run from `base` on.
    pub sparse: Option<Sparse>,
    /// File name, for error messages.
    pub name: String,
    /// The open file.
    pub file: Arc<dyn FsFile>,
    /// `offsets[i]` is the record offset of the segment's event `i` (id [`Self::id_at`]).
    pub offsets: Vec<u32>,
    /// `slots[i]` is the run slot of the segment's event `i`.
    pub slots: Vec<u32>,
    /// Whether `file` is a compressed segment (read through its decompressed bytes).
    pub cold: bool,
}

/// A segment's [`Scanned`] built a stretch of events at a time
/// ([`Index::scan_more`]).
pub struct Scanning {
    /// What it holds so far.
    pub scanned: Scanned,
    /// Per run slot: the run's position in `scanned.runs` (`u32::MAX` until seen).
    local: Vec<u32>,
    /// Per run in `scanned.runs`: the seq of its next event in the segment.
    next_seq: Vec<u32>,
}

impl Scanning {
    /// Nothing of `segment` yet; the scan will end at `end`.
    pub fn new(segment: &SegmentIndex, end: u64) -> Scanning {
        Scanning {
            scanned: Scanned {
                base: segment.base,
                covers_to: segment.sparse.as_ref().map(|s| s.covers_to),
                events: Vec::with_capacity(segment.offsets.len()),
                runs: Vec::new(),
                end,
                stop: None,
            },
            local: Vec::new(),
            next_seq: Vec::new(),
        }
    }
}

impl SegmentIndex {
    /// An empty segment's index.
    pub fn new(base: u64, name: String, file: Arc<dyn FsFile>) -> SegmentIndex {
        SegmentIndex {
            base,
            sparse: None,
            name,
            file,
            offsets: Vec::new(),
            slots: Vec::new(),
            cold: false,
        }
    }

    /// The id of the segment's event `i`.
    pub fn id_at(&self, i: usize) -> u64 {
        match &self.sparse {
            Some(sparse) => sparse.ids[i],
            None => self.base + i as u64,
        }
    }

    /// Where event `id` is among the segment's events, if it holds it.
    pub fn position(&self, id: u64) -> Option<usize> {
        match &self.sparse {
            Some(sparse) => sparse.ids.binary_search(&id).ok(),
            None => (id.checked_sub(self.base)? < self.offsets.len() as u64)
                .then(|| (id - self.base) as usize),
        }
    }

    /// How many of the segment's events have ids below `id`.
    pub fn count_below(&self, id: u64) -> usize {
        match &self.sparse {
            Some(sparse) => sparse.ids.partition_point(|&x| x < id),
            None => (id.saturating_sub(self.base) as usize).min(self.offsets.len()),
        }
    }
}

/// The ids of a compacted segment, which skip those moved to an archive.
pub struct Sparse {
    /// The last id the segment covers.
    pub covers_to: u64,
    /// Each event's id, increasing.
    pub ids: Vec<u64>,
}

/// Everything a reader needs, updated by the writer after each durable batch.
#[derive(Default)]
pub struct Index {
    /// Segments in event-id order.
    pub segments: Vec<SegmentIndex>,
    /// Each run's slot in `run_ids` and `run_events`.
    runs: HashMap<RunId, u32>,
    run_ids: Vec<RunId>,
    /// Each slot's event ids, in seq order (seq `i + 1` is `run_events[slot][i]`).
    run_events: Vec<Vec<u64>>,
    /// Id of the last durable event, or the last id a compacted segment covers when that is
    /// higher (the ids after it moved to an archive): the next event's id is one more.
    pub last_event_id: u64,
    /// How many times `gc` replaced the index: positions read under an older one (a read
    /// ahead) are stale.
    pub generation: u64,
}

impl Index {
    /// The slot of a run, created on first sight.
    pub fn slot(&mut self, run_id: &str) -> u32 {
        if let Some(&slot) = self.runs.get(run_id) {
            return slot;
        }
        let slot = self.run_ids.len() as u32;
        self.runs.insert(RunId::from(run_id), slot);
        self.run_ids.push(RunId::from(run_id));
        self.run_events.push(Vec::new());
        slot
    }

    /// Records a durable event.
    pub fn push(&mut self, run_id: &str, event_id: u64, offset: u32) {
        let slot = self.slot(run_id);
        self.push_to_slot(slot, event_id, offset);
    }

    /// Records a durable event of the run in `slot`, in the last segment (in a compacted one,
    /// ids may skip).
    pub fn push_to_slot(&mut self, slot: u32, event_id: u64, offset: u32) {
        let segment = self
            .segments
            .last_mut()
            .expect("an event lives in a segment");
        match &mut segment.sparse {
            Some(sparse) => {
                assert!(event_id > self.last_event_id, "event ids increase");
                sparse.ids.push(event_id);
            }
            None => {
                assert_eq!(
                    event_id,
                    self.last_event_id + 1,
                    "event ids are consecutive"
                );
                assert_eq!(segment.base + segment.offsets.len() as u64, event_id);
            }
        }
        segment.offsets.push(offset);
        segment.slots.push(slot);
        self.run_events[slot as usize].push(event_id);
        self.last_event_id = event_id;
    }

    /// The last seq of the run in `slot`.
    pub fn slot_last_seq(&self, slot: u32) -> u32 {
        self.run_events[slot as usize].len() as u32
    }

    /// What segment `position` holds, as a scan of it ending at `end` would find it.
    pub fn scanned(&self, position: usize, end: u64) -> Scanned {
        let mut scanning = Scanning::new(&self.segments[position], end);
        self.scan_more(position, &mut scanning, usize::MAX);
        scanning.scanned
    }

    /// Adds up to `count` more of segment `position`'s events to `scanning`; true once it
    /// holds them all.
    ///
    /// A run's events in a segment are a stretch of its ids in order, so only its first one
    /// there is searched for; the rest count on from it. Runs are found by slot in a table,
    /// not hashed: a sealed segment holds hundreds of thousands of events.
    pub fn scan_more(&self, position: usize, scanning: &mut Scanning, count: usize) -> bool {
        let segment = &self.segments[position];
        let from = scanning.scanned.events.len();
        let to = from.saturating_add(count).min(segment.offsets.len());
        for i in from..to {
            let (id, slot) = (segment.id_at(i), segment.slots[i] as usize);
            if slot >= scanning.local.len() {
                scanning.local.resize(slot + 1, u32::MAX);
            }
            let run = &mut scanning.local[slot];
            if *run == u32::MAX {
                *run = scanning.scanned.runs.len() as u32;
                scanning.scanned.runs.push(self.run_ids[slot].to_string());
                let ids = &self.run_events[slot];
                scanning
                    .next_seq
                    .push(ids.partition_point(|&x| x < id) as u32 + 1);
            }
            let seq = &mut scanning.next_seq[*run as usize];
            scanning.scanned.events.push(Indexed {
                id,
                offset: segment.offsets[i],
                seq: *seq,
                run: *run,
            });
            *seq += 1;
        }
        to == segment.offsets.len()
    }

    /// The run of `segment`'s event `p`.
    pub fn run_of(&self, segment: &SegmentIndex, p: usize) -> &str {
        self.run_ids[segment.slots[p] as usize].as_str()
    }

    /// The ids of the run's events, in seq order (`None` for a run the index lacks).
    pub fn event_ids(&self, run_id: &str) -> Option<&[u64]> {
        let slot = *self.runs.get(run_id)?;
        Some(&self.run_events[slot as usize])
    }

    /// The run's last seq (0 for an unknown run).
    pub fn last_seq(&self, run_id: &str) -> u32 {
        self.runs
            .get(run_id)
            .map_or(0, |&slot| self.slot_last_seq(slot))
    }

    /// The position in `segments` of the segment covering `event_id` (or of the first one,
    /// for an id before it).
    pub(crate) fn covering(&self, event_id: u64) -> usize {
        self.segments
            .partition_point(|s| s.base <= event_id)
            .saturating_sub(1)
    }

    /// The segment holding `event_id`, and the event's position in it.
    pub(crate) fn locate(&self, event_id: u64) -> Result<(&SegmentIndex, usize), StoreError> {
        self.segments
            .get(self.covering(event_id))
            .and_then(|s| Some((s, s.position(event_id)?)))
            .ok_or_else(|| StoreError::NotFound {
                what: format!("event {event_id}"),
            })
    }

    /// The CRC stored in the header of the record of event `watermark`: what a snapshot saved
    /// at that watermark identifies the log by. `None` when nothing can: watermark 0, or an
    /// event `gc` moved to an archive (its id skipped by a compacted segment).
    pub fn watermark_crc(&self, watermark: u64) -> Result<Option<u32>, StoreError> {
        let moved = |s: &SegmentIndex| s.sparse.is_some() && s.position(watermark).is_none();
        let segment = self.segments.get(self.covering(watermark));
        if watermark == 0 || segment.is_some_and(moved) {
            return Ok(None);
        }
        self.record_crc(watermark).map(Some)
    }

    fn record_crc(&self, event_id: u64) -> Result<u32, StoreError> {
        let (segment, position) = self.locate(event_id)?;
        let offset = u64::from(segment.offsets[position]);
        let mut header = [0u8; 8];
        segment
            .file
            .read_exact_at(&mut header, offset)
            .map_err(|e| crate::scan::read_error(segment, offset, e))?;
        Ok(u32::from_le_bytes(
            header[4..8].try_into().expect("4 bytes"),
        ))
    }

    /// Reads one event by id, checking its CRC and that it is the event asked for.
    pub fn read(&self, event_id: u64) -> Result<Event, StoreError> {
        let mut event = None;
        let mut buf = Vec::new();
        let (segment, position) = self.locate(event_id)?;
        let chunk = self.chunk(segment, (position, position), &mut buf)?;
        chunk.scan(Part::ALL, &mut |e| event = Some(e.to_event()))?;
        Ok(event.expect("a chunk of one event"))
    }

    /// The run's event with seq `seq`, if it has one.
    pub fn read_event(&self, run_id: &RunId, seq: Seq) -> Result<Option<Event>, StoreError> {
        let id = self
            .runs
            .get(run_id.as_str())
            .and_then(|&slot| self.run_events[slot as usize].get(seq.0.checked_sub(1)? as usize));
        id.map(|&id| self.read(id)).transpose()
    }

    /// The run's events from `from_seq` on.
    pub fn read_run(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError> {
        let Some(ids) = self
            .runs
            .get(run_id.as_str())
            .map(|&slot| &self.run_events[slot as usize])
        else {
            return Ok(Vec::new());
        };
        let skip = (from_seq.0.saturating_sub(1) as usize).min(ids.len());
        let mut events = Vec::with_capacity(ids.len() - skip);
        let mut buf = Vec::new();
        let mut rest = &ids[skip..];
        // One read for each stretch of the run's events that follow one another in a segment.
        while let Some(&first) = rest.first() {
            let (segment, position) = self.locate(first)?;
            let stretch = (rest.iter().zip(position..segment.offsets.len()))
                .take_while(|(&id, at)| id == segment.id_at(*at))
                .count();
            let chunk = self.chunk(segment, (position, position + stretch - 1), &mut buf)?;
            chunk.scan(Part::ALL, &mut |e| events.push(e.to_event()))?;
            rest = &rest[stretch..];
        }
        Ok(events)
    }

    /// At most `max` events from id `from` on, read in chunks (see `scan_from`).
    pub fn read_from(&self, from: EventId, max: u32) -> Result<Vec<Event>, StoreError> {
        let mut events = Vec::new();
        self.scan_from(from, max, &mut |e| events.push(e.to_event()))?;
        Ok(events)
    }

    /// Every run with its last seq and event id.
    pub fn list_runs(&self) -> Vec<RunSummary> {
        let mut runs: Vec<RunSummary> = self
            .run_ids
            .iter()
            .zip(&self.run_events)
            .map(|(run_id, ids)| RunSummary {
                run_id: run_id.clone(),
                last_seq: Seq(ids.len() as u32),
                last_event_id: EventId(*ids.last().expect("a run has events")),
            })
            .collect();
        runs.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        runs
    }
}
