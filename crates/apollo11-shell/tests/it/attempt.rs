//! What a shell step's attempt sees and records, on a real `sh` and a real file log: its
//! command rendered with each value one quoted word, its environment (`env`, secrets,
//! `env_pass`), its folder, its dependencies' outputs and the run's arguments as files, and
//! the command as it ran recorded with its place, no secret's value anywhere.

use apollo11_core::{Event, EventKind, Seq, Value};
use apollo11_log::{FileLog, Options};
use apollo11_runtime::{Engine, RunId, RunStatus};
use apollo11_store::EventStore;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};

/// A workflow folder and a data dir, both temporary.
struct Dirs {
    _root: tempfile::TempDir,
    work: PathBuf,
    data: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let (work, data) = (root.path().join("work"), root.path().join("data"));
    std::fs::create_dir(&work).unwrap();
    Dirs {
        _root: root,
        work,
        data,
    }
}

/// Runs `toml` (a workflow file in `dirs.work`) as run `r` with `arguments` to its end;
/// its status and events.
async fn run(dirs: &Dirs, toml: &str, arguments: Value) -> (RunStatus, Vec<Event>) {
    let declared = apollo11_shell::parse(toml, "wf.toml", &dirs.work).unwrap();
    let arguments: BTreeMap<String, Value> = serde_json::from_value(arguments).unwrap();
    let spec = apollo11_author::instantiate(&declared, &arguments).unwrap();
    let workflow = Arc::new(apollo11_shell::workflow(&spec, &dirs.data).unwrap());
    let options = Options {
        preallocate: false,
        ..Options::default()
    };
    let log = Arc::new(FileLog::open(&dirs.data, options).unwrap());
    let engine = Engine::open(log.clone(), Default::default()).await.unwrap();
    let run = RunId::from("r");
    let handle = engine.start(&workflow, run.clone()).await.unwrap();
    let status = handle.outcome().await.unwrap();
    (status, log.read_run(&run, Seq(1)).await.unwrap())
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The JSON payload of each `placed` event of `step`.
fn placed(events: &[Event], step: &str) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Placed { .. }))
        .filter(|e| e.step.as_ref().is_some_and(|s| s.as_str() == step))
        .map(|e| serde_json::from_slice(e.payload.inline_bytes().unwrap()).unwrap())
        .collect()
}

/// The error of each `failed` event of `step`, with whether it is retryable.
fn failures(events: &[Event], step: &str) -> Vec<(String, bool)> {
    events
        .iter()
        .filter(|e| e.step.as_ref().is_some_and(|s| s.as_str() == step))
        .filter_map(|e| e.kind.failure().map(|f| (f.error.clone(), f.retryable)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_is_one_shell_word_and_adds_no_command() {
    let dirs = dirs();
    let toml = r#"
[workflow]
name = "quoting"
[params]
text = { type = "string" }
[[steps]]
name = "echo"
run = "printf '%s|' ${params.text} > got.txt"
idempotency = "natural"
"#;
    let text = "x; touch pwned 'quoted' $(touch pwned) `touch pwned`";
    let (status, events) = run(&dirs, toml, json!({ "text": text })).await;
    assert_eq!(status, RunStatus::Succeeded, "{events:?}");
    assert_eq!(read(&dirs.work, "got.txt"), format!("{text}|"));
    assert!(
        !dirs.work.join("pwned").exists(),
        "a value ran as a command"
    );
}

/// Sets the engine's own variables the tests below look for, once for the process.
fn engine_variables() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        std::env::set_var("SHELL_IT_LISTED", "listed");
        std::env::set_var("SHELL_IT_UNLISTED", "unlisted");
    });
}

/// What a step that prints `PATH`, `SHELL_IT_LISTED` and `SHELL_IT_UNLISTED` (each `-` when
/// unset) saw, with `env_pass` set to `pass` (none: not set).
async fn engine_variables_seen(pass: Option<&str>) -> String {
    engine_variables();
    let dirs = dirs();
    let defaults = pass.map_or(String::new(), |p| format!("[defaults]\nenv_pass = {p}\n"));
    let toml = format!(
        r#"
[workflow]
name = "env"
{defaults}
[[steps]]
name = "env"
run = "echo ${{PATH:--}} ${{SHELL_IT_LISTED:--}} ${{SHELL_IT_UNLISTED:--}} > seen.txt"
idempotency = "natural"
"#
    );
    let (status, events) = run(&dirs, &toml, json!({})).await;
    assert_eq!(status, RunStatus::Succeeded, "{events:?}");
    read(&dirs.work, "seen.txt")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_pass_chooses_the_engine_variables_a_step_sees_and_without_it_all_do() {
    let path = std::env::var("PATH").unwrap();
    assert_eq!(
        engine_variables_seen(None).await,
        format!("{path} listed unlisted\n"),
        "without env_pass: the whole environment, as before env_pass existed"
    );
    assert_eq!(
        engine_variables_seen(Some(r#"["PATH", "SHELL_IT_LISTED"]"#)).await,
        format!("{path} listed -\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_reads_its_dependencys_output_as_a_file_and_through_templates() {
    let dirs = dirs();
    let toml = r#"
[workflow]
name = "data"
[params]
day = { type = "string", default = "2026-12-05" }
rows = { type = "integer", default = 3 }
[[steps]]
name = "first"
run = "printf '%s\n' '{\"n\": 7, \"s\": \"a b\"}' > \"$APOLLO11_OUTPUT\""
idempotency = "natural"
[[steps]]
name = "second"
run = """
cp "$APOLLO11_INPUTS/first" from-file.txt
printf '%s|%s|%s' ${steps.first.output} ${steps.first.output.n} ${steps.first.output.s} > from-templates.txt
cp "$APOLLO11_PARAMS" params.json
ls "$APOLLO11_INPUTS" > inputs.txt
"""
idempotency = "natural"
depends_on = ["first"]
"#;
    let (status, events) = run(&dirs, toml, json!({ "rows": 5 })).await;
    assert_eq!(status, RunStatus::Succeeded, "{events:?}");
    assert_eq!(
        read(&dirs.work, "from-file.txt"),
        "{\"n\": 7, \"s\": \"a b\"}\n"
    );
    assert_eq!(
        read(&dirs.work, "from-templates.txt"),
        r#"{"n": 7, "s": "a b"}|7|a b"#
    );
    assert_eq!(read(&dirs.work, "inputs.txt"), "first\n");
    let params: serde_json::Value = serde_json::from_str(&read(&dirs.work, "params.json")).unwrap();
    assert_eq!(params, json!({ "day": "2026-12-05", "rows": 5 }));
    assert!(
        dirs.data.join("inputs/r").is_dir() && !dirs.data.join("inputs/r/second").exists(),
        "the inputs are removed once the attempt ends"
    );
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if std::fs::read(&path)
            .unwrap()
            .windows(needle.len())
            .any(|w| w == needle)
        {
            found.push(path);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_as_run_is_recorded_and_a_secret_is_nowhere_in_the_data_dir() {
    let dirs = dirs();
    let secret = "hunter2-7f3a9c";
    std::fs::write(dirs.work.join("token"), format!("{secret}\n")).unwrap();
    std::fs::create_dir(dirs.work.join("sub")).unwrap();
    let toml = format!(
        r#"
[workflow]
name = "secret"
[params]
who = {{ type = "string", default = "o'neil" }}
token = {{ type = "string", secret = {{ file = "{}" }} }}
[defaults]
cwd = "sub"
[[steps]]
name = "call"
run = "printf '%s' ${{params.token}} > seen-in-command.txt; printf '%s' \"$TOKEN\" > seen-in-env.txt; echo hello ${{params.who}}"
idempotency = "natural"
env = {{ TOKEN = "${{params.token}}" }}
"#,
        dirs.work.join("token").display()
    );
    let (status, events) = run(&dirs, &toml, json!({})).await;
    assert_eq!(status, RunStatus::Succeeded, "{events:?}");
    let sub = dirs.work.join("sub");
    assert_eq!(read(&sub, "seen-in-command.txt"), secret);
    assert_eq!(read(&sub, "seen-in-env.txt"), secret);
    let command = r#"printf '%s' "$APOLLO11_SECRET_TOKEN" > seen-in-command.txt; printf '%s' "$TOKEN" > seen-in-env.txt; echo hello 'o'\''neil'"#;
    assert_eq!(
        placed(&events, "call"),
        [json!({ "command": command, "cwd": sub.to_str().unwrap(), "isolation": "none" })]
    );
    assert!(
        read(&dirs.data, "logs/r/call/1.log").contains("hello o'neil"),
        "the step ran"
    );
    assert_eq!(
        files_holding(&dirs.data, secret.as_bytes()),
        Vec::<PathBuf>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_folder_fails_the_attempt_for_good_naming_the_folder() {
    let dirs = dirs();
    let toml = r#"
[workflow]
name = "cwd"
[params]
region = { type = "string", default = "eu" }
[[steps]]
name = "s"
run = "true"
cwd = "deploy/${params.region}"
idempotency = "natural"
retry = { max_attempts = 3, initial = "10ms" }
"#;
    let (status, events) = run(&dirs, toml, json!({})).await;
    assert_eq!(
        status,
        RunStatus::Paused,
        "paused for a person after the failure"
    );
    let folder = dirs.work.join("deploy/eu");
    assert_eq!(
        failures(&events, "s"),
        [(
            format!(
                "the step's folder {} does not exist or is not a folder",
                folder.display()
            ),
            false
        )]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_naming_a_secret_is_refused_as_it_is_recorded() {
    let dirs = dirs();
    std::fs::write(dirs.work.join("token"), "hunter2").unwrap();
    let toml = format!(
        r#"
[workflow]
name = "cwd-secret"
[params]
token = {{ type = "string", secret = {{ file = "{}" }} }}
[[steps]]
name = "s"
run = "true"
cwd = "${{params.token}}"
idempotency = "natural"
"#,
        dirs.work.join("token").display()
    );
    let (status, events) = run(&dirs, &toml, json!({})).await;
    assert_eq!(status, RunStatus::Paused);
    let failures = failures(&events, "s");
    assert_eq!(failures.len(), 1, "{failures:?}");
    let (error, retryable) = &failures[0];
    assert!(error.contains("`params.token` is a secret"), "{error}");
    assert!(!retryable);
    assert!(placed(&events, "s").is_empty(), "nothing ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_made_at_run_time_read_their_item_and_their_paired_step_by_its_declaration() {
    let dirs = dirs();
    let toml = r#"
[workflow]
name = "items"
[[steps]]
name = "discover"
run = "echo '[\"eu\", \"us\"]' > \"$APOLLO11_OUTPUT\""
idempotency = "natural"
[[steps]]
name = "fetch"
for_each = "${steps.discover.output}"
run = "printf 'rows of %s' ${item} > \"$APOLLO11_OUTPUT\""
idempotency = "natural"
depends_on = ["discover"]
[[steps]]
name = "load"
for_each = "${steps.discover.output}"
run = "cp \"$APOLLO11_INPUTS/fetch\" loaded-${item}.txt"
idempotency = "natural"
depends_on = ["fetch"]
"#;
    let (status, events) = run(&dirs, toml, json!({})).await;
    assert_eq!(status, RunStatus::Succeeded, "{events:?}");
    for region in ["eu", "us"] {
        assert_eq!(
            read(&dirs.work, &format!("loaded-{region}.txt")),
            format!("rows of {region}")
        );
    }
}
