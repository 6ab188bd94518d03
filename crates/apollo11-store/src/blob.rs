//! Moving payloads over the inline limit to a blob store and back. Nothing is truncated:
//! the event keeps `{sha256, bytes}` and the blob store keeps the bytes.

use crate::{BlobStore, StoreError};
use apollo11_core::{BlobRef, Payload};
use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Returns `payload` unchanged if it is at most `inline_max` bytes, else stores its bytes in
/// `blobs` and returns the reference.
///
/// # Errors
///
/// What `blobs.put_blob` returns when it cannot store the bytes.
pub async fn offload(
    blobs: &dyn BlobStore,
    payload: Payload,
    inline_max: u32,
) -> Result<Payload, StoreError> {
    match payload {
        Payload::Inline(bytes) if bytes.len() > inline_max as usize => {
            Ok(Payload::Blob(blobs.put_blob(bytes).await?))
        }
        other => Ok(other),
    }
}

/// The bytes a payload stands for, fetched from `blobs` when it is a reference.
///
/// # Errors
///
/// What `blobs.get_blob` returns for a reference: the blob is missing, damaged or unreadable.
pub async fn resolve(blobs: &dyn BlobStore, payload: &Payload) -> Result<Vec<u8>, StoreError> {
    match payload {
        Payload::Empty => Ok(Vec::new()),
        Payload::Inline(bytes) => Ok(bytes.clone()),
        Payload::Blob(blob) => blobs.get_blob(blob).await,
    }
}

/// Checks fetched blob bytes against their reference.
///
/// # Errors
///
/// [`StoreError::Corrupted`], naming `origin`, when the bytes' length or SHA-256 differ from
/// the reference's.
pub fn check_blob(blob: &BlobRef, bytes: &[u8], origin: &str) -> Result<(), StoreError> {
    let actual = sha256_hex(bytes);
    if actual != blob.sha256 || bytes.len() as u64 != blob.bytes {
        return Err(StoreError::Corrupted {
            file: origin.to_owned(),
            offset: 0,
            reason: format!(
                "blob holds {} bytes hashing to {actual}, expected {} bytes hashing to {}",
                bytes.len(),
                blob.bytes,
                blob.sha256
            ),
        });
    }
    Ok(())
}
