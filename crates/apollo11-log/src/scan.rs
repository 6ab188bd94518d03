//! Reading events back in id order, borrowed from the bytes read: chunks of one segment read
//! at once, every record's CRC checked, events decoded in place. A scan for a fold of every
//! run splits the runs between threads.

use crate::codec::decode_event;
use crate::index::{Index, SegmentIndex};
use crate::record::{parse, peek, Parsed, HEADER_BYTES, KIND_EVENT};
use apollo11_core::{limits, EventId, EventRef};
use apollo11_store::StoreError;

/// A scan reads at most this many events' records at once.
const CHUNK_EVENTS: u64 = 1_024;

/// The runs whose events a scan hands on: those whose run slot is `index` modulo `of`.
#[derive(Clone, Copy)]
pub struct Part {
    index: u32,
    of: u32,
}

impl Part {
    /// Every run.
    pub const ALL: Part = Part { index: 0, of: 1 };

    /// Whether this part checks (and, for an event, decodes) a record of `kind`, given the
    /// run slot of the next event: every record is checked by exactly one part, records that
    /// are not events by the first.
    fn checks(self, kind: u8, slot: u32) -> bool {
        if kind == KIND_EVENT {
            slot % self.of == self.index
        } else {
            self.index == 0
        }
    }
}

/// The records of events `first..=last` of one segment, read at once.
pub struct Chunk<'a> {
    segment: &'a SegmentIndex,
    first: u64,
    last: u64,
    /// Offset of `bytes` in the segment file.
    start: u64,
    bytes: &'a [u8],
}

impl Index {
    /// Reads the records of events `first..=last` of one segment into `buf`.
    pub fn chunk<'a>(
        &self,
        segment: &'a SegmentIndex,
        (first, last): (u64, u64),
        buf: &'a mut Vec<u8>,
    ) -> Result<Chunk<'a>, StoreError> {
        let offset_of = |id: u64| u64::from(segment.offsets[(id - segment.base) as usize]);
        let start = offset_of(first);
        let end = if last + 1 - segment.base < segment.offsets.len() as u64 {
            offset_of(last + 1)
        } else {
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
            at + (HEADER_BYTES as u64) + u64::from(len)
        };
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
        let first = from.0.max(1);
        let last = self
            .last_event_id
            .min(first.saturating_add(u64::from(max)).saturating_sub(1));
        self.chunks((first, last), &mut |chunk| chunk.scan(Part::ALL, visit))?;
        Ok((first <= last).then_some(EventId(last)))
    }

    /// Hands every event to one of `visitors`, each called on a thread of its own: all the
    /// events of a run go to the same visitor, in id order. Each thread reads the whole log
    /// and checks and decodes only its own runs' records (the first thread also every record
    /// that is not an event), so every record is checked once.
    pub fn scan_runs<V>(&self, visitors: &mut [V]) -> Result<(), StoreError>
    where
        V: FnMut(&EventRef<'_>) + Send,
    {
        let of = visitors.len() as u32;
        let range = (1, self.last_event_id);
        std::thread::scope(|scope| {
            let threads: Vec<_> = (0..of)
                .zip(visitors)
                .map(|(index, visit)| {
                    let part = Part { index, of };
                    scope.spawn(move || self.chunks(range, &mut |c| c.scan(part, visit)))
                })
                .collect();
            threads
                .into_iter()
                .try_for_each(|t| t.join().expect("a scan thread panicked"))
        })
    }

    /// Reads events `first..=last` chunk by chunk (one segment, at most [`CHUNK_EVENTS`]),
    /// into one buffer, handing each chunk to `each`.
    fn chunks(
        &self,
        (first, last): (u64, u64),
        each: &mut dyn FnMut(Chunk<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut buf = Vec::new();
        let mut id = first;
        while id <= last {
            let segment = self.segment_of(id)?;
            let segment_last = segment.base + segment.offsets.len() as u64 - 1;
            let chunk_last = segment_last.min(last).min(id + CHUNK_EVENTS - 1);
            each(self.chunk(segment, (id, chunk_last), &mut buf)?)?;
            id = chunk_last + 1;
        }
        Ok(())
    }
}

impl Chunk<'_> {
    /// Hands the events of `part` to `visit`, borrowed, checking the CRC of every record
    /// `part` checks and that the records hold exactly the events of the chunk.
    pub fn scan(&self, part: Part, visit: &mut dyn FnMut(&EventRef<'_>)) -> Result<(), StoreError> {
        let segment = self.segment;
        let mut at = 0;
        let mut next_id = self.first;
        while next_id <= self.last {
            let slot = segment.slots[(next_id - segment.base) as usize];
            if let Some((kind, next)) = peek(self.bytes, at).filter(|&(k, _)| !part.checks(k, slot))
            {
                next_id += u64::from(kind == KIND_EVENT);
                at = next;
                continue;
            }
            let here = self.start + at as u64;
            match parse(self.bytes, at) {
                Parsed::Record {
                    kind: KIND_EVENT,
                    body,
                    next,
                } => {
                    let event = decode_event(body).map_err(|e| corrupted(segment, here, e))?;
                    if event.event_id != EventId(next_id) {
                        let reason = format!(
                            "record holds event {} where {next_id} was expected on re-read",
                            event.event_id
                        );
                        return Err(corrupted(segment, here, reason));
                    }
                    visit(&event);
                    next_id += 1;
                    at = next;
                }
                Parsed::Record { next, .. } => at = next,
                Parsed::End | Parsed::Invalid(_) => {
                    return Err(corrupted(segment, here, "record damaged since open".into()))
                }
            }
        }
        Ok(())
    }
}

fn corrupted(segment: &SegmentIndex, offset: u64, reason: String) -> StoreError {
    StoreError::Corrupted {
        file: segment.name.clone(),
        offset,
        reason,
    }
}

fn read_error(segment: &SegmentIndex, offset: u64, e: std::io::Error) -> StoreError {
    StoreError::io(format!("reading {} at offset {offset}", segment.name), e)
}
