//! Daylight saving in Europe/Paris and America/New_York, 2026: a fixed local time in the
//! gap fires once at the first instant after it; one in the repeated hour fires once, at
//! its first occurrence; an interval pattern fires at each wall-clock time that exists.

use apollo11_schedule::Cron;
use chrono::{TimeZone, Utc};

fn ms(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> u64 {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
        .unwrap()
        .timestamp_millis() as u64
}

/// The fire times of `cron` in `zone` from `from` (UTC), as UTC texts.
fn fires(cron: &str, zone: &str, from: u64, n: usize) -> Vec<String> {
    let cron = Cron::parse(cron, zone).unwrap();
    cron.fires_between(from, u64::MAX, n)
        .iter()
        .map(|f| f.utc_text())
        .collect()
}

#[test]
fn paris_spring_forward_fires_a_missing_time_once_after_the_gap() {
    // 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    let got = fires("30 2 * * *", "Europe/Paris", ms(2026, 3, 27, 12, 0), 3);
    assert_eq!(
        got,
        [
            "2026-03-28T01:30:00Z", // 02:30 CET
            "2026-03-29T01:00:00Z", // 03:00 CEST, the first instant after the gap
            "2026-03-30T00:30:00Z", // 02:30 CEST
        ]
    );
}

#[test]
fn paris_fall_back_fires_a_repeated_time_once_at_its_first_occurrence() {
    // 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    let got = fires("30 2 * * *", "Europe/Paris", ms(2026, 10, 24, 12, 0), 2);
    assert_eq!(got, ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]);
}

#[test]
fn paris_interval_patterns_follow_the_wall_clock_through_both_transitions() {
    let spring = fires("0,30 * * * *", "Europe/Paris", ms(2026, 3, 29, 0, 15), 3);
    // 01:30 CET, then 03:00 CEST: the gap's 02:00 and 02:30 do not exist.
    assert_eq!(
        spring,
        [
            "2026-03-29T00:30:00Z",
            "2026-03-29T01:00:00Z",
            "2026-03-29T01:30:00Z"
        ]
    );
    let fall = fires("0,30 * * * *", "Europe/Paris", ms(2026, 10, 24, 23, 45), 4);
    // 02:00 and 02:30 CEST, then 02:00 and 02:30 CET: both passes of the repeated hour.
    assert_eq!(
        fall,
        [
            "2026-10-25T00:00:00Z",
            "2026-10-25T00:30:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T01:30:00Z",
        ]
    );
}

#[test]
fn new_york_spring_forward_and_fall_back() {
    // 2026-03-08: 02:00 EST jumps to 03:00 EDT.
    let spring = fires("30 2 * * *", "America/New_York", ms(2026, 3, 6, 12, 0), 3);
    assert_eq!(
        spring,
        [
            "2026-03-07T07:30:00Z", // 02:30 EST
            "2026-03-08T07:00:00Z", // 03:00 EDT
            "2026-03-09T06:30:00Z", // 02:30 EDT
        ]
    );
    // 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
    let fall = fires("30 1 * * *", "America/New_York", ms(2026, 10, 31, 12, 0), 2);
    assert_eq!(fall, ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]);
}

#[test]
fn local_texts_carry_the_offset_in_force() {
    let cron = Cron::parse("0 3 * * *", "Europe/Paris").unwrap();
    let winter = cron.next_after(ms(2026, 12, 5, 12, 0)).unwrap();
    assert_eq!(winter.local_text(), "2026-12-06T03:00:00+01:00");
    assert_eq!(winter.stamp(), "20261206T020000Z");
    assert_eq!(cron.at_stamp(&winter.stamp()), Some(winter));
    assert_eq!(cron.at_stamp("2026-12-06"), None);
    assert_eq!(
        (winter.date(), winter.time()),
        ("2026-12-06".into(), "03:00:00".into())
    );
    let summer = cron.next_after(ms(2026, 7, 1, 12, 0)).unwrap();
    assert_eq!(summer.local_text(), "2026-07-02T03:00:00+02:00");
}

#[test]
fn a_daily_schedule_catches_up_days_of_downtime_across_a_transition() {
    use apollo11_schedule::CatchUp;
    let cron = Cron::parse("30 2 * * *", "Europe/Paris").unwrap();
    // Last fired 2026-03-27 02:30 CET; the server comes back 2026-03-30 12:00 UTC.
    let (last, now) = (ms(2026, 3, 27, 1, 30), ms(2026, 3, 30, 12, 0));
    let all = CatchUp::All { max: 100 }.due(&cron, last, now);
    let texts: Vec<String> = all.fire.iter().map(|f| f.local_text()).collect();
    assert_eq!(
        texts,
        [
            "2026-03-28T02:30:00+01:00",
            "2026-03-29T03:00:00+02:00", // the gap's 02:30, once, after it
            "2026-03-30T02:30:00+02:00",
        ]
    );
    let latest = CatchUp::Latest.due(&cron, last, now);
    assert_eq!((latest.fire, latest.missed), (vec![all.fire[2]], 2));
    let none = CatchUp::None.due(&cron, last, now);
    assert_eq!((none.fire.len(), none.missed), (0, 3));
}
