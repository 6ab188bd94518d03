//! Events to and from rows. An event is one row of `events`; its kind is JSON text (readable
//! with `psql`), its payload inline bytes or a blob's hash and size. Unsigned numbers are
//! stored bit for bit in `bigint`s and read back the same.

use crate::error::corrupted;
use apollo11_core::{BlobRef, Event, EventId, Payload, RunId, Seq, StepName};
use apollo11_store::{NewEvent, StoreError};
use std::collections::BTreeMap;
use tokio_postgres::Row;

/// The columns of `events`, in the order reads select them and inserts fill them.
pub const EVENT_COLUMNS: &str =
    "event_id, run_id, seq, step, kind, attempt, at_ms, instance, payload, blob_sha256, blob_bytes";

/// The events of [`WriteEvents`](crate::sql::WriteEvents)'s columns (`$event_run` to
/// `$blob_bytes`) as a table `u` of the columns of [`EVENT_COLUMNS`] but the id, and each
/// row's position `n` (from 1), from which the statement that inserts them computes its id.
pub const UNNEST_EVENTS: &str = "unnest($event_run::text[], $event_seq::bigint[], \
    $step::text[], $kind::text[], $attempt::bigint[], $at_ms::bigint[], $instance::text[], \
    $payload::bytea[], $blob_sha256::text[], $blob_bytes::bigint[]) \
    WITH ORDINALITY AS u(run_id, seq, step, kind, attempt, at_ms, instance, payload, \
    blob_sha256, blob_bytes, n)";

/// Events as one array per column, for [`UNNEST_EVENTS`].
#[derive(Debug, Default)]
pub struct EventColumns {
    pub runs: Vec<String>,
    pub seqs: Vec<i64>,
    pub steps: Vec<Option<String>>,
    pub kinds: Vec<String>,
    pub attempts: Vec<i64>,
    pub at_ms: Vec<i64>,
    pub instances: Vec<String>,
    pub payloads: Vec<Option<Vec<u8>>>,
    pub blob_hashes: Vec<Option<String>>,
    pub blob_sizes: Vec<Option<i64>>,
}

impl EventColumns {
    /// Adds `event` with its run and seq.
    pub fn push(&mut self, run_id: &RunId, seq: Seq, event: NewEvent) {
        self.runs.push(run_id.as_str().to_owned());
        self.seqs.push(i64::from(seq.0));
        self.steps.push(event.step.map(|s| s.as_str().to_owned()));
        self.kinds.push(kind_json(&event.kind));
        self.attempts.push(i64::from(event.attempt));
        self.at_ms.push(event.at_ms as i64);
        self.instances.push(event.instance);
        let (inline, blob) = match event.payload {
            Payload::Empty => (None, None),
            Payload::Inline(bytes) => (Some(bytes), None),
            Payload::Blob(blob) => (None, Some(blob)),
        };
        self.payloads.push(inline);
        self.blob_sizes.push(blob.as_ref().map(|b| b.bytes as i64));
        self.blob_hashes.push(blob.map(|b| b.sha256));
    }

    /// How many rows there are.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Each run's last seq among the rows and the position (from 1) of its row: `(runs,
    /// seqs, positions)`, for moving the runs on, in the runs' order: every batch that moves
    /// the same runs on names them in the same order.
    pub fn run_ends(&self) -> (Vec<&str>, Vec<i64>, Vec<i64>) {
        let mut ends: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        for (n, (run, seq)) in (1..).zip(self.runs.iter().zip(&self.seqs)) {
            ends.insert(run, (*seq, n));
        }
        let mut runs = Vec::with_capacity(ends.len());
        let (mut seqs, mut positions) = (Vec::new(), Vec::new());
        for (run, (seq, n)) in ends {
            runs.push(run);
            seqs.push(seq);
            positions.push(n);
        }
        (runs, seqs, positions)
    }
}

fn kind_json(kind: &apollo11_core::EventKind) -> String {
    serde_json::to_string(kind).expect("an event kind is plain data and always serializes")
}

/// The event a row of [`EVENT_COLUMNS`] holds.
pub fn event_from_row(row: &Row) -> Result<Event, StoreError> {
    let id: i64 = row.get(0);
    let kind: String = row.get(4);
    let kind = serde_json::from_str(&kind)
        .map_err(|e| corrupted("table events", id, format!("event kind {kind:?}: {e}")))?;
    let columns: (Option<Vec<u8>>, Option<String>, Option<i64>) =
        (row.get(8), row.get(9), row.get(10));
    let payload = match columns {
        (None, None, None) => Payload::Empty,
        (Some(bytes), None, None) => Payload::Inline(bytes),
        (None, Some(sha256), Some(bytes)) => Payload::Blob(BlobRef {
            sha256,
            bytes: bytes as u64,
        }),
        _ => {
            return Err(corrupted(
                "table events",
                id,
                "a payload both inline and a blob",
            ))
        }
    };
    Ok(Event {
        event_id: EventId(id as u64),
        run_id: RunId::from(row.get::<_, &str>(1)),
        seq: Seq(u32::try_from(row.get::<_, i64>(2)).map_err(|e| corrupted("table events", id, e))?),
        step: row.get::<_, Option<&str>>(3).map(StepName::from),
        kind,
        attempt: u32::try_from(row.get::<_, i64>(5))
            .map_err(|e| corrupted("table events", id, e))?,
        at_ms: row.get::<_, i64>(6) as u64,
        instance: row.get(7),
        payload,
    })
}

/// Refuses what PostgreSQL's `text` cannot hold (a NUL byte) before it reaches a batch of
/// other callers' events; names and kinds are checked by `validate` or travel as JSON.
pub fn check_text(events: &[NewEvent]) -> Result<(), StoreError> {
    match events.iter().position(|e| e.instance.contains('\0')) {
        Some(i) => Err(StoreError::Invalid {
            what: "instance name".into(),
            reason: format!("event {} of the append contains a NUL byte", i + 1),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo11_core::EventKind;

    fn event() -> NewEvent {
        NewEvent {
            step: None,
            kind: EventKind::Started,
            attempt: 0,
            at_ms: 0,
            instance: "i".into(),
            payload: Payload::Empty,
        }
    }

    #[test]
    fn run_ends_name_each_run_once_in_order_with_its_last_row() {
        let mut columns = EventColumns::default();
        for (run, seq) in [("b", 4), ("a", 7), ("c", 1), ("b", 5), ("a", 8)] {
            columns.push(&RunId::from(run), Seq(seq), event());
        }
        let (runs, seqs, positions) = columns.run_ends();
        assert_eq!(runs, ["a", "b", "c"]);
        assert_eq!(seqs, [8, 5, 1]);
        assert_eq!(positions, [5, 4, 3]);
    }
}
