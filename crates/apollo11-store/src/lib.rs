#![doc = include_str!("../README.md")]
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

#[cfg(feature = "testing")]
mod acked;
mod archive;
mod blob;
pub mod codec;
#[cfg(feature = "testing")]
pub mod conformance;
mod control;
mod dynamic;
mod error;
pub mod feed;
mod forward;
pub mod frame;
mod lease;
mod mem;
mod traits;
mod validate;

#[cfg(feature = "testing")]
pub use acked::{AckLog, Acked};
pub use archive::Archive;
pub use blob::{check_blob, offload, resolve, sha256_hex};
pub use control::{
    control_conflict, validate_control, Control, ControlStore, Controls, CONTROL_KEY_BYTES_MAX,
    CONTROL_VALUE_BYTES_MAX,
};
pub use dynamic::{DynStore, FullStore};
pub use error::StoreError;
pub use feed::{Change, RunFeed, Subscription};
pub use lease::{
    fair_share, ttl_ms, validate_lease, validate_owner, Clock, Fence, Lease, LeaseStore,
    ManualClock, SystemClock, LEASE_TTL_MAX,
};
pub use mem::{IdGaps, MemStore};
pub use traits::{BlobStore, EventStore, NewEvent, RunSummary, Snapshot, SnapshotStore, Visitor};
pub use validate::{validate, INLINE_PAYLOAD_BYTES_HARD_MAX};
