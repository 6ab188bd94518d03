//! Time travel: `status --at N` for every event of a run equals the fold of its first N events.

use crate::harness::Cli;
use apollo11_core::{EventId, RunId, Seq, WorkflowSpec};
use apollo11_log::FileLog;
use apollo11_machine::{fold, run_status, Policy};
use apollo11_store::EventStore;

#[tokio::test]
async fn status_at_every_event_equals_the_fold_of_the_events_up_to_it() {
    let cli = Cli::new();
    let toml = "[workflow]\nname = \"tt\"\non_failure = \"rollback\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"keyed\"\ncompensate = \"true\"\n[[steps]]\nname = \"b\"\nrun = \"[ $APOLLO11_ATTEMPT = 2 ] && exit 4 || exit 1\"\nidempotency = \"natural\"\nnon_retryable_exit_codes = [4]\nretry = { initial = \"10ms\" }\ndepends_on = [\"a\"]\n";
    let wf = cli.workflow("wf.toml", toml);
    assert_eq!(
        cli.run(&["run", wf.to_str().unwrap(), "--run-id", "tt"])
            .code,
        1
    );
    let log = FileLog::open_read_only(cli.data.path()).unwrap();
    let events = log.read_run(&RunId::from("tt"), Seq(1)).await.unwrap();
    assert!(
        events.len() >= 8,
        "created, a, b twice, rollback: {}",
        events.len()
    );
    let spec: WorkflowSpec =
        serde_json::from_slice(events[0].payload.inline_bytes().unwrap()).unwrap();
    let (dag, policy) = Policy::compile(&spec, |_, f| f).unwrap();
    let mut states_seen = std::collections::BTreeSet::new();
    for n in 1..=events.len() {
        let at = events[n - 1].event_id;
        let state = fold(&RunId::from("tt"), &events[..n]);
        let expected_status = run_status(&state, &dag, &policy);
        let json = cli.run(&["status", "tt", "--at", &at.0.to_string(), "--json"]);
        let got: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        assert_eq!(got["state"], expected_status.name(), "at event {at}");
        for step in ["a", "b"] {
            let s = state.step(step);
            let got = &got["steps"][step];
            assert_eq!(
                (&got["state"], &got["attempt"]),
                (
                    &serde_json::json!(s.status.name()),
                    &serde_json::json!(s.attempt)
                ),
                "{step} at event {at}"
            );
        }
        states_seen.insert(got.to_string());
    }
    assert!(
        states_seen.len() >= 6,
        "the run went through many states: {}",
        states_seen.len()
    );
    assert_eq!(
        log.last_event_id().await.unwrap(),
        EventId(events.len() as u64)
    );
}

/// A workflow of one step that succeeds.
const ONE_STEP: &str =
    "[workflow]\nname = \"w\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n";

#[test]
fn status_at_an_event_before_the_run_existed_says_so() {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", ONE_STEP);
    for run in ["first", "second"] {
        assert_eq!(
            cli.run(&["run", wf.to_str().unwrap(), "--run-id", run])
                .code,
            0
        );
    }
    let first_event = cli.events_json("second")[0]["event_id"].as_u64().unwrap();
    let out = cli.run(&["status", "second", "--at", "1"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains(&format!("run `second` begins at event {first_event}")),
        "{}",
        out.stderr
    );
    let at = first_event.to_string();
    assert_eq!(
        cli.run(&["status", "second", "--at", &at, "--json"]).code,
        0
    );
}

#[test]
fn events_says_where_a_try_was_placed_in_words_and_what_it_ran_and_json_keeps_the_handle() {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", ONE_STEP);
    assert_eq!(
        cli.run(&["run", wf.to_str().unwrap(), "--run-id", "p"])
            .code,
        0
    );
    let placed = cli
        .events_json("p")
        .into_iter()
        .find(|e| e["kind"] == "placed")
        .expect("a placed event");
    let handle: serde_json::Value =
        serde_json::from_str(placed["handle"].as_str().unwrap()).unwrap();
    let pid = handle["pgid"].as_i64().unwrap();
    let boot = &handle["boot"].as_str().unwrap()[..8];
    let host = placed["host"].as_str().unwrap();
    let text = cli.run(&["events", "p"]).stdout;
    let line = text
        .lines()
        .find(|l| l.contains("placed("))
        .unwrap_or_else(|| panic!("no placed line in {text}"));
    assert!(
        line.ends_with(&format!(
            "placed(1) pid {pid} on {host} (boot {boot}): true"
        )),
        "{line}"
    );
    assert_eq!(placed["payload"]["command"], "true");
    assert!(!line.contains('{'), "no raw handle: {line}");
}
