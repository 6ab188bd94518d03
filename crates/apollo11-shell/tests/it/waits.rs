//! Waiting steps in a workflow file: `wait` and `deadline` read, mistakes located.

use apollo11_core::{Idempotency, Timeout, Wait};
use apollo11_shell::definition::parse;
use std::path::Path;

/// A workflow of step `s` (from line 3) whose body is `body`, then step `t` after it.
fn file(body: &str) -> String {
    format!(
        "[workflow]\nname = \"w\"\n[[steps]]\nname = \"s\"\n{body}\n\
         [[steps]]\nname = \"t\"\nidempotency = \"natural\"\nrun = \"echo ${{steps.s.output.go}}\"\ndepends_on = [\"s\"]\n"
    )
}

fn error(body: &str) -> String {
    let e = parse(&file(body), "wf.toml", Path::new("/wf")).unwrap_err();
    format!("{}:{}: {}", e.line, e.column, e.message)
}

#[test]
fn a_wait_for_a_signal_a_timer_or_an_instant_is_read_with_its_deadline() {
    let cases = [
        ("wait = \"signal\"", Wait::Signal, Timeout::None),
        (
            "wait = \"approval\"\ndeadline = \"1h\"",
            Wait::Signal,
            Timeout::Fixed(3_600_000),
        ),
        (
            "wait = { timer = \"3s\" }",
            Wait::After { ms: 3_000 },
            Timeout::None,
        ),
        (
            "wait = { until = \"2026-12-07T03:00:00Z\" }",
            Wait::Until {
                ms: 1_796_612_400_000,
            },
            Timeout::None,
        ),
    ];
    for (body, wait, deadline) in cases {
        let spec = parse(&file(body), "wf.toml", Path::new("/wf")).unwrap();
        let s = &spec.steps[0];
        assert_eq!((s.wait, s.timeout), (Some(wait), deadline), "{body}");
        assert_eq!(s.idempotency, Idempotency::Natural, "a wait reruns safely");
        assert!(
            s.attributes.is_empty(),
            "{body}: no command: {:?}",
            s.attributes
        );
        assert_eq!(spec.steps[1].wait, None);
    }
}

#[test]
fn wait_mistakes_are_located() {
    let cases = [
        (
            "idempotency = \"natural\"",
            "3:1: step `s` has neither `run` (a command) nor `wait`",
        ),
        (
            "run = \"true\"\nwait = \"signal\"",
            "6:8: step `s` has both `run` and `wait`",
        ),
        (
            "wait = \"later\"",
            "5:8: step `s`: `wait` is \"signal\", \"approval\"",
        ),
        (
            "wait = { timer = \"soon\" }",
            "5:8: `soon` is not a duration",
        ),
        (
            "wait = { until = \"tomorrow\" }",
            "5:8: step `s`: `tomorrow` is not an instant in UTC",
        ),
        (
            "wait = { timer = \"1s\", until = \"2026-12-07T03:00:00Z\" }",
            "5:8: step `s`: `wait` is",
        ),
        (
            "wait = \"signal\"\ntimeout = \"1m\"",
            "6:11: step `s` waits and runs no command: `timeout` does not apply (its `deadline`",
        ),
        (
            "wait = \"signal\"\ncompensate = \"undo\"",
            "6:14: step `s` waits and runs no command: `compensate`",
        ),
        (
            "wait = \"signal\"\ndeadline = \"0s\"",
            "6:12: a deadline of 0 would fail the wait at once",
        ),
        (
            "run = \"true\"\nidempotency = \"natural\"\ndeadline = \"1m\"",
            "7:12: step `s`: `deadline` is for a waiting step",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .map(|(body, want)| (body, error(body), want))
        .filter(|(_, got, want)| !got.starts_with(*want))
        .map(|(body, got, want)| format!("{body}\n  got   {got}\n  want  {want}…"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
