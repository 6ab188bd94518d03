use apollo11_author::{check, eval, ExprError, Missing, Ref, Scope};
use serde_json::json;

fn scope() -> Scope {
    let mut s = Scope {
        item: Some(json!({"host": "db-1", "region": "eu"})),
        wave: Some(3),
        ..Scope::default()
    };
    s.arguments.insert("full".into(), json!(true));
    s.arguments.insert("rows".into(), json!(200));
    s.arguments.insert("ratio".into(), json!(0.5));
    s.arguments.insert("mode".into(), json!("fast"));
    s.outputs
        .insert("count-rows".into(), br#"{"count": 7, "ok": true}"#.to_vec());
    s.statuses.insert("count-rows".into(), "succeeded".into());
    s.statuses.insert("probe".into(), "skipped".into());
    s
}

#[test]
fn conditions_read_references_with_dots_and_dashes() {
    let s = scope();
    for (text, value) in [
        ("params.full == true", true),
        ("params.full", true),
        ("!params.full", false),
        ("params.rows > 100 && params.ratio < 1", true),
        ("params.rows >= 200.5", false),
        (r#"params.mode == "fast""#, true),
        (r#""params.full" == "params.full""#, true),
        ("steps.count-rows.output.count > 5", true),
        ("steps.count-rows.output.ok", true),
        (r#"steps.count-rows.status == "succeeded""#, true),
        (r#"item.region != "eu" || wave == 3"#, true),
        (
            r#"steps.probe.status == "succeeded" && steps.probe.output.n > 0"#,
            false,
        ),
    ] {
        assert_eq!(eval(text, &s), Ok(value), "{text}");
    }
}

#[test]
fn references_are_listed_with_their_offsets() {
    assert_eq!(
        check(r#"params.a == "item" && steps.s-1.output.n > wave"#).unwrap(),
        vec![
            (0, Ref::Param("a".into())),
            (
                22,
                Ref::Output {
                    step: "s-1".into(),
                    path: vec!["n".into()]
                }
            ),
            (43, Ref::Wave),
        ]
    );
}

#[test]
fn errors_name_the_types_and_the_place() {
    let s = scope();
    let fail = |text: &str| eval(text, &s).unwrap_err();
    assert_eq!(
        fail(r#"params.full == "true""#),
        ExprError::Mismatch {
            operator: "==",
            left: "boolean",
            right: "string"
        }
    );
    assert_eq!(
        fail(r#"params.full == "true""#).to_string(),
        "compares boolean with string (`==`)"
    );
    assert_eq!(
        fail("params.rows"),
        ExprError::NotBoolean { found: "integer" }
    );
    assert_eq!(
        fail("params.rows > 1 && steps.gone.output.n == 1"),
        ExprError::Missing {
            at: 19,
            missing: Missing::Output("gone".into())
        }
    );
    assert_eq!(
        fail("x == 1"),
        ExprError::UnknownName {
            at: 0,
            name: "x".into()
        }
    );
    assert_eq!(
        fail("1 == 1 && params.a.b"),
        ExprError::UnknownName {
            at: 10,
            name: "params.a.b".into()
        }
    );
    let e = fail("params.rows ==");
    assert_eq!(
        e.to_string(),
        "is not an expression: `==` takes 2 operand(s), given 1"
    );
    let e = fail("params.rows = 3");
    assert_eq!(e.to_string(), "is not an expression: it assigns");
    assert!(matches!(
        fail("params.rows && true"),
        ExprError::Eval { .. }
    ));
}
