//! A try's command behind its gate, run by the executor alone: as `sh -c COMMAND` would run
//! it, whether the gate runs it itself (a try of the engine's) or in a subshell whose exit
//! status it writes down (a worker's).

use apollo11_core::Usage;
use apollo11_runtime::{Output, StepError};
use apollo11_shell::files::step_files;
use apollo11_shell::shell::{execute, Files, Job, Placing};
use std::path::Path;

/// Places a try nowhere: its gate opens at once.
struct Nowhere;

#[async_trait::async_trait]
impl Placing for Nowhere {
    async fn placed(&self, _host: &str, _handle: &str) -> Result<(), StepError> {
        Ok(())
    }

    fn used(&self, _usage: Usage) {}
}

/// Runs `command` in `dir` with the variables `env`, as step `s` of run `r`; with `exit`,
/// the gate that writes the exit status there.
async fn run(
    dir: &Path,
    command: &str,
    env: &[(&str, &str)],
    exit: Option<&Path>,
) -> Result<Output, StepError> {
    let job = Job {
        run_id: "r".into(),
        step: "s".into(),
        attempt: 1,
        command: command.into(),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        dir: dir.to_owned(),
        ..Job::default()
    };
    let data = dir.join("data");
    let files = step_files(&data, "r", "s", 1, false);
    let at = Files {
        files: &files,
        base: &data,
        base_words: "the data dir",
        exit,
    };
    execute(&job, &at, &Nowhere).await
}

/// What the command saw: its arguments, `$0`, the step's variables that share a name with
/// the gate's, whether a gate variable is left, and its stdin.
const SEEN: &str = r#"printf '%s|%s|%s|%s|%s|%s|%s|%s' "$#" "$0" "$c" "$e" "$go" "$x" "${__apollo11_c-unset}" "$(cat)" > seen"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_sees_what_sh_c_gives_it_and_the_steps_own_variables() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("c", "mine"), ("e", "E"), ("go", "G"), ("x", "X")];
    let exit = dir.path().join("exit");
    for gate in [None, Some(exit.as_path())] {
        let _ = std::fs::remove_file(dir.path().join("seen"));
        run(dir.path(), SEEN, &env, gate).await.unwrap();
        let seen = std::fs::read_to_string(dir.path().join("seen")).unwrap();
        assert_eq!(seen, "0|sh|mine|E|G|X|unset|", "exit file: {gate:?}");
    }
    assert_eq!(std::fs::read_to_string(&exit).unwrap(), "0");
}

/// Asserts that `command` fails its try with exit code `code`.
async fn fails_with(dir: &Path, command: &str, gate: Option<&Path>, code: i32) {
    let failed = run(dir, command, &[], gate).await.unwrap_err();
    let expected = format!("exited with code {code} ");
    assert!(failed.message.starts_with(&expected), "{}", failed.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_exit_status_and_its_syntax_errors_are_the_tries() {
    let dir = tempfile::tempdir().unwrap();
    let exit = dir.path().join("exit");
    for gate in [None, Some(exit.as_path())] {
        fails_with(dir.path(), "true; exit 3", gate, 3).await;
        fails_with(dir.path(), "echo a; if", gate, 2).await;
        fails_with(dir.path(), "no-such-program-here", gate, 127).await;
    }
    assert_eq!(std::fs::read_to_string(&exit).unwrap(), "127");
    let log = std::fs::read_to_string(dir.path().join("data/logs/r/s/1.log")).unwrap();
    assert!(log.contains("no-such-program-here: not found"), "{log}");
}
