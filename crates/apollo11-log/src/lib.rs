#![doc = include_str!("../README.md")]

mod access;
mod codec;
mod files;
mod fs;
mod idx;
mod index;
mod log;
pub mod metrics;
mod missing;
mod options;
mod record;
mod recover;
mod repair;
mod scan;
mod segment;
#[cfg(feature = "testing")]
mod sim;
mod snapshot;
mod verify;
mod writer;

pub use fs::{Fs, FsFile, FsLock, Mode, RealFs};
pub use log::{FileLog, Recovery, TornTail};
pub use options::{Durability, Options};
pub use recover::Damage;
pub use repair::{
    plan_repair, plan_repair_with, repair, repair_with, RepairPlan, RepairReport, SegmentCut,
};
#[cfg(feature = "testing")]
pub use sim::{Fault, SimFs, STALL_MS_MAX};
pub use verify::{
    verify, verify_with, BlobReport, BlobUse, SegmentReport, SnapshotReport, VerifyReport,
};
