//! The only place of the log that knows bincode: the event codec of the store crate (shared
//! with run bundles), and the head of an event that opening a log reads. The segment header
//! carries a format version, so this codec can be replaced without breaking old logs.

use apollo11_store::codec::config;
pub use apollo11_store::codec::{decode_event, encode_event};
use serde::Deserialize;

/// The first fields of an encoded event: all that opening a log needs to index it.
#[derive(Deserialize)]
pub struct Head<'a> {
    /// The event's id.
    pub event_id: u64,
    /// Its run, borrowed from the record.
    #[serde(borrow)]
    pub run_id: &'a str,
    /// Its seq.
    pub seq: u32,
}

/// Decodes only the head of an encoded event (the fields `Event` starts with), borrowing the
/// run id: opening a log allocates nothing per event.
pub fn decode_head(bytes: &[u8]) -> Result<Head<'_>, String> {
    bincode::serde::borrow_decode_from_slice(bytes, config())
        .map(|(head, _)| head)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo11_core::strategies::arb_event_kind;
    use apollo11_core::{BlobRef, Event, EventId, Payload, RunId, Seq, StepName};
    use proptest::prelude::*;

    fn arb_payload() -> impl Strategy<Value = Payload> {
        prop_oneof![
            Just(Payload::Empty),
            ".{0,40}".prop_map(Payload::inline),
            proptest::collection::vec(any::<u8>(), 1..40).prop_map(Payload::Inline),
            ("[0-9a-f]{64}", any::<u64>())
                .prop_map(|(sha256, bytes)| Payload::Blob(BlobRef { sha256, bytes })),
        ]
    }

    fn arb_event() -> impl Strategy<Value = Event> {
        let ids = (any::<u64>(), any::<u32>(), any::<u32>(), any::<u64>());
        let text = (".{0,12}", proptest::option::of(".{0,12}"), ".{0,12}");
        (ids, text, arb_event_kind(), arb_payload()).prop_map(
            |((id, seq, attempt, at_ms), (run, step, instance), kind, payload)| Event {
                event_id: EventId(id),
                run_id: RunId(run),
                seq: Seq(seq),
                step: step.map(StepName),
                kind,
                attempt,
                at_ms,
                instance,
                payload,
            },
        )
    }

    proptest! {
        /// The borrowed decoding reads exactly what the owned encoding wrote, so reads and
        /// folds may borrow from the record bytes.
        #[test]
        fn borrowed_decoding_reads_back_every_event(event in arb_event()) {
            let mut bytes = Vec::new();
            encode_event(&event, &mut bytes).unwrap();
            let decoded = decode_event(&bytes).unwrap();
            prop_assert_eq!(&decoded, &event.view());
            prop_assert_eq!(decoded.to_event(), event);
        }
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let event = Event {
            event_id: EventId(1),
            run_id: RunId("r".into()),
            seq: Seq(1),
            step: None,
            kind: apollo11_core::EventKind::Started,
            attempt: 1,
            at_ms: 0,
            instance: "i".into(),
            payload: Payload::Empty,
        };
        let mut bytes = Vec::new();
        encode_event(&event, &mut bytes).unwrap();
        bytes.push(0);
        assert_eq!(
            decode_event(&bytes).unwrap_err(),
            "1 trailing bytes after the event"
        );
    }
}
