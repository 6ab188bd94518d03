//! Reading events back in id order, borrowed from the bytes read: chunks of one segment read
//! at once, every record's CRC checked, events decoded in place. A scan for a fold of every
//! run splits the runs between threads.

use crate::format::codec::decode_event;
use crate::format::record::{parse, Parsed, HEADER_BYTES, KIND_EVENT};
use crate::run_index::{Index, SegmentIndex};
use apollo11_core::{limits, EventId, EventRef};
use apollo11_store::StoreError;

/// A scan reads at most this many events' records at once.
pub const CHUNK_EVENTS: u64 = 1_024;

/// A scan of some runs reads through stretches of other runs' records shorter than this,
/// and around longer ones.
const GAP_BYTES: u64 = 16 * 1024;

/// The runs whose events a scan hands on: those whose run slot is `index` modulo `of`.
#[derive(Clone, Copy)]
pub struct Part {
    index: u32,
    of: u32,
}

impl Part {
    /// Every run.
    pub const ALL: Part = Part { index: 0, of: 1 };

    /// Whether this part has the run in `slot`: it checks and decodes that run's event
    /// records, and checks the commit records that follow them (a group commit's record
    /// follows its last event).
    fn holds(self, slot: u32) -> bool {
        slot % self.of == self.index
    }
}

/// The records of the segment's events `first..=last` (positions in it), read at once.
pub struct Chunk<'a> {
    segment: &'a SegmentIndex,
    first: usize,
    last: usize,
    /// Offset of `bytes` in the segment file.
    start: u64,
    bytes: &'a [u8],
}

/// The chunks a scan from an id will decode, read ahead into one buffer: the IO half of
/// `scan_from`, done where blocking is allowed, so that the decoding half, borrowed and
/// allocation-free, can run anywhere.
pub struct ReadAhead {
    /// `(segment position, first, last event positions in it, offset in the segment, range
    /// in `buf`)`.
    chunks: Vec<(usize, usize, usize, u64, std::ops::Range<usize>)>,
    /// The last event read, if any.
    last: Option<EventId>,
    buf: Vec<u8>,
    /// The id it was read from, and the index's generation then.
    from: u64,
    generation: u64,
}

impl ReadAhead {
    /// The last event read, if any.
    pub fn last(&self) -> Option<EventId> {
        self.last
    }

    /// The id it was read from.
    pub fn from(&self) -> u64 {
        self.from
    }

    /// Whether its positions are those of `index`: no `gc` swap replaced the index since
    /// it was read.
    pub fn is_of(&self, index: &Index) -> bool {
        self.chunks.is_empty() || self.generation == index.generation
    }

    /// The buffer, to read ahead into again.
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }
}

impl Index {
    /// The ids of the first and the last of at most `max` events from id `from` on (`None`
    /// when there is none): the ids a compacted segment skips are not counted.
    pub fn events_from(&self, from: u64, max: u32) -> Option<(u64, u64)> {
        let mut left = max as usize;
        let mut found: Option<(u64, u64)> = None;
        for segment in self.segments.iter().skip(self.covering(from)) {
            if left == 0 {
                break;
            }
            let p = segment.count_below(from);
            let take = (segment.offsets.len() - p).min(left);
            if take > 0 {
                let first = found.map_or(segment.id_at(p), |(first, _)| first);
                found = Some((first, segment.id_at(p + take - 1)));
                left -= take;
            }
        }
        found
    }

    /// Reads the records of at most `max` events from id `from` on, none past id `to`, into
    /// `buf` (cleared first), chunk by chunk as `scan_from` would.
    pub fn read_ahead(
        &self,
        from: EventId,
        (max, to): (u32, u64),
        mut buf: Vec<u8>,
    ) -> Result<ReadAhead, StoreError> {
        buf.clear();
        let Some((first, last)) = self.events_from(from.0.max(1), max) else {
            return Ok(ReadAhead {
                chunks: Vec::new(),
                last: None,
                buf,
                from: from.0,
                generation: self.generation,
            });
        };
        let last = last.min(to);
        let mut chunks = Vec::new();
        for (position, (mut p, end)) in self.stretches((first, last)) {
            let segment = &self.segments[position];
            while p < end {
                let chunk_last = (end - 1).min(p + CHUNK_EVENTS as usize - 1);
                let (start, stop) = chunk_span(segment, (p, chunk_last))?;
                let at = buf.len();
                buf.resize(at + (stop - start) as usize, 0);
                segment
                    .file
                    .read_exact_at(&mut buf[at..], start)
                    .map_err(|e| read_error(segment, start, e))?;
                chunks.push((position, p, chunk_last, start, at..buf.len()));
                p = chunk_last + 1;
            }
        }
        let last = (chunks.last())
            .map(|&(position, _, p, _, _)| EventId(self.segments[position].id_at(p)));
        Ok(ReadAhead {
            chunks,
            last,
            buf,
            from: from.0,
            generation: self.generation,
        })
    }

    /// Hands the events read ahead to `visit`, borrowed and checked as `scan_from` does;
    /// returns the last id visited (`None` past the end). `ahead` must be of this index
    /// ([`ReadAhead::is_of`]).
    pub fn scan_read(
        &self,
        ahead: &ReadAhead,
        visit: &mut dyn FnMut(&EventRef<'_>),
    ) -> Result<Option<EventId>, StoreError> {
        for (position, first, last, start, range) in &ahead.chunks {
            let chunk = Chunk {
                segment: &self.segments[*position],
                first: *first,
                last: *last,
                start: *start,
                bytes: &ahead.buf[range.clone()],
            };
            chunk.scan(Part::ALL, visit)?;
        }
        Ok(ahead.last)
    }

    /// Each segment holding events of ids `first..=last`: its position in `segments` and
    /// the range of those events' positions in it (empty ranges left out).
    fn stretches(&self, (first, last): (u64, u64)) -> Vec<(usize, (usize, usize))> {
        let from = self.covering(first);
        (self.segments.iter().enumerate().skip(from))
            .take_while(|(_, s)| s.base <= last)
            .map(|(i, s)| {
                (
                    i,
                    (s.count_below(first), s.count_below(last.saturating_add(1))),
                )
            })
            .filter(|(_, (p, end))| p < end)
            .collect()
    }

    /// Reads the records of the segment's events `first..=last` (positions) into `buf`.
    pub fn chunk<'a>(
        &self,
        segment: &'a SegmentIndex,
        (first, last): (usize, usize),
        buf: &'a mut Vec<u8>,
    ) -> Result<Chunk<'a>, StoreError> {
        let (start, end) = chunk_span(segment, (first, last))?;
        buf.resize((end - start) as usize, 0);
        segment
            .file
            .read_exact_at(buf, start)
            .map_err(|e| read_error(segment, start, e))?;
        Ok(Chunk {
            segment,
            first,
            last,
            start,
            bytes: buf,
        })
    }

    /// Hands at most `max` events from id `from` on to `visit`, borrowed; returns the last id
    /// visited (`None` past the end).
    pub fn scan_from(
        &self,
        from: EventId,
        max: u32,
        visit: &mut dyn FnMut(&EventRef<'_>),
    ) -> Result<Option<EventId>, StoreError> {
        let Some((first, last)) = self.events_from(from.0.max(1), max) else {
            return Ok(None);
        };
        self.chunks((first, last), Part::ALL, &mut |chunk| {
            chunk.scan(Part::ALL, visit)
        })?;
        Ok(Some(EventId(last)))
    }

    /// Hands every event to one of `visitors`, each called on a thread of its own: all the
    /// events of a run go to the same visitor, in id order. Each thread reads the stretches
    /// of the log that hold its own runs' records and checks and decodes only those (events
    /// and the commit records that follow them), so every record is checked once.
    pub fn scan_runs<V>(&self, visitors: &mut [V]) -> Result<(), StoreError>
    where
        V: FnMut(&EventRef<'_>) + Send,
    {
        let of = visitors.len() as u32;
        std::thread::scope(|scope| {
            let threads: Vec<_> = (0..of)
                .zip(visitors)
                .map(|(index, visit)| {
                    let part = Part { index, of };
                    scope.spawn(move || self.scan_part(part, visit))
                })
                .collect();
            threads
                .into_iter()
                .try_for_each(|t| t.join().expect("a scan thread panicked"))
        })
    }

    /// What [`Index::scan_runs`] does, on the calling thread, one visitor after another
    /// (each still gets its own runs' events, in id order): the deterministic mode's.
    pub fn scan_runs_in_turn<V>(&self, visitors: &mut [V]) -> Result<(), StoreError>
    where
        V: FnMut(&EventRef<'_>),
    {
        let of = visitors.len() as u32;
        (0..of)
            .zip(visitors)
            .try_for_each(|(index, visit)| self.scan_part(Part { index, of }, visit))
    }

    fn scan_part(
        &self,
        part: Part,
        visit: &mut dyn FnMut(&EventRef<'_>),
    ) -> Result<(), StoreError> {
        let range = (1, self.last_event_id);
        self.chunks(range, part, &mut |c| c.scan(part, visit))
    }

    /// Reads the events of `part` among `first..=last` chunk by chunk (one segment, at most
    /// [`CHUNK_EVENTS`], around other runs' stretches of [`GAP_BYTES`] or more) into one
    /// buffer, handing each chunk to `each`.
    fn chunks(
        &self,
        (first, last): (u64, u64),
        part: Part,
        each: &mut dyn FnMut(Chunk<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut buf = Vec::new();
        for (position, (mut p, end)) in self.stretches((first, last)) {
            let segment = &self.segments[position];
            while p < end {
                let Some((start, stop)) = segment.span(part, (p, end - 1)) else {
                    break;
                };
                each(self.chunk(segment, (start, stop), &mut buf)?)?;
                p = stop + 1;
            }
        }
        Ok(())
    }
}

/// Where the records of the segment's events `first..=last` (positions) start and end.
fn chunk_span(
    segment: &SegmentIndex,
    (first, last): (usize, usize),
) -> Result<(u64, u64), StoreError> {
    let offset_of = |p: usize| u64::from(segment.offsets[p]);
    let start = offset_of(first);
    if last + 1 < segment.offsets.len() {
        return Ok((start, offset_of(last + 1)));
    }
    let at = offset_of(last);
    let mut header = [0u8; HEADER_BYTES];
    segment
        .file
        .read_exact_at(&mut header, at)
        .map_err(|e| read_error(segment, at, e))?;
    let len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
    if len == 0 || len > limits::RECORD_BYTES_MAX {
        return Err(corrupted(
            segment,
            at,
            format!("record length {len} on re-read"),
        ));
    }
    Ok((start, at + (HEADER_BYTES as u64) + u64::from(len)))
}

impl SegmentIndex {
    /// The first stretch of `first..=last` worth reading for `part`: from its first event
    /// there to the last one before a gap of [`GAP_BYTES`] or more of other runs' records,
    /// at most [`CHUNK_EVENTS`] events. `None` when `part` has no event there.
    fn span(&self, part: Part, (first, last): (usize, usize)) -> Option<(usize, usize)> {
        let holds = |p: usize| part.holds(self.slots[p]);
        let offset = |p: usize| u64::from(self.offsets[p]);
        let start = (first..=last).find(|&p| holds(p))?;
        let mut end = start;
        for p in start + 1..=last.min(start + CHUNK_EVENTS as usize - 1) {
            if offset(p) - offset(end + 1) >= GAP_BYTES {
                break;
            }
            if holds(p) {
                end = p;
            }
        }
        Some((start, end))
    }
}

impl Chunk<'_> {
    /// Hands the events of `part` to `visit`, borrowed, checking the CRC of each of their
    /// records and of the commit records that follow them, and that each record holds the
    /// event the index places there. Other runs' records are stepped over by the index.
    pub fn scan(&self, part: Part, visit: &mut dyn FnMut(&EventRef<'_>)) -> Result<(), StoreError> {
        let segment = self.segment;
        // Where the last record checked ends; `None` after another run's event.
        let mut checked = None;
        for p in self.first..=self.last {
            let event_at = (u64::from(segment.offsets[p]) - self.start) as usize;
            self.batch_ends(checked, event_at)?;
            checked = if part.holds(segment.slots[p]) {
                Some(self.event(segment.id_at(p), event_at, visit)?)
            } else {
                None
            };
        }
        self.batch_ends(checked, self.bytes.len())
    }

    /// Checks the records from `checked` (where the last event checked ends) to `until`:
    /// the commit record that follows it, if its group ends there.
    fn batch_ends(&self, checked: Option<usize>, until: usize) -> Result<(), StoreError> {
        let Some(mut at) = checked else {
            return Ok(());
        };
        while at < until {
            at = match parse(self.bytes, at) {
                Parsed::Record { kind, next, .. } if kind != KIND_EVENT && next <= until => next,
                _ => return Err(self.damaged(at)),
            };
        }
        Ok(())
    }

    /// Checks the event record `id` at `at` and hands the event to `visit`; returns where the
    /// record ends.
    fn event(
        &self,
        id: u64,
        at: usize,
        visit: &mut dyn FnMut(&EventRef<'_>),
    ) -> Result<usize, StoreError> {
        let Parsed::Record {
            kind: KIND_EVENT,
            body,
            next,
        } = parse(self.bytes, at)
        else {
            return Err(self.damaged(at));
        };
        let here = self.start + at as u64;
        let event = decode_event(body).map_err(|e| corrupted(self.segment, here, e))?;
        if event.event_id != EventId(id) {
            let reason = format!(
                "record holds event {} where {id} was expected on re-read",
                event.event_id
            );
            return Err(corrupted(self.segment, here, reason));
        }
        visit(&event);
        Ok(next)
    }

    fn damaged(&self, at: usize) -> StoreError {
        let here = self.start + at as u64;
        corrupted(self.segment, here, "record damaged since open".into())
    }
}

fn corrupted(segment: &SegmentIndex, offset: u64, reason: String) -> StoreError {
    StoreError::Corrupted {
        file: segment.name.clone(),
        offset,
        reason,
    }
}

pub(crate) fn read_error(segment: &SegmentIndex, offset: u64, e: std::io::Error) -> StoreError {
    // A compressed block that does not decompress (cold/) is damage, not an IO failure.
    if e.kind() == std::io::ErrorKind::InvalidData {
        return corrupted(segment, offset, e.to_string());
    }
    StoreError::io(format!("reading {} at offset {offset}", segment.name), e)
}
