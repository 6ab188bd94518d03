//! Fire times, daylight saving in two zones, catch-up, templates.

mod dst;
mod fires;
