//! A fire time: an instant, and how it reads in its schedule's zone.

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;

/// One fire time of a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FireTime {
    /// Milliseconds since the epoch.
    pub ms: u64,
    zone: Tz,
}

impl FireTime {
    pub(crate) fn new(ms: u64, zone: Tz) -> FireTime {
        FireTime { ms, zone }
    }

    /// In UTC, compact, sortable, valid in a run id: `20261206T030000Z`.
    pub fn stamp(&self) -> String {
        self.utc().format("%Y%m%dT%H%M%SZ").to_string()
    }

    /// In UTC, RFC 3339: `2026-12-06T03:00:00Z`.
    pub fn utc_text(&self) -> String {
        self.utc().format("%Y-%m-%dT%H:%M:%SZ").to_string()
    }

    /// In the schedule's zone, RFC 3339 with its offset: `2026-12-06T04:00:00+01:00`.
    pub fn local_text(&self) -> String {
        self.local().format("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }

    /// The local date: `2026-12-06`.
    pub fn date(&self) -> String {
        self.local().format("%Y-%m-%d").to_string()
    }

    /// The local time of day: `04:00:00`.
    pub fn time(&self) -> String {
        self.local().format("%H:%M:%S").to_string()
    }

    /// The instant in UTC.
    pub fn utc(&self) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(self.ms as i64)
            .single()
            .unwrap_or_default()
    }

    fn local(&self) -> DateTime<Tz> {
        self.utc().with_timezone(&self.zone)
    }
}
