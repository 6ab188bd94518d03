//! Event payloads: small ones inline, large ones by reference to a content-addressed blob.

use serde::{Deserialize, Serialize};

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
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
}
