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
            at: Some(0),
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

#[test]
fn an_unmatched_parenthesis_is_found_where_it_is() {
    let s = scope();
    for (text, at) in [
        ("params.rows > (2 +", 14),
        ("(params.rows > 2)) || true", 17),
        ("((params.rows > 2)", 0),
        (r#"params.mode == ")(" && (true"#, 23),
    ] {
        let e = eval(text, &s).unwrap_err();
        let ExprError::Parse { at: found, .. } = &e else {
            panic!("{text}: {e:?}");
        };
        assert_eq!(*found, Some(at), "{text}: {e}");
        assert!(e
            .to_string()
            .starts_with(&format!("is not an expression at byte {at}: ")));
        assert!(
            format!("{e:#}").starts_with("is not an expression: "),
            "{e:#}"
        );
    }
}

#[test]
fn a_mismatch_is_located_at_its_first_reference_and_the_alternate_form_has_no_bytes() {
    let s = scope();
    let e = eval(r#"true && "fast" == params.rows"#, &s).unwrap_err();
    assert_eq!(
        e,
        ExprError::Mismatch {
            at: Some(18),
            operator: "==",
            left: "string",
            right: "integer"
        }
    );
    let e = eval("x == 1", &s).unwrap_err();
    assert_eq!(format!("{e:#}"), e.to_string().replace("at byte 0: ", ""));
}

#[test]
fn comparisons_of_known_types_are_checked_before_any_value() {
    use apollo11_author::Condition;
    use apollo11_core::ParamKind;
    let kinds = |r: &Ref| match r {
        Ref::Param(name) if name == "n" => Some(ParamKind::Integer),
        Ref::Param(name) if name == "ratio" => Some(ParamKind::Number),
        Ref::Param(name) if name == "doc" => Some(ParamKind::Object),
        _ => None,
    };
    let check = |text: &str| Condition::parse(text).unwrap().check_types(kinds);
    assert_eq!(
        check(r#"params.full || (params.n > "x")"#),
        Err(ExprError::Mismatch {
            at: Some(16),
            operator: ">",
            left: "integer",
            right: "string"
        })
    );
    assert!(
        check("(params.n > 1) == 3").is_err(),
        "a comparison is a boolean"
    );
    for fine in [
        "params.n > 1.5 && params.ratio < params.n",
        r#"steps.s.output.n > "x""#,
        r#"params.doc == "{}""#,
        r#"params.other == "x""#,
        "params.n + 1 > 2",
    ] {
        assert_eq!(check(fine), Ok(()), "{fine}");
    }
}
