//! Event payloads: small ones inline, large ones by reference to a content-addressed blob.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Reference to a blob held by a blob store, addressed by the SHA-256 of its bytes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BlobRef {
    /// Lower-case hex SHA-256 of the blob's bytes.
    pub sha256: String,
    /// Length of the blob in bytes.
    pub bytes: u64,
}

/// What an event carries besides its kind. Nothing is ever truncated: a payload over the
/// inline limit is moved to the blob store and replaced by its [`BlobRef`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(from = "Wire")]
pub enum Payload {
    /// No payload.
    #[default]
    Empty,
    /// Bytes kept inside the event (at most `limits::PAYLOAD_INLINE_BYTES_MAX` by default).
    Inline(Vec<u8>),
    /// Bytes kept in the blob store.
    Blob(BlobRef),
}

impl Payload {
    /// Builds an inline payload, or `Empty` for no bytes.
    pub fn inline(bytes: impl Into<Vec<u8>>) -> Payload {
        let bytes = bytes.into();
        if bytes.is_empty() {
            Payload::Empty
        } else {
            Payload::Inline(bytes)
        }
    }

    /// True when there is no payload.
    pub fn is_empty(&self) -> bool {
        matches!(self, Payload::Empty)
    }

    /// The inline bytes, if the payload is inline.
    pub fn inline_bytes(&self) -> Option<&[u8]> {
        match self {
            Payload::Inline(b) => Some(b),
            Payload::Empty | Payload::Blob(_) => None,
        }
    }

    /// The payload, borrowed.
    pub fn view(&self) -> PayloadRef<'_> {
        match self {
            Payload::Empty => PayloadRef::Empty,
            Payload::Inline(b) => PayloadRef::Inline(b),
            Payload::Blob(b) => PayloadRef::Blob(b.clone()),
        }
    }
}

/// A payload borrowed from the bytes it was decoded from: it decodes from the encoding of a
/// [`Payload`] without copying inline bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PayloadRef<'a> {
    /// No payload.
    #[default]
    Empty,
    /// Inline bytes.
    Inline(&'a [u8]),
    /// Bytes kept in the blob store.
    Blob(BlobRef),
}

impl PayloadRef<'_> {
    /// True when there is no payload.
    pub fn is_empty(&self) -> bool {
        matches!(self, PayloadRef::Empty)
    }

    /// The payload, owned.
    pub fn to_payload(&self) -> Payload {
        match self {
            PayloadRef::Empty => Payload::Empty,
            PayloadRef::Inline(b) => Payload::Inline(b.to_vec()),
            PayloadRef::Blob(b) => Payload::Blob(b.clone()),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for PayloadRef<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match WireRef::deserialize(d)? {
            WireRef::Empty => PayloadRef::Empty,
            WireRef::Text(bytes) | WireRef::Bytes(bytes) => PayloadRef::Inline(bytes),
            WireRef::Blob(b) => PayloadRef::Blob(b),
        })
    }
}

/// How a payload is written: inline bytes that are UTF-8 as text, so logs and golden files
/// stay readable; anything else as bytes. Both read back to the same `Payload::Inline`.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum WireOut<'a> {
    Empty,
    Text(&'a str),
    Bytes(&'a [u8]),
    Blob(&'a BlobRef),
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Payload::Empty => WireOut::Empty,
            Payload::Inline(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => WireOut::Text(text),
                Err(_) => WireOut::Bytes(bytes),
            },
            Payload::Blob(b) => WireOut::Blob(b),
        }
        .serialize(s)
    }
}

/// [`WireOut`], read back owned.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Wire {
    Empty,
    Text(String),
    Bytes(Vec<u8>),
    Blob(BlobRef),
}

/// [`WireOut`], read back borrowed: the same variants in the same order. Text is read as the
/// bytes it is encoded as (a string and a byte sequence encode alike), without checking it is
/// UTF-8: an inline payload is bytes either way.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum WireRef<'a> {
    Empty,
    Text(&'a [u8]),
    Bytes(&'a [u8]),
    Blob(BlobRef),
}

impl From<Wire> for Payload {
    fn from(w: Wire) -> Payload {
        match w {
            Wire::Empty => Payload::Empty,
            Wire::Text(text) => Payload::Inline(text.into_bytes()),
            Wire::Bytes(bytes) => Payload::Inline(bytes),
            Wire::Blob(b) => Payload::Blob(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_text_stays_readable() {
        let cases = [
            (Payload::Empty, r#""empty""#),
            (Payload::inline("rows=10"), r#"{"text":"rows=10"}"#),
            (Payload::Inline(vec![0xff, 0]), r#"{"bytes":[255,0]}"#),
            (Payload::Inline(Vec::new()), r#"{"text":""}"#),
        ];
        for (payload, json) in cases {
            assert_eq!(serde_json::to_string(&payload).unwrap(), json);
            assert_eq!(serde_json::from_str::<Payload>(json).unwrap(), payload);
        }
        let blob = Payload::Blob(BlobRef {
            sha256: "ab".into(),
            bytes: 9,
        });
        let json = serde_json::to_string(&blob).unwrap();
        assert_eq!(serde_json::from_str::<Payload>(&json).unwrap(), blob);
    }
}
