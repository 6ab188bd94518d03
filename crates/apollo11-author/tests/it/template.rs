use apollo11_author::{references, render, Missing, Mode, Ref, Scope, TemplateProblem};
use serde_json::json;

fn scope() -> Scope {
    let mut s = Scope {
        run_id: "r1".into(),
        item: Some(json!({"host": "db-1", "port": 5432})),
        wave: Some(2),
        ..Scope::default()
    };
    s.arguments.insert("date".into(), json!("x; touch pwned"));
    s.arguments.insert("rows".into(), json!(200));
    s.arguments.insert("quote".into(), json!("it's"));
    s.secrets.insert("api-token".into(), "s3cret".into());
    s.outputs.insert(
        "discover".into(),
        br#"{"parts": [{"id": "p0"}], "n": 1}"#.to_vec(),
    );
    s.outputs.insert("plain".into(), b"hello\n".to_vec());
    s.outputs.insert("binary".into(), vec![0xff, 0xfe]);
    s
}

#[test]
fn shell_mode_makes_each_value_one_quoted_word() {
    let s = scope();
    let shell = |t: &str| render(t, &s, Mode::Shell).unwrap();
    assert_eq!(shell("echo ${params.date}"), "echo 'x; touch pwned'");
    assert_eq!(shell("echo ${params.quote}"), r"echo 'it'\''s'");
    assert_eq!(shell("n=${params.rows}"), "n='200'");
    assert_eq!(shell("${run.id}/${ wave }"), "'r1'/'2'");
    assert_eq!(shell("up ${item.host}:${item.port}"), "up 'db-1':'5432'");
    assert_eq!(shell("cat ${steps.plain.output}"), "cat 'hello'");
    assert_eq!(shell("id=${steps.discover.output.parts.0.id}"), "id='p0'");
    assert_eq!(
        shell("curl -H ${params.api-token}"),
        "curl -H \"$APOLLO11_SECRET_API_TOKEN\""
    );
    assert_eq!(
        shell("echo $${params.date} $HOME"),
        "echo ${params.date} $HOME"
    );
    assert_eq!(shell("no references"), "no references");
    assert_eq!(
        s.secret_vars(),
        vec![("APOLLO11_SECRET_API_TOKEN".to_owned(), "s3cret".to_owned())]
    );
}

#[test]
fn plain_mode_writes_values_as_they_are() {
    let s = scope();
    let plain = |t: &str| render(t, &s, Mode::Plain).unwrap();
    assert_eq!(plain("${params.date}"), "x; touch pwned");
    assert_eq!(plain("/data/${item.host}"), "/data/db-1");
    assert_eq!(plain("${item}"), r#"{"host":"db-1","port":5432}"#);
    assert_eq!(plain("${steps.discover.output.parts}"), r#"[{"id":"p0"}]"#);
    assert_eq!(plain("Bearer ${params.api-token}"), "Bearer s3cret");
}

#[test]
fn errors_give_the_offset_and_what_is_wrong() {
    let s = scope();
    let fail = |t: &str| render(t, &s, Mode::Shell).unwrap_err();
    let e = fail("echo ${params.date");
    assert_eq!((e.at, &e.problem), (5, &TemplateProblem::Unterminated));
    let e = fail("ab ${env.HOME}");
    assert_eq!(e.at, 3);
    assert!(
        e.to_string()
            .starts_with("at byte 3: `${env.HOME}` names nothing"),
        "{e}"
    );
    let cases = [
        ("x ${params.nope}", 2, Missing::Param("nope".into())),
        ("${steps.gone.output}", 0, Missing::Output("gone".into())),
        (
            "${steps.binary.output}",
            0,
            Missing::NotText("binary".into()),
        ),
        (
            "${steps.discover.output.parts.3}",
            0,
            Missing::Field("steps.discover.output.parts.3".into(), "3".into()),
        ),
        (
            "${steps.discover.output.n.x}",
            0,
            Missing::Field("steps.discover.output.n.x".into(), "x".into()),
        ),
    ];
    for (text, at, missing) in cases {
        let e = fail(text);
        assert_eq!(
            (e.at, e.problem),
            (at, TemplateProblem::Missing(missing)),
            "{text}"
        );
    }
    let e = fail("${steps.plain.output.a}");
    assert!(
        e.to_string()
            .starts_with("at byte 0: the output of step `plain` is not JSON"),
        "{e}"
    );
    let bare = Scope::default();
    let e = render("${item}", &bare, Mode::Plain).unwrap_err();
    assert_eq!(e.problem, TemplateProblem::Missing(Missing::Item));
    let e = render("${wave}", &bare, Mode::Plain).unwrap_err();
    assert_eq!(e.problem, TemplateProblem::Missing(Missing::Wave));
}

#[test]
fn references_are_listed_with_their_offsets() {
    let refs = references("a ${params.x} $${item} ${steps.s.output.f} ${item}").unwrap();
    assert_eq!(
        refs,
        vec![
            (2, Ref::Param("x".into())),
            (
                23,
                Ref::Output {
                    step: "s".into(),
                    path: vec!["f".into()]
                }
            ),
            (43, Ref::Item(vec![])),
        ]
    );
}

#[test]
fn a_field_named_status_is_a_field_of_the_output() {
    assert_eq!(
        references("${steps.s.output.status} ${steps.s.status}").unwrap(),
        vec![
            (
                0,
                Ref::Output {
                    step: "s".into(),
                    path: vec!["status".into()]
                }
            ),
            (25, Ref::Status { step: "s".into() }),
        ]
    );
}

#[test]
fn a_scope_shown_for_debugging_names_its_secrets_but_never_shows_them() {
    let shown = format!("{:?}", scope());
    assert!(shown.contains("api-token"), "{shown}");
    assert!(!shown.contains("s3cret"), "{shown}");
}
