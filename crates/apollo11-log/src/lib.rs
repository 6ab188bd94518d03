#![doc = include_str!("../README.md")]
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod access;
pub mod archive;
mod cold;
mod controls;
#[cfg(test)]
mod damage;
mod durable_files;
mod file_log;
mod file_system;
mod format;
mod gc;
mod holder;
mod load;
pub mod metrics;
mod missing;
mod open;
mod options;
mod repair;
mod run_index;
mod scan;
#[cfg(feature = "testing")]
mod sim;
mod snapshot;
mod verify;
mod write;

// What this crate's API takes and returns from the crates below it: the store traits its
// methods come from and the types they name, so a user of the log needs no other dependency.
/// The tokio the log runs on: its async calls need a tokio runtime (reads, snapshots and
/// blobs work on its blocking pool), which a user without tokio of its own builds from here
/// (`tokio::runtime::Builder::new_current_thread().enable_all().build()`).
pub use tokio;

pub use apollo11_core::{
    BlobRef, Event, EventId, EventKind, EventRef, Payload, RunId, Seq, StepName,
};
pub use apollo11_store::{
    BlobStore, Change, EventStore, NewEvent, RunFeed, RunSummary, Snapshot, SnapshotStore,
    StoreError, Subscription, Visitor,
};
/// A segment's bytes as the cold (compressed) segment file `compact` writes, for tests and
/// fuzzing that build data dirs by hand.
#[cfg(feature = "testing")]
pub use cold::encode as encode_cold_segment;
pub use cold::Compressed;
pub use file_log::FileLog;
pub use file_system::{Fs, FsFile, FsLock, Mode, RealFs};
pub use gc::Collected;
pub use holder::LockHolder;
pub use load::Damage;
pub use open::{Recovery, TornTail};
pub use options::{Durability, Options};
pub use repair::{
    plan_repair, plan_repair_with, repair, repair_with, RepairPlan, RepairReport, SegmentCut,
    SetAside,
};
#[cfg(feature = "testing")]
pub use sim::{Fault, SimFs, STALL_MS_MAX};
pub use verify::{
    verify, verify_with, BlobReport, BlobUse, SegmentReport, SnapshotReport, VerifyReport,
};
pub use write::WriteError;
