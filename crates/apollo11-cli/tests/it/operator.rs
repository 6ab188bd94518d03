//! What an operator sees and does when a run needs a person: failed compensation tries in
//! `events`, the cause in `status`, the way out in `plan`.

use crate::harness::Cli;

/// `a` (whose compensation fails until the file `fixed` exists) then `b`, which fails for
/// good: the run rolls back `a`, at most twice.
pub const UNDO_FAILS: &str = "[workflow]\nname = \"undo\"\non_failure = \"rollback\"\n[defaults]\nretry = { max_attempts = 2, initial = \"10ms\" }\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"keyed\"\ncompensate = \"echo try >> undo-tries; [ -e fixed ] || { echo bucket locked >&2; exit 3; }\"\n[[steps]]\nname = \"b\"\nrun = \"exit 5\"\nidempotency = \"natural\"\nnon_retryable_exit_codes = [5]\ndepends_on = [\"a\"]\n";

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
        events.contains("compensation_failed(1): [exit:3] exited with code 3"),
        "{events}"
    );
}

/// `a` (with a compensation) then `b`, which fails for good: the run pauses.
const PAUSES: &str = "[workflow]\nname = \"p\"\non_failure = \"pause\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"keyed\"\ncompensate = \"echo undone >> undo\"\n[[steps]]\nname = \"b\"\nrun = \"exit 5\"\nidempotency = \"natural\"\nnon_retryable_exit_codes = [5]\ndepends_on = [\"a\"]\n";

#[test]
fn an_operator_pauses_then_rolls_back_a_paused_run_and_resume_carries_it_out() {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", PAUSES);
    assert_eq!(
        cli.run(&["run", wf.to_str().unwrap(), "--run-id", "p"])
            .code,
        1
    );
    let paused = cli.run(&["pause", "p", "--reason", "looking into b", "--by", "alice"]);
    assert_eq!(paused.code, 0, "{}", paused.stderr);
    let table = cli.run(&["status", "p"]).stdout;
    assert!(
        table.contains("paused: by alice: looking into b"),
        "{table}"
    );
    let again = cli.run(&["pause", "p", "--reason", "x", "--by", "bob"]);
    assert_eq!(again.code, 2);
    assert!(
        again
            .stderr
            .contains("cannot pause run `p`: the run is already paused by alice"),
        "{}",
        again.stderr
    );
    let blank = cli.run(&["rollback", "p", "--reason", " "]);
    assert_eq!(blank.code, 2, "a reason is required");
    let rollback = cli.run(&[
        "rollback",
        "p",
        "--reason",
        "abandon this run",
        "--by",
        "carol",
    ]);
    assert_eq!(rollback.code, 0, "{}", rollback.stderr);
    // The operator's pause holds the rollback: `resume` lifts it and the rollback goes on.
    let plan = cli.run(&["plan", "p"]).stdout;
    assert!(
        plan.contains("by alice: looking into b")
            && plan.contains("`apollo11 resume` lifts the pause"),
        "{plan}"
    );
    assert_eq!(cli.run(&["rollback", "p", "--reason", "twice"]).code, 2);
    let out = cli.run(&["resume", "p"]);
    assert_eq!(out.code, 1, "rolled back: {}{}", out.stdout, out.stderr);
    assert_eq!(cli.status_json("p")["state"], "rolled_back");
    assert_eq!(
        std::fs::read_to_string(cli.file("undo")).unwrap(),
        "undone\n"
    );
    let events = cli.events_json("p");
    let run_events: Vec<String> = events
        .iter()
        .filter(|e| e["step"].is_null() && e["kind"] != "run_created")
        .map(|e| format!("{} {} {}", e["kind"], e["by"], e["reason"]))
        .collect();
    assert_eq!(
        run_events,
        [
            "\"run_paused\" \"alice\" \"looking into b\"",
            "\"rollback_requested\" \"carol\" \"abandon this run\"",
            "\"run_resumed\" \"operator\" \"resumed with `apollo11 resume`\""
        ],
        "the pause ends with a resume of its own"
    );
    let lines = cli.run(&["events", "p"]).stdout;
    assert!(
        lines.contains("rollback_requested(0) by carol: abandon this run"),
        "{lines}"
    );
    let finished = cli.run(&["pause", "p", "--reason", "late"]);
    assert_eq!(finished.code, 2);
    assert!(
        finished
            .stderr
            .contains("the run is rolled_back: it is finished"),
        "{}",
        finished.stderr
    );
}

#[test]
fn resume_lifts_an_operators_pause() {
    let cli = Cli::new();
    let toml = PAUSES.replace("run = \"exit 5\"", "run = \"[ -e ok ] || exit 5\"");
    let wf = cli.workflow("wf.toml", &toml);
    assert_eq!(
        cli.run(&["run", wf.to_str().unwrap(), "--run-id", "q"])
            .code,
        1
    );
    assert_eq!(
        cli.run(&["pause", "q", "--reason", "hold", "--by", "alice"])
            .code,
        0
    );
    std::fs::write(cli.file("ok"), "").unwrap();
    let over = cli.run(&["override", "q", "b", "--to", "pending", "--reason", "fixed"]);
    assert_eq!(over.code, 0, "{}", over.stderr);
    let plan = cli.run(&["plan", "q"]).stdout;
    assert!(
        plan.contains("the run waits for a person: by alice: hold")
            && plan.contains("`apollo11 resume` lifts the pause"),
        "{plan}"
    );
    let out = cli.run(&["resume", "q"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let kinds: Vec<String> = cli
        .events_json("q")
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect();
    assert!(kinds.contains(&"run_resumed".to_owned()), "{kinds:?}");
}
