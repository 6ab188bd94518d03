//! Every validation error: exit code 2 and `file:line:column: message`.

use crate::harness::Cli;

const HEAD: &str = "[workflow]\nname = \"v\"\n";

/// Validates `toml` and returns the error line.
pub(crate) fn invalid(toml: &str) -> String {
    let cli = Cli::new();
    let wf = cli.workflow("wf.toml", toml);
    let out = cli.run(&["validate", wf.to_str().unwrap()]);
    assert_eq!(
        out.code, 2,
        "expected exit 2 for:\n{toml}\n{}{}",
        out.stdout, out.stderr
    );
    let line = out
        .stderr
        .trim()
        .strip_prefix("apollo11: ")
        .unwrap()
        .to_owned();
    let run = cli.run(&["run", wf.to_str().unwrap()]);
    assert_eq!(
        (run.code, run.stderr.trim()),
        (2, out.stderr.trim()),
        "run validates the same way"
    );
    line.replace(wf.to_str().unwrap(), "wf.toml")
}

#[test]
fn each_semantic_error_names_the_file_line_and_column() {
    let cases = [
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\n"), "wf.toml:3:1: step `a` has no `idempotency`"),
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"compensate\"\n"), "wf.toml:3:1: step `a` has idempotency `compensate` but no `compensate` command"),
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\ndepends_on = [\"ghost\"]\n"), "wf.toml:7:15: step `a` depends on `ghost`, which is not a step"),
        (
            format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\ndepends_on = [\"b\"]\n[[steps]]\nname = \"b\"\nrun = \"true\"\nidempotency = \"natural\"\ndepends_on = [\"a\"]\n"),
            "wf.toml:4:8: dependency cycle: a -> b -> a",
        ),
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n"), "wf.toml:8:8: step `a` is defined twice"),
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\ntimeout = \"10 parsecs\"\n"), "wf.toml:7:11: `10 parsecs` is not a duration"),
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\ntimeout = \"0s\"\n"), "wf.toml:7:11: a timeout of `0s` would fail every attempt at once"),
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\nretires = 3\n"), "wf.toml:7:1: unknown field `retires`"),
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"sometimes\"\n"), "wf.toml:6:15: step `a`: idempotency `sometimes` is not one of"),
        (format!("{HEAD}on_failure = \"panic\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n"), "wf.toml:3:14: on_failure is `panic`"),
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\nidempotency = \"natural\"\n"), "wf.toml:5:12: invalid basic string"),
        (HEAD.to_owned(), "wf.toml:1:1: the workflow has no [[steps]]"),
        // 2^64 ms and more used to wrap (to 384 ms for this one).
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\ntimeout = \"18446744073709552s\"\n"), "wf.toml:7:11: `18446744073709552s` is longer than 365 days"),
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\nretry = {{ max = \"9000d\" }}\n"), "wf.toml:7:17: `9000d` is longer than 365 days"),
        (format!("{HEAD}[defaults]\nretry = {{ initial = \"366d\" }}\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n"), "wf.toml:4:21: `366d` is longer than 365 days"),
        (format!("{HEAD}[defaults]\ntimeout = \"0s\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n"), "wf.toml:4:11: a timeout of `0s` would fail every attempt at once"),
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\ntimeout = \"0ms\"\n"), "wf.toml:7:11: a timeout of `0ms` would fail every attempt at once"),
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\nretry = {{ jitter_pct = 150 }}\n"), "wf.toml:7:24: jitter_pct is 150; at most 100"),
        (format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"a\\u0000b\"\nidempotency = \"natural\"\n"), "wf.toml:5:7: step `a`: a command cannot contain a NUL character"),
    ];
    for (toml, expected) in cases {
        let line = invalid(&toml);
        assert!(
            line.starts_with(expected),
            "got   {line}\nwant  {expected}…"
        );
    }
}

#[test]
fn a_valid_file_validates_and_a_missing_one_is_named() {
    let cli = Cli::new();
    let wf = cli.workflow(
        "ok.toml",
        &format!("{HEAD}[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n"),
    );
    let out = cli.run(&["validate", wf.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let missing = cli.run(&["validate", "/nonexistent/wf.toml"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("/nonexistent/wf.toml") && missing.stderr.contains("cannot read"),
        "{}",
        missing.stderr
    );
    let flag = cli.run(&["override", "r", "s", "--to", "done", "--reason", "x"]);
    assert_eq!(
        flag.code, 2,
        "a wrong flag value is a usage error: {}",
        flag.stderr
    );
    let shipped = [
        "../../examples/five-stage/workflow.toml",
        "../../examples/ops-runbook/workflow.toml",
        "../../examples/ops-runbook-workers/workflow.toml",
        "../../examples/fan-out/workflow.toml",
    ];
    for example in shipped {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(example);
        assert_eq!(
            cli.run(&["validate", path.to_str().unwrap()]).code,
            0,
            "{example} validates"
        );
    }
}
