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
        "is not an expression at byte 14: it ends early: an operand is missing"
    );
    let e = fail("params.rows = 3");
    assert_eq!(
        e.to_string(),
        "is not an expression at byte 12: `=` assigns: a condition compares (`==`)"
    );
    assert!(matches!(
        fail("params.rows && true"),
        ExprError::Eval { .. }
    ));
}

#[test]
fn a_text_that_is_not_an_expression_is_located_at_its_culprit() {
    for (text, at, message) in [
        ("params.rows > ", 14, "it ends early: an operand is missing"),
        ("!", 1, "it ends early: an operand is missing"),
        (
            "params.rows > (2 +",
            18,
            "it ends early: an operand is missing",
        ),
        ("params.rows >> 3", 12, "`>>` cannot come here"),
        ("steps.a-b.output.n === 2", 19, "`===` cannot come here"),
        ("params.rows > 1 &&& true", 16, "`&&&` cannot come here"),
        ("params.rows 3", 12, "`3` cannot come here"),
        ("params.rows ! 2", 12, "`!` cannot come here"),
        ("(params.rows > 2)) || true", 17, "`)` closes nothing"),
        ("((params.rows > 2)", 0, "`(` is not closed"),
        (r#"params.mode == ")(" && (true"#, 23, "`(` is not closed"),
        (r#"params.mode == "fast"#, 15, "the string is not closed"),
        (
            "item.n -= 1",
            7,
            "`-=` assigns: a condition compares (`==`)",
        ),
    ] {
        let e = check(text).unwrap_err();
        let want = ExprError::Parse {
            at,
            message: message.into(),
        };
        assert_eq!(e, want, "{text}");
        assert_eq!(
            e.to_string(),
            format!("is not an expression at byte {at}: {message}")
        );
        assert_eq!(format!("{e:#}"), format!("is not an expression: {message}"));
    }
}

#[test]
fn an_unknown_name_is_located_where_it_stands_not_where_its_text_first_appears() {
    assert_eq!(
        check("params.x == 1 && x"),
        Err(ExprError::UnknownName {
            at: 17,
            name: "x".into()
        })
    );
    assert_eq!(
        check(r#"steps.a-b.output == "x" || x"#),
        Err(ExprError::UnknownName {
            at: 27,
            name: "x".into()
        })
    );
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

proptest::proptest! {
    /// Whatever the text, a parse error is placed on a character of it or at its end.
    #[test]
    fn a_parse_error_is_placed_within_the_text(
        text in r#"(params\.n|steps\.a-b\.output|item|[ ()"!=<>&|+,;x1é]){0,12}"#,
    ) {
        if let Err(ExprError::Parse { at, .. }) = check(&text) {
            proptest::prop_assert!(text.is_char_boundary(at), "{text:?} at {at}");
        }
    }

    /// A valid condition with a `>>` put between two of its tokens is refused at that `>>`.
    #[test]
    fn a_bad_operator_put_into_a_condition_is_found_where_it_was_put(
        cut in 0usize..6,
    ) {
        let words = ["params.n", ">", "1", "&&", "item.a", "==", "wave"];
        let before = words[..=cut].join(" ");
        let text = format!("{before} >> {}", words[cut + 1..].join(" "));
        let at = before.len() + 1;
        let e = check(&text);
        proptest::prop_assert!(
            matches!(&e, Err(ExprError::Parse { at: found, .. }) if *found == at),
            "{text}: {e:?}"
        );
    }
}
