//! Parameters, `for_each`, conditions, trigger rules and environments in workflow files:
//! what each key becomes in the declared definition, and each mistake at its line and column.

use apollo11_core::{ItemSource, ParamKind, SecretSource, TriggerRule, WorkflowSpec};
use apollo11_shell::definition::{parse, CWD, ENV, ENV_PASS};
use serde_json::json;
use std::path::Path;

const HEAD: &str = "[workflow]\nname = \"w\"\n";

fn spec(body: &str) -> WorkflowSpec {
    parse(&format!("{HEAD}{body}"), "wf.toml", Path::new("/wf")).unwrap()
}

/// The error of `body`, as `line:column: message`.
fn error(body: &str) -> String {
    let e = parse(&format!("{HEAD}{body}"), "wf.toml", Path::new("/wf")).unwrap_err();
    format!("{}:{}: {}", e.line, e.column, e.message)
}

#[test]
fn params_keep_their_declaration_order_types_defaults_and_secrets() {
    let spec = spec(concat!(
        "[params]\n",
        "rows = { type = \"integer\", default = 200000 }\n",
        "date = { type = \"string\", required = true, description = \"day to process\" }\n",
        "hosts = { type = \"list\", default = [\"a\", \"b\"] }\n",
        "token = { type = \"string\", secret = { env = \"API_TOKEN\" } }\n",
        "[[steps]]\nname = \"s\"\nrun = \"true\"\nidempotency = \"natural\"\n",
    ));
    let names: Vec<&str> = spec.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["rows", "date", "hosts", "token"]);
    assert_eq!(spec.params[0].kind, ParamKind::Integer);
    assert_eq!(spec.params[0].default, Some(json!(200000)));
    assert!(spec.params[1].required);
    assert_eq!(spec.params[1].description, "day to process");
    assert_eq!(spec.params[2].default, Some(json!(["a", "b"])));
    assert_eq!(
        spec.params[3].secret,
        Some(SecretSource::Env("API_TOKEN".into()))
    );
    assert!(
        spec.arguments.is_empty(),
        "a declared workflow has no arguments"
    );
}

const STEP: &str = "[[steps]]\nname = \"s\"\nrun = \"echo ${item}\"\nidempotency = \"natural\"\n";

#[test]
fn for_each_takes_a_list_a_parameter_or_an_output() {
    let list = spec(&format!("{STEP}for_each = [\"a\", 2, {{ k = \"v\" }}]\n"));
    let each = list.steps[0].for_each.as_ref().unwrap();
    assert_eq!(
        each.items,
        ItemSource::List(vec![json!("a"), json!(2), json!({"k": "v"})])
    );
    let param = spec(&format!(
        "[params]\nhosts = {{ type = \"list\", default = [{{ name = \"a\" }}] }}\n{STEP}for_each = \"${{params.hosts}}\"\nwaves = 8\ngate = \"g\"\nkey = \"name\"\n[[steps]]\nname = \"g\"\nrun = \"true\"\nidempotency = \"natural\"\ndepends_on = [\"s\"]\n"
    ));
    let each = param.steps[0].for_each.as_ref().unwrap();
    assert_eq!(each.items, ItemSource::Param("hosts".into()));
    assert_eq!(
        (each.wave_size, each.gate.as_deref(), each.key.as_deref()),
        (Some(8), Some("g"), Some("name"))
    );
    for (source, path) in [("", ""), (".partitions", "partitions"), (".a.b", "a.b")] {
        let output = spec(&format!(
            "[[steps]]\nname = \"d\"\nrun = \"true\"\nidempotency = \"natural\"\n{STEP}depends_on = [\"d\"]\nfor_each = \"${{steps.d.output{source}}}\"\n"
        ));
        assert_eq!(
            output.steps[1].for_each.as_ref().unwrap().items,
            ItemSource::Output {
                step: "d".into(),
                path: path.into()
            }
        );
    }
}

#[test]
fn an_inventory_file_is_read_next_to_the_workflow_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("hosts.toml"),
        "[[hosts]]\nname = \"db1\"\n[[hosts]]\nname = \"db2\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("hosts.json"), r#"["x", "y"]"#).unwrap();
    let read = |file: &str| {
        let text = format!("{HEAD}{STEP}for_each = {{ file = \"{file}\" }}\n");
        parse(&text, "wf.toml", dir.path()).map(|s| s.steps[0].for_each.clone().unwrap().items)
    };
    assert_eq!(
        read("hosts.toml").unwrap(),
        ItemSource::List(vec![json!({"name": "db1"}), json!({"name": "db2"})])
    );
    assert_eq!(
        read("hosts.json").unwrap(),
        ItemSource::List(vec![json!("x"), json!("y")])
    );
    let missing = read("nope.json").unwrap_err();
    assert_eq!((missing.line, missing.column), (7, 12));
    assert!(
        missing.message.contains("cannot read the inventory file"),
        "{}",
        missing.message
    );
    let device = read("/dev/zero").unwrap_err();
    assert!(
        device.message.contains("not a regular file"),
        "{}",
        device.message
    );
}

#[test]
fn conditions_triggers_env_cwd_and_env_pass_are_kept() {
    let spec = spec(concat!(
        "[params]\nfull = { type = \"boolean\", default = false }\n",
        "[defaults]\nenv = { LANG = \"C\", A = \"1\" }\ncwd = \"work\"\nenv_pass = [\"PATH\", \"HOME\"]\n",
        "[[steps]]\nname = \"s\"\nrun = \"true\"\nidempotency = \"natural\"\n",
        "when = \"params.full == true\"\ntrigger = \"one_failed\"\nenv = { A = \"2\", HOST = \"${run.id}\" }\n",
        "[[steps]]\nname = \"t\"\nrun = \"true\"\nidempotency = \"natural\"\ncwd = \"elsewhere\"\ntrigger = \"all_done\"\n",
    ));
    let (s, t) = (&spec.steps[0], &spec.steps[1]);
    assert_eq!(s.condition.as_deref(), Some("params.full == true"));
    assert_eq!(
        (s.trigger, t.trigger),
        (TriggerRule::OneFailed, TriggerRule::AllDone)
    );
    assert_eq!(
        s.attributes[ENV], r#"{"A":"2","HOST":"${run.id}","LANG":"C"}"#,
        "the step's env over the defaults'"
    );
    assert_eq!(
        (s.attributes[CWD].as_str(), t.attributes[CWD].as_str()),
        ("work", "elsewhere")
    );
    assert_eq!(spec.attributes[ENV_PASS], r#"["PATH","HOME"]"#);
}

#[test]
fn each_authoring_mistake_is_put_where_it_was_written() {
    let cases = [
        (
            "[params]\nx = { type = \"text\" }\n",
            "4:14: parameter `x`: type `text` is not one of",
        ),
        (
            "[params]\nx = { type = \"integer\", default = \"ten\" }\n",
            "4:35: the default: parameter `x` must be an integer, not string",
        ),
        (
            "[params]\nx = { type = \"integer\", default = 1, required = true }\n",
            "4:5: parameter `x`: a parameter with a default is never required",
        ),
        (
            "[params]\nx = { type = \"string\", secret = { env = \"A\", file = \"b\" } }\n",
            "4:33: parameter `x`: a secret is read from one source",
        ),
        (
            "[params]\n\"a-b\" = { type = \"string\" }\n",
            "4:9: parameter `a-b`: a name is letters",
        ),
        (
            &format!("{STEP}for_each = \"${{params}}\"\n"),
            "7:12: step `s`: for_each `${params}` is not",
        ),
        (
            &format!("{STEP}for_each = 3\n"),
            "7:12: step `s`: for_each is a list",
        ),
        (
            &format!("{STEP}for_each = {{ path = \"x\" }}\n"),
            "7:12: step `s`: a for_each table is `{ file = \"PATH\" }`",
        ),
        (
            &format!("{STEP}for_each = {{ file = \"x.yaml\" }}\n"),
            "7:12: step `s`: cannot read the inventory file",
        ),
        (
            &format!("{STEP}waves = 2\n"),
            "7:9: step `s`: `waves` applies to a step with `for_each` only",
        ),
        (
            &format!("{STEP}for_each = [1]\nwaves = 0\n"),
            "8:9: step `s`: `waves` is the number of items per wave",
        ),
        (
            &format!("{STEP}trigger = \"sometimes\"\n"),
            "7:11: step `s`: trigger `sometimes` is not one of",
        ),
        (
            &format!("{STEP}env = {{ \"A B\" = \"x\" }}\n"),
            "7:17: env: `A B` is not a variable name",
        ),
        (
            &format!("{STEP}env = {{ APOLLO11_STEP = \"x\" }}\n"),
            "7:25: env: `APOLLO11_STEP`: the APOLLO11_ variables are set by the engine",
        ),
        (
            &format!("[defaults]\nenv_pass = [\"PATH\", \"1X\"]\n{STEP}"),
            "4:21: env_pass: `1X` is not a variable name",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .map(|(body, expected)| (error(body), expected))
        .filter(|(got, expected)| !got.starts_with(*expected))
        .map(|(got, expected)| format!("got   {got}\nwant  {expected}…"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_condition_mistake_is_put_on_its_culprit() {
    let params = "[params]\nn = { type = \"integer\", default = 1 }\n";
    let cases = [
        (
            r#"when = "params.n > (2 +""#,
            "7:24: step `s`, condition is not an expression: it ends early",
        ),
        (
            r#"when = "(params.n > 2)) || true""#,
            "7:23: step `s`, condition is not an expression: ",
        ),
        (
            r#"when = 'params.n > "x"'"#,
            "7:9: step `s`, condition compares integer with string (`>`)",
        ),
        (
            r#"when = 'true && (1 < params.n) == "yes"'"#,
            "7:22: step `s`, condition compares boolean with string (`==`)",
        ),
        (
            r#"when = "params.m == 1""#,
            "7:9: step `s`, condition: parameter `m` is not declared",
        ),
        (
            r#"when = "true && x""#,
            "7:17: step `s`, condition `x` names nothing: expected",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .map(|(when, expected)| (error(&format!("{STEP}{when}\n{params}")), expected))
        .filter(|(got, expected)| !got.starts_with(*expected))
        .map(|(got, expected)| format!("got   {got}\nwant  {expected}…"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
