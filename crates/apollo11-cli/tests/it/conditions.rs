//! Conditions as the commands show them: `plan` says what resume would do with a step whose
//! condition is false (skip it) or cannot be evaluated (fail it for good), reading the run's
//! arguments and the outputs its steps recorded; resume does just that; `status` says why
//! each step was skipped.

use crate::harness::Cli;

const WORKFLOW: &str = r#"[workflow]
name = "when"
on_failure = "pause"

[params]
full = { type = "boolean", default = false }

[[steps]]
name = "a"
run = "echo '{\"rows\": 3}' > \"$APOLLO11_OUTPUT\""
idempotency = "natural"

[[steps]]
name = "gate"                   # fails for good until an operator overrides it
depends_on = ["a"]
non_retryable_exit_codes = [9]
run = "exit 9"
idempotency = "natural"

[[steps]]
name = "b"
when = "params.full || steps.a.output.rows > 5"
run = "echo b"
idempotency = "natural"
depends_on = ["gate"]

[[steps]]
name = "c"
when = 'steps.a.output.rows > "x"'
run = "echo c"
idempotency = "natural"
depends_on = ["gate"]

[[steps]]
name = "notify"
trigger = "one_failed"
run = "echo notify"
idempotency = "natural"
depends_on = ["b"]
"#;

const SKIP_B: &str = "condition `params.full || steps.a.output.rows > 5` is false";
const FAIL_C: &str =
    "the condition `steps.a.output.rows > \"x\"` of step `c` compares integer with string (`>`)";
const SKIP_NOTIFY: &str = "trigger rule `one_failed`: no dependency failed";

/// The row of `step` in a status table, split on runs of spaces.
fn row(table: &str, step: &str) -> String {
    let line = table
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{step} ")));
    line.unwrap_or_else(|| panic!("no row {step}: {table}"))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn plan_says_what_conditions_make_resume_do_and_status_says_why_steps_were_skipped() {
    let cli = Cli::new();
    let wf = cli.workflow("w.toml", WORKFLOW);
    let out = cli.run(&["run", wf.to_str().unwrap(), "--run-id", "r"]);
    assert_eq!(
        out.code, 1,
        "the gate fails and the run pauses: {}",
        out.stderr
    );
    let over = [
        "override",
        "r",
        "gate",
        "--to",
        "succeeded",
        "--reason",
        "ok",
    ];
    assert_eq!(cli.run(&over).code, 0);
    let plan = cli.run(&["plan", "r"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let lines: Vec<&str> = plan.stdout.lines().map(str::trim).collect();
    assert!(
        lines.contains(&format!("skip b: {SKIP_B}").as_str()),
        "{}",
        plan.stdout
    );
    assert!(
        lines.contains(&format!("fail c attempt 1 for good: {FAIL_C}").as_str()),
        "{}",
        plan.stdout
    );
    assert!(
        lines.contains(&format!("skip notify: {SKIP_NOTIFY}").as_str()),
        "the plan goes on with the skipped step's dependents: {}",
        plan.stdout
    );
    assert!(!plan.stdout.contains("start b"), "{}", plan.stdout);

    let out = cli.run(&["resume", "r"]);
    assert_eq!(
        out.code, 1,
        "c fails for good and the run pauses: {}",
        out.stderr
    );
    let table = cli.run(&["status", "r"]).stdout;
    let header = table.lines().find(|l| l.contains("STEP")).unwrap();
    assert!(header.trim_end().ends_with("WHY"), "{table}");
    assert_eq!(row(&table, "b"), format!("b skipped 0 - {SKIP_B}"));
    assert_eq!(
        row(&table, "notify"),
        format!("notify skipped 0 - {SKIP_NOTIFY}")
    );
    assert!(row(&table, "c").ends_with(FAIL_C), "{table}");
    let a = row(&table, "a");
    assert_eq!(a.split(' ').count(), 4, "nothing to say of a success: {a}");
}

#[test]
fn a_condition_comparing_values_of_two_types_is_refused_before_anything_is_created() {
    let cli = Cli::new();
    let wf = cli.workflow(
        "w.toml",
        "[workflow]\nname = \"t\"\n\n[params]\nn = { type = \"integer\", default = 1 }\n\n\
         [[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n\n\
         [[steps]]\nname = \"b\"\nrun = \"true\"\nidempotency = \"natural\"\n\
         when = 'params.n > \"x\"'\n",
    );
    let wf = wf.to_str().unwrap();
    for command in ["validate", "run"] {
        let out = cli.run(&[command, wf]);
        assert_eq!(out.code, 2, "{command}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!(
                "{wf}:16:9: step `b`, condition compares integer with string (`>`)"
            )),
            "{command}: {}",
            out.stderr
        );
    }
    assert_eq!(crate::params::listing(&cli), Vec::<String>::new());
}

#[test]
fn validate_puts_a_condition_that_is_not_an_expression_at_its_culprit_in_the_file() {
    let cli = Cli::new();
    let wf = cli.workflow(
        "w.toml",
        "[workflow]\nname = \"t\"\n\n[params]\nn = { type = \"integer\", default = 1 }\n\n\
         [[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n\
         when = \"\"\"\nparams.n > 1 && \\\n  params.n >> 3\"\"\"\n",
    );
    let wf = wf.to_str().unwrap();
    let out = cli.run(&["validate", wf]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "{wf}:13:12: step `a`, condition is not an expression: `>>` cannot come here"
        )),
        "{}",
        out.stderr
    );
}
