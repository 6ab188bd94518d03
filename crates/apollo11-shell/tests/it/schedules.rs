//! `[schedules.NAME]`: read, and every bad value located at its line and column.

use apollo11_schedule::{CatchUp, Overlap};
use apollo11_shell::definition::parse_all;
use std::path::Path;

const HEAD: &str = "[workflow]\nname = \"w\"\n[params]\nday = { type = \"string\", required = true }\n\
                    n = { type = \"integer\", default = 1 }\n\
                    [[steps]]\nname = \"s\"\nrun = \"echo ${params.day}\"\nidempotency = \"natural\"\n";

/// Line 10 is the first after `HEAD`.
fn error(body: &str) -> String {
    let e = parse_all(&format!("{HEAD}{body}"), "wf.toml", Path::new("/wf")).unwrap_err();
    format!("{}:{}: {}", e.line, e.column, e.message)
}

#[test]
fn schedules_are_read_with_their_defaults_in_file_order() {
    let text = format!(
        "{HEAD}[schedules.daily]\ncron = \"0 3 * * *\"\nzone = \"Europe/Paris\"\n\
         params = {{ day = \"${{schedule.date}}\", n = \"7\" }}\ncatch_up = \"all\"\n\
         catch_up_max = 5\noverlap = \"queue\"\njitter = \"30s\"\n\
         [schedules.a-fast]\ncron = \"* * * * * *\"\nparams = {{ day = \"x\" }}\nenabled = false\n"
    );
    let definition = parse_all(&text, "wf.toml", Path::new("/wf")).unwrap();
    let [daily, fast] = &definition.schedules[..] else {
        panic!("{:?}", definition.schedules)
    };
    assert_eq!(
        (daily.name.as_str(), daily.cron.zone()),
        ("daily", "Europe/Paris")
    );
    assert_eq!(daily.catch_up, CatchUp::All { max: 5 });
    assert_eq!(
        (daily.overlap, daily.jitter_ms, daily.enabled),
        (Overlap::Queue, 30_000, true)
    );
    let fire = daily.cron.next_after(1_796_000_000_000).unwrap();
    let given = daily.params_at(&definition.spec.params, fire).unwrap();
    assert_eq!(given["day"], serde_json::json!(fire.date()));
    assert_eq!(
        given["n"],
        serde_json::json!(7),
        "read as the parameter's type"
    );
    assert_eq!((fast.name.as_str(), fast.cron.zone()), ("a-fast", "UTC"));
    assert_eq!(
        (fast.catch_up, fast.overlap, fast.enabled),
        (CatchUp::Latest, Overlap::Skip, false)
    );
    assert!(definition
        .spec
        .attributes
        .keys()
        .all(|k| !k.contains("schedule")));
}

#[test]
fn bad_schedules_are_located() {
    let s = "[schedules.d]\n";
    let cases = [
        (
            format!("{s}cron = \"0 3 * *\"\nparams = {{ day = \"x\" }}\n"),
            "11:8: schedule `d`: cron `0 3 * *` has 4 fields",
        ),
        (
            format!("{s}cron = \"0 61 * * *\"\nparams = {{ day = \"x\" }}\n"),
            "11:8: schedule `d`: cron `0 61 * * *`",
        ),
        (
            format!(
                "{s}cron = \"0 3 * * *\"\nzone = \"Europe/Pariss\"\nparams = {{ day = \"x\" }}\n"
            ),
            "12:8: schedule `d`: zone `Europe/Pariss` is not an IANA",
        ),
        (
            format!("{s}cron = \"0 3 * * *\"\nparams = {{ day = \"on ${{schedule.dat}}\" }}\n"),
            "12:22: schedule `d`, param `day`: `${schedule.dat}`: a schedule's params may read",
        ),
        (
            format!("{s}cron = \"0 3 * * *\"\nparams = {{ day = \"x\", nope = 1 }}\n"),
            "12:30: schedule `d`, param `nope`: not declared in [params]",
        ),
        (
            format!(
                "{s}cron = \"0 3 * * *\"\nparams = {{ day = \"x\", n = \"${{schedule.date}}\" }}\n"
            ),
            "10:1: schedule `d`: its params: parameter `n` must be an integer",
        ),
        (
            format!("{s}cron = \"0 3 * * *\"\n"),
            "10:1: schedule `d`: its params: parameter `day` is required",
        ),
        (
            format!("{s}cron = \"0 3 * * *\"\nparams = {{ day = \"x\" }}\ncatch_up = \"some\"\n"),
            "13:12: schedule `d`: catch_up is `some`",
        ),
        (
            format!("{s}cron = \"0 3 * * *\"\nparams = {{ day = \"x\" }}\ncatch_up_max = 0\n"),
            "13:16: schedule `d`: catch_up_max is 1 to 10000",
        ),
        (
            format!("{s}cron = \"0 3 * * *\"\nparams = {{ day = \"x\" }}\noverlap = \"wait\"\n"),
            "13:11: schedule `d`: overlap is `wait`",
        ),
        (
            format!("{s}cron = \"0 3 * * *\"\nparams = {{ day = \"x\" }}\njitter = \"soon\"\n"),
            "13:10: `soon` is not a duration",
        ),
        (
            "[schedules.9x]\ncron = \"0 3 * * *\"\n".to_owned(),
            "10:1: schedule `9x`: a name is",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .map(|(body, want)| (error(body), want))
        .filter(|(got, want)| !got.starts_with(*want))
        .map(|(got, want)| format!("want {want}\n got {got}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
