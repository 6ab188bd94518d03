//! Parsing, next fire times, catch-up, jitter and templates.

use apollo11_schedule::template::{self, Values};
use apollo11_schedule::{jitter_ms, CatchUp, Cron, CronError};

const T0: u64 = 1_796_000_000_000; // a whole second, 2026-11-30T...Z

#[test]
fn five_and_six_fields_and_aliases_parse_others_are_refused() {
    for ok in ["0 3 * * *", "*/5 0 3 * * *", "@daily", "0 9 * * MON-FRI"] {
        Cron::parse(ok, "UTC").unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for bad in ["0 3 * *", "0 0 3 * * * 2026", "61 * * * *", "x * * * *", ""] {
        assert!(
            matches!(Cron::parse(bad, "UTC"), Err(CronError::Expression(_))),
            "{bad}"
        );
    }
    assert_eq!(
        Cron::parse("0 3 * * *", "Mars/Olympus").unwrap_err(),
        CronError::Zone("Mars/Olympus".into())
    );
}

#[test]
fn next_fire_is_strictly_after_and_on_whole_seconds() {
    let every_second = Cron::parse("* * * * * *", "UTC").unwrap();
    assert_eq!(every_second.next_after(T0).unwrap().ms, T0 + 1_000);
    assert_eq!(every_second.next_after(T0 + 400).unwrap().ms, T0 + 1_000);
    assert_eq!(every_second.next_after(T0 - 400).unwrap().ms, T0);
    assert_eq!(every_second.latest_at_or_before(T0 + 999).unwrap().ms, T0);
    let got = every_second.fires_between(T0, T0 + 3_500, 10);
    let ms: Vec<u64> = got.iter().map(|f| f.ms).collect();
    assert_eq!(ms, [T0 + 1_000, T0 + 2_000, T0 + 3_000]);
}

#[test]
fn catch_up_starts_none_the_latest_or_all_capped() {
    let cron = Cron::parse("* * * * * *", "UTC").unwrap();
    let now = T0 + 5_500; // five fires missed: T0+1 s .. T0+5 s
    let none = CatchUp::None.due(&cron, T0, now);
    assert_eq!((none.fire.len(), none.missed), (0, 5));
    let latest = CatchUp::Latest.due(&cron, T0, now);
    assert_eq!(
        latest.fire.iter().map(|f| f.ms).collect::<Vec<_>>(),
        [T0 + 5_000]
    );
    assert_eq!(latest.missed, 4);
    let all = CatchUp::All { max: 100 }.due(&cron, T0, now);
    let starts: Vec<u64> = all.fire.iter().map(|f| f.ms).collect();
    assert_eq!(starts, (1..=5).map(|s| T0 + s * 1_000).collect::<Vec<_>>());
    assert_eq!(all.missed, 0);
    let capped = CatchUp::All { max: 2 }.due(&cron, T0, now);
    let starts: Vec<u64> = capped.fire.iter().map(|f| f.ms).collect();
    assert_eq!((starts, capped.missed), (vec![T0 + 4_000, T0 + 5_000], 3));
    assert!(CatchUp::All { max: 9 }.due(&cron, now, now).fire.is_empty());
}

#[test]
fn jitter_is_stable_and_bounded() {
    assert_eq!(jitter_ms("wf/daily/1", 0), 0);
    let a = jitter_ms("wf/daily/20261206T030000Z", 30_000);
    assert_eq!(a, jitter_ms("wf/daily/20261206T030000Z", 30_000));
    assert!(a < 30_000);
    let spread: std::collections::BTreeSet<u64> = (0..50)
        .map(|i| jitter_ms(&format!("wf/daily/{i}"), 30_000))
        .collect();
    assert!(spread.len() > 40, "{spread:?}");
}

#[test]
fn templates_render_the_fire_time_and_refuse_other_names_where_written() {
    let cron = Cron::parse("0 3 * * *", "Europe/Paris").unwrap();
    let fire = cron.next_after(T0).unwrap();
    let previous = cron.latest_at_or_before(fire.ms - 1).unwrap();
    let values = Values {
        name: "daily",
        fire,
        previous,
    };
    let text = "day=${schedule.date} at ${ schedule.time } from ${schedule.interval_start}";
    template::check(text).unwrap();
    assert_eq!(
        template::render(text, &values),
        format!(
            "day={} at 03:00:00 from {}",
            fire.date(),
            previous.local_text()
        )
    );
    assert_eq!(
        template::render("${schedule.fire_time}", &values),
        fire.utc_text()
    );
    let bad = template::check("x ${params.day} y").unwrap_err();
    assert_eq!(bad.offset, 2);
    assert!(bad.message.contains("schedule.date"), "{}", bad.message);
    assert_eq!(template::check("ab ${schedule.date").unwrap_err().offset, 3);
}
