//! Parameters at the command line: `--param` and `--params-file` reach the steps and the
//! definition a run pins, which `resume` uses; bad values exit 2 naming the parameter and
//! create nothing; `validate` and `graph` show the steps a file makes.

use crate::harness::Cli;
use serde_json::{json, Value};

const WORKFLOW: &str = r#"[workflow]
name = "p"
on_failure = "pause"

[params]
word = { type = "string", required = true }
times = { type = "integer", default = 1 }
hosts = { type = "list", default = ["a", "b"] }

[[steps]]
name = "each"
for_each = "${params.hosts}"
run = "echo ${params.word} ${item} ${params.times} >> out.txt"
idempotency = "natural"

[[steps]]
name = "gate"
run = "test -f go || exit 9"
idempotency = "natural"
non_retryable_exit_codes = [9]
depends_on = ["each"]

[[steps]]
name = "last"
run = "echo ${params.word} last >> out.txt"
idempotency = "natural"
depends_on = ["gate"]
"#;

/// Every file and folder under the data dir.
pub fn listing(cli: &Cli) -> Vec<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten() {
            let path = entry.unwrap().path();
            out.push(path.display().to_string());
            walk(&path, out);
        }
    }
    let mut out = Vec::new();
    walk(cli.data.path(), &mut out);
    out
}

#[test]
fn bad_values_exit_2_naming_the_parameter_and_create_nothing() {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", WORKFLOW);
    let wf = wf.to_str().unwrap();
    let file = cli.workflow("bad.json", r#"{"word": "w", "times": "two"}"#);
    let cases: [(&[&str], &str); 6] = [
        (&[], "parameter `word` is required"),
        (
            &["--param", "word=w", "--param", "times=many"],
            "parameter `times` must be an integer",
        ),
        (
            &["--param", "word=w", "--param", "colour=red"],
            "parameter `colour` is not declared",
        ),
        (
            &["--param", "word=w", "--param", "hosts=[1,"],
            "parameter `hosts` must be a list",
        ),
        (&["--param", "word"], "expected NAME=VALUE"),
        (
            &["--params-file", file.to_str().unwrap()],
            "parameter `times` must be an integer, not string",
        ),
    ];
    for (args, expected) in cases {
        for command in ["run", "validate", "graph"] {
            let out = cli.run(&[&[command, wf][..], args].concat());
            assert_eq!(out.code, 2, "{command} {args:?}: {}", out.stderr);
            assert!(
                out.stderr.contains(expected),
                "{command} {args:?}: {}",
                out.stderr
            );
        }
    }
    assert_eq!(
        listing(&cli),
        Vec::<String>::new(),
        "no run, no event, no folder"
    );
}

#[test]
fn values_reach_the_steps_and_the_pinned_definition_and_resume_keeps_them() {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", WORKFLOW);
    let values = cli.workflow("values.toml", "times = 2\nhosts = [\"x\", \"y\"]\n");
    let run = cli.run(&[
        "run",
        wf.to_str().unwrap(),
        "--run-id",
        "r1",
        "--params-file",
        values.to_str().unwrap(),
        "--param",
        "word=hi; there",
        "--param",
        "times=3",
    ]);
    assert_eq!(
        run.code, 1,
        "the gate fails and the run pauses: {}",
        run.stderr
    );
    let events = cli.run(&["events", "r1", "--json"]).stdout;
    let created: Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    let pinned = &created["payload"];
    assert_eq!(
        pinned["arguments"],
        json!({"word": "hi; there", "times": 3, "hosts": ["x", "y"]}),
        "--param wins over the file; the values are pinned"
    );
    let names: Vec<&str> = pinned["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["each[x]", "each[y]", "gate", "last"]);
    // The file changes; the run goes on with the definition and values it started with.
    std::fs::write(&wf, WORKFLOW.replace("${params.word} last", "changed")).unwrap();
    std::fs::write(cli.work.path().join("go"), "").unwrap();
    let over = cli.run(&[
        "override", "r1", "gate", "--to", "pending", "--reason", "go",
    ]);
    assert_eq!(over.code, 0, "{}", over.stderr);
    let resumed = cli.run(&["resume", "r1"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    let mut out: Vec<String> = std::fs::read_to_string(cli.work.path().join("out.txt"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    out.sort();
    assert_eq!(out, ["hi; there last", "hi; there x 3", "hi; there y 3"]);
}

#[test]
fn validate_and_graph_show_the_steps_a_file_makes() {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", WORKFLOW);
    let wf = wf.to_str().unwrap();
    let validate = cli.run(&[
        "validate",
        wf,
        "--param",
        "word=w",
        "--param",
        r#"hosts=["m","n","o"]"#,
    ]);
    assert_eq!(validate.code, 0, "{}", validate.stderr);
    assert!(
        validate.stdout.contains("with 5 steps is valid"),
        "{}",
        validate.stdout
    );
    assert!(
        validate.stdout.contains("each: 3 steps"),
        "{}",
        validate.stdout
    );
    let dot = cli.run(&["graph", wf, "--param", "word=w", "--format", "dot"]);
    assert_eq!(dot.code, 0, "{}", dot.stderr);
    assert!(dot.stdout.starts_with("digraph"), "{}", dot.stdout);
    assert!(dot.stdout.contains("each[b]"), "{}", dot.stdout);
    let mermaid = cli.run(&["graph", wf, "--param", "word=w", "--format", "mermaid"]);
    assert!(
        mermaid.stdout.starts_with("flowchart"),
        "{}",
        mermaid.stdout
    );
    let text = cli.run(&["graph", wf, "--param", "word=w"]);
    assert!(text.stdout.contains("each: 2 steps"), "{}", text.stdout);
    let runbook = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/ops-runbook/workflow.toml");
    let shown = cli.run(&["validate", runbook.to_str().unwrap()]);
    assert!(
        shown.stdout.contains("102 steps is valid") && shown.stdout.contains("gate: 4 steps"),
        "{}",
        shown.stdout
    );
}

#[test]
fn env_cwd_env_pass_and_secrets_reach_the_step_and_the_secret_no_record() {
    let cli = Cli::new();
    std::fs::create_dir(cli.work.path().join("sub")).unwrap();
    let wf = cli.workflow(
        "env.toml",
        r#"[workflow]
name = "e"

[params]
word = { type = "string", default = "w" }
token = { type = "string", secret = { env = "TEST_TOKEN" } }

[defaults]
env = { A = "${params.word}", LANG = "C" }
cwd = "sub"
env_pass = ["PATH"]

[[steps]]
name = "s"
run = "echo \"$A|${HOME:-no home}|$LANG|$B\" > out.txt; echo ${params.token} > secret.txt"
idempotency = "natural"
env = { B = "${run.id}" }
"#,
    );
    let mut command = cli.command(&["run", wf.to_str().unwrap(), "--run-id", "r1"]);
    command
        .env("TEST_TOKEN", "s3cret")
        .env("HOME", "/home/someone");
    let ran = crate::harness::ran(command.stdin(std::process::Stdio::null()).output().unwrap());
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let read =
        |file: &str| std::fs::read_to_string(cli.work.path().join("sub").join(file)).unwrap();
    assert_eq!(
        read("out.txt"),
        "w|no home|C|r1\n",
        "env over env_pass, in cwd"
    );
    assert_eq!(read("secret.txt"), "s3cret\n");
    let events = cli.run(&["events", "r1", "--json"]).stdout;
    assert!(!events.contains("s3cret"), "{events}");
}
