//! What an operator sees and does when a run needs a person: failed compensation tries in
//! `events`, the cause in `status`, the way out in `plan`.

use crate::harness::Cli;

/// `a` (whose compensation fails until the file `fixed` exists) then `b`, which fails for
/// good: the run rolls back `a`, at most twice.
const UNDO_FAILS: &str = "[workflow]\nname = \"undo\"\non_failure = \"rollback\"\n[defaults]\nretry = { max_attempts = 2, initial = \"10ms\" }\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"keyed\"\ncompensate = \"echo try >> undo-tries; [ -e fixed ] || { echo bucket locked >&2; exit 3; }\"\n[[steps]]\nname = \"b\"\nrun = \"exit 5\"\nidempotency = \"natural\"\nnon_retryable_exit_codes = [5]\ndepends_on = [\"a\"]\n";

#[test]
fn a_compensation_out_of_tries_is_in_events_status_and_plan() {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", UNDO_FAILS);
    let out = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "u"]);
    assert_eq!(
        out.code, 1,
        "a paused run exits 1: {}{}",
        out.stdout, out.stderr
    );
    let tries: Vec<(String, String)> = cli
        .events_json("u")
        .iter()
        .filter(|e| e["step"] == "a" && e["kind"].as_str().unwrap().starts_with("compensat"))
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_owned(),
                e["error"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let kinds: Vec<&str> = tries.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "compensating",
            "compensation_failed",
            "compensating",
            "compensation_failed"
        ]
    );
    assert!(tries[1].1.contains("exited with code 3"), "{tries:?}");
    assert_eq!(
        std::fs::read_to_string(cli.file("undo-tries")).unwrap(),
        "try\ntry\n"
    );
    let status = cli.status_json("u");
    assert_eq!(status["state"], "paused");
    assert_eq!(status["steps"]["a"]["state"], "compensation_failed");
    let table = cli.run(&["status", "u"]).stdout;
    assert!(
        table.contains(
            "paused: the compensation of `a` failed for good after 2 tries: exited with code 3"
        ),
        "{table}"
    );
    let plan = cli.run(&["plan", "u"]).stdout;
    for wanted in [
        "nothing: the run is paused",
        "the run waits for a person: the compensation of `a` failed for good",
        "`apollo11 override u a --to skipped --reason TEXT`",
        "`apollo11 override u a --to succeeded --reason TEXT` to have it tried again",
        "then `apollo11 resume u`",
    ] {
        assert!(plan.contains(wanted), "{wanted:?} not in:\n{plan}");
    }
    // The operator fixes the cause and asks for the compensation again.
    std::fs::write(cli.file("fixed"), "").unwrap();
    let over = cli.run(&[
        "override",
        "u",
        "a",
        "--to",
        "succeeded",
        "--reason",
        "unlocked the bucket",
    ]);
    assert_eq!(over.code, 0, "{}", over.stderr);
    let out = cli.run(&["resume", "u"]);
    assert_eq!(out.code, 1, "rolled back: {}{}", out.stdout, out.stderr);
    assert_eq!(cli.status_json("u")["state"], "rolled_back");
    let events = cli.run(&["events", "u"]).stdout;
    assert!(
        events.contains("compensation_failed(1): exited with code 3"),
        "{events}"
    );
}
