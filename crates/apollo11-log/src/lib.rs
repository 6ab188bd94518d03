#![doc = include_str!("../README.md")]

mod codec;
mod files;
mod fs;
mod idx;
mod index;
mod log;
mod options;
mod record;
mod recover;
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
#[cfg(feature = "testing")]
pub use sim::{Fault, SimFs};
pub use verify::{
    repair, repair_with, verify, verify_with, RepairReport, SegmentReport, SnapshotReport,
    VerifyReport,
};
