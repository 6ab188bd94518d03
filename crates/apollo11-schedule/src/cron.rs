//! A cron expression in a time zone, and the fire times it gives.

use crate::fire::FireTime;
use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};

/// A cron expression (5 fields, or 6 with seconds first, or an alias such as `@daily`)
/// read in an IANA time zone.
#[derive(Clone, Debug)]
pub struct Cron {
    cron: croner::Cron,
    zone: Tz,
}

/// What is wrong with a schedule's expression or zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CronError {
    /// The expression is refused; the message says why.
    Expression(String),
    /// The zone is not a name of the IANA time zone database.
    Zone(String),
}

impl std::fmt::Display for CronError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CronError::Expression(m) => write!(f, "{m}"),
            CronError::Zone(zone) => write!(
                f,
                "zone `{zone}` is not an IANA time zone name (such as `UTC` or `Europe/Paris`)"
            ),
        }
    }
}

impl std::error::Error for CronError {}

impl Cron {
    /// Reads `expression` in `zone`.
    ///
    /// # Errors
    ///
    /// An expression of another number of fields than 5 or 6 (an alias aside), or one croner
    /// refuses; a zone the database does not name.
    pub fn parse(expression: &str, zone: &str) -> Result<Cron, CronError> {
        let zone: Tz = zone.parse().map_err(|_| CronError::Zone(zone.to_owned()))?;
        let text = expression.trim();
        let fields = text.split_whitespace().count();
        if !text.starts_with('@') && !(5..=6).contains(&fields) {
            return Err(CronError::Expression(format!(
                "cron `{text}` has {fields} fields; expected 5 (minute hour day month weekday) \
                 or 6 (with seconds first)"
            )));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(text)
            .map_err(|e| CronError::Expression(format!("cron `{text}`: {e}")))?;
        Ok(Cron { cron, zone })
    }

    /// The zone's name.
    pub fn zone(&self) -> &str {
        self.zone.name()
    }

    /// The first fire time strictly after `after_ms` (none past the year 5000).
    pub fn next_after(&self, after_ms: u64) -> Option<FireTime> {
        let after = self.at(after_ms)?;
        let next = self.cron.find_next_occurrence(&after, false).ok()?;
        Some(self.fire(&next))
    }

    /// The last fire time at or before `ms`, if any.
    pub fn latest_at_or_before(&self, ms: u64) -> Option<FireTime> {
        let at = self.at(ms)?;
        let previous = self.cron.find_previous_occurrence(&at, true).ok()?;
        Some(self.fire(&previous))
    }

    /// The fire times strictly after `after_ms` and at or before `up_to_ms`, in order, at
    /// most `max` of them.
    pub fn fires_between(&self, after_ms: u64, up_to_ms: u64, max: usize) -> Vec<FireTime> {
        let mut fires = Vec::new();
        let mut cursor = after_ms;
        while fires.len() < max {
            match self.next_after(cursor) {
                Some(fire) if fire.ms <= up_to_ms => {
                    cursor = fire.ms;
                    fires.push(fire);
                }
                _ => break,
            }
        }
        fires
    }

    /// The fire time a [`FireTime::stamp`] names (`20261206T030000Z`), whether or not this
    /// expression gives it.
    pub fn at_stamp(&self, stamp: &str) -> Option<FireTime> {
        let utc = chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%SZ").ok()?;
        let ms = u64::try_from(utc.and_utc().timestamp_millis()).ok()?;
        Some(FireTime::new(ms, self.zone))
    }

    /// `ms` in the zone; none out of chrono's range.
    fn at(&self, ms: u64) -> Option<DateTime<Tz>> {
        let utc = Utc.timestamp_millis_opt(i64::try_from(ms).ok()?).single()?;
        Some(utc.with_timezone(&self.zone))
    }

    fn fire(&self, at: &DateTime<Tz>) -> FireTime {
        FireTime::new(at.timestamp_millis().max(0) as u64, self.zone)
    }
}
