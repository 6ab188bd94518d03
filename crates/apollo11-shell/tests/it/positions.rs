//! Where a mistake inside a string value is reported: the line and column of its culprit in
//! the file, whichever form of TOML string holds it (escapes, literal, multi-line).

use apollo11_shell::definition::parse;
use std::path::Path;

/// A step (lines 3 to 5 of the file) then `rest` (from line 6), then the parameters.
fn error(rest: &str) -> String {
    let text = format!(
        "[workflow]\nname = \"w\"\n[[steps]]\nname = \"s\"\nidempotency = \"natural\"\n{rest}\n\
         [params]\nn = {{ type = \"integer\", default = 1 }}\n\
         mode = {{ type = \"string\", default = \"a\" }}\n"
    );
    let e = parse(&text, "wf.toml", Path::new("/wf")).unwrap_err();
    format!("{}:{}: {}", e.line, e.column, e.message)
}

/// Checks each `(rest, expected start of the error)`.
fn check(cases: &[(&str, &str)]) {
    let wrong: Vec<String> = cases
        .iter()
        .map(|(rest, expected)| (rest, error(rest), expected))
        .filter(|(_, got, expected)| !got.starts_with(*expected))
        .map(|(rest, got, expected)| format!("{rest}\n  got   {got}\n  want  {expected}…"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_condition_that_is_not_an_expression_is_located_at_its_culprit() {
    check(&[
        (
            "run = \"true\"\nwhen = \"params.n > \"",
            "7:20: step `s`, condition is not an expression: it ends early",
        ),
        (
            "run = \"true\"\nwhen = \"params.n >> 3\"",
            "7:18: step `s`, condition is not an expression: `>>` cannot come here",
        ),
        (
            "run = \"true\"\nwhen = \"params.n == 1 && nope\"",
            "7:26: step `s`, condition `nope` names nothing",
        ),
        (
            "run = \"true\"\nwhen = \"params.n == 1 && params.n.x\"",
            "7:26: step `s`, condition `params.n.x` names nothing",
        ),
        (
            "run = \"true\"\nwhen = \"params.n > 1 && params.mode == 3\"",
            "7:25: step `s`, condition compares string with integer (`==`)",
        ),
    ]);
}

#[test]
fn a_condition_mistake_is_located_in_every_form_of_string() {
    check(&[
        (
            r#"run = "true"
when = "params.mode == \"x\" && nope""#,
            "7:33: step `s`, condition `nope` names nothing",
        ),
        (
            r#"run = "true"
when = "params.mode == \"\u00e9\" && nope""#,
            "7:38: step `s`, condition `nope` names nothing",
        ),
        (
            r#"run = "true"
when = 'params.mode == "x" && nope'"#,
            "7:31: step `s`, condition `nope` names nothing",
        ),
        (
            "run = \"true\"\nwhen = \"\"\"\nparams.n > 1 && \\\n    nope\"\"\"",
            "9:5: step `s`, condition `nope` names nothing",
        ),
        (
            "run = \"true\"\r\nwhen = \"\"\"\r\nparams.n > 1\r\n&& \\\r\n  nope\"\"\"",
            "10:3: step `s`, condition `nope` names nothing",
        ),
        (
            "run = \"true\"\nwhen = '''\nparams.n > 1\n&& nope'''",
            "9:4: step `s`, condition `nope` names nothing",
        ),
        (
            "run = \"true\"\nwhen = \"\"\"params.n\\n  >> 1\"\"\"",
            "7:23: step `s`, condition is not an expression: `>>` cannot come here",
        ),
    ]);
}

#[test]
fn a_template_mistake_is_located_in_every_form_of_string() {
    check(&[
        (
            r#"run = "printf \"%s\\n\" ${params.zz}""#,
            "6:25: step `s`, run: parameter `zz` is not declared",
        ),
        (
            r#"run = "echo \u00e9 \t ${params.zz}""#,
            "6:23: step `s`, run: parameter `zz` is not declared",
        ),
        (
            r#"run = 'printf "%s\n" ${params.zz}'"#,
            "6:22: step `s`, run: parameter `zz` is not declared",
        ),
        (
            "run = \"\"\"\necho a \\\n   \\\n  ${params.zz}\"\"\"",
            "9:3: step `s`, run: parameter `zz` is not declared",
        ),
        (
            "run = '''\necho \"a\"\\\n  ${params.zz}'''",
            "8:3: step `s`, run: parameter `zz` is not declared",
        ),
        (
            "run = \"true\"\nenv = { A = \"\\\"${params.zz}\" }",
            "7:16: step `s`, env.A: parameter `zz` is not declared",
        ),
    ]);
}
