//! Schedules of Apollo-11 workflows, usable alone: a cron expression in a time zone
//! ([`Cron`]), the fire times it gives ([`FireTime`]), which of the fire times missed while
//! nothing fired a restart starts ([`CatchUp`]), what a run's parameters may read of its
//! fire time ([`template`]), and a fire's jitter. No IO, no clock: times come in as
//! milliseconds since the epoch.
//!
//! Daylight saving follows croner: a fixed local time that does not exist (spring forward)
//! fires once, at the first instant after the gap; a fixed local time that happens twice
//! (fall back) fires once, at its first occurrence; a pattern with `*` or a step in its
//! seconds, minutes or hours fires at each matching wall-clock time that exists, in both
//! passes of a repeated hour.

#![forbid(unsafe_code)]

mod catch_up;
mod cron;
mod fire;
mod overlap;
pub mod template;

pub use catch_up::{jitter_ms, CatchUp, Due, CATCH_UP_MAX_DEFAULT};
pub use cron::{Cron, CronError};
pub use fire::FireTime;
pub use overlap::Overlap;
pub use template::{TemplateError, Values};
