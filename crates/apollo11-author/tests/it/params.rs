use apollo11_author::{bind, parse_assignment, parse_cli, ParamError};
use apollo11_core::limits::PARAM_VALUE_BYTES_MAX;
use apollo11_core::{ParamKind, ParamSpec, SecretSource, Value};
use serde_json::json;
use std::collections::BTreeMap;

fn decl(name: &str, kind: ParamKind) -> ParamSpec {
    ParamSpec {
        name: name.to_owned(),
        kind,
        default: None,
        required: false,
        description: String::new(),
        secret: None,
    }
}

fn decls() -> Vec<ParamSpec> {
    vec![
        ParamSpec {
            required: true,
            ..decl("date", ParamKind::String)
        },
        ParamSpec {
            default: Some(json!(200_000)),
            ..decl("rows", ParamKind::Integer)
        },
        ParamSpec {
            default: Some(json!(["host-00", "host-01"])),
            ..decl("hosts", ParamKind::List)
        },
        ParamSpec {
            secret: Some(SecretSource::Env("API_TOKEN".into())),
            ..decl("token", ParamKind::String)
        },
        decl("ratio", ParamKind::Number),
    ]
}

fn given(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

#[test]
fn defaults_fill_in_and_secrets_stay_out() {
    let args = bind(&decls(), &given(&[("date", json!("2026-01-02"))])).unwrap();
    assert_eq!(
        args,
        given(&[
            ("date", json!("2026-01-02")),
            ("rows", json!(200_000)),
            ("hosts", json!(["host-00", "host-01"])),
        ])
    );
    let args = bind(
        &decls(),
        &given(&[
            ("date", json!("d")),
            ("rows", json!(5)),
            ("ratio", json!(2)),
        ]),
    )
    .unwrap();
    assert_eq!(args["rows"], json!(5));
    assert_eq!(args["ratio"], json!(2));
}

#[test]
fn each_wrong_argument_is_named() {
    let d = decls();
    let date = ("date", json!("d"));
    let cases = [
        (
            given(&[date.clone(), ("colour", json!("red"))]),
            ParamError::Unknown {
                name: "colour".into(),
            },
            "parameter `colour` is not declared by the workflow",
        ),
        (
            given(&[]),
            ParamError::Missing {
                name: "date".into(),
            },
            "parameter `date` is required and was given no value",
        ),
        (
            given(&[date.clone(), ("rows", json!("many"))]),
            ParamError::WrongType {
                name: "rows".into(),
                expected: ParamKind::Integer,
                found: "string",
            },
            "parameter `rows` must be an integer, not string",
        ),
        (
            given(&[date.clone(), ("rows", json!(1.5))]),
            ParamError::WrongType {
                name: "rows".into(),
                expected: ParamKind::Integer,
                found: "number",
            },
            "parameter `rows` must be an integer, not number",
        ),
        (
            given(&[date.clone(), ("token", json!("s3cret"))]),
            ParamError::SecretGiven {
                name: "token".into(),
            },
            "parameter `token` is a secret: its value is read from its source at each \
             attempt and cannot be given at start",
        ),
    ];
    for (given, error, text) in cases {
        let e = bind(&d, &given).unwrap_err();
        assert_eq!(e, error);
        assert_eq!(e.to_string(), text);
    }
}

#[test]
fn values_over_the_limit_are_refused_with_their_size() {
    let big = "x".repeat(PARAM_VALUE_BYTES_MAX as usize - 1);
    let just = bind(&decls(), &given(&[("date", json!(big[1..]))]));
    assert!(just.is_ok(), "{just:?}");
    let e = bind(&decls(), &given(&[("date", json!(big))])).unwrap_err();
    let bytes = PARAM_VALUE_BYTES_MAX as usize + 1;
    assert_eq!(
        e,
        ParamError::TooLarge {
            name: "date".into(),
            bytes
        }
    );
    assert!(e.to_string().contains(&format!("{bytes} bytes")), "{e}");
}

#[test]
fn a_default_of_the_wrong_kind_is_refused() {
    let d = vec![ParamSpec {
        default: Some(json!("eight")),
        ..decl("waves", ParamKind::Integer)
    }];
    let e = bind(&d, &BTreeMap::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "parameter `waves` must be an integer, not string"
    );
}

#[test]
fn command_line_values_are_read_by_kind() {
    let read = |kind, text: &str| parse_cli(&decl("p", kind), text);
    assert_eq!(read(ParamKind::String, " x; y ").unwrap(), json!(" x; y "));
    assert_eq!(read(ParamKind::Integer, "42").unwrap(), json!(42));
    assert_eq!(read(ParamKind::Number, "42").unwrap(), json!(42));
    assert_eq!(read(ParamKind::Number, "0.5").unwrap(), json!(0.5));
    assert_eq!(read(ParamKind::Boolean, "true").unwrap(), json!(true));
    assert_eq!(
        read(ParamKind::List, r#"["a",1]"#).unwrap(),
        json!(["a", 1])
    );
    assert_eq!(
        read(ParamKind::Object, r#"{"a":1}"#).unwrap(),
        json!({"a": 1})
    );
    let e = read(ParamKind::Integer, "4.5").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("parameter `p` must be an integer: `4.5`"),
        "{e}"
    );
    for (kind, text) in [
        (ParamKind::Number, "NaN"),
        (ParamKind::Number, "inf"),
        (ParamKind::Boolean, "yes"),
        (ParamKind::List, "[1,"),
    ] {
        assert!(
            matches!(read(kind, text), Err(ParamError::Unreadable { .. })),
            "{text}"
        );
    }
    assert_eq!(
        read(ParamKind::List, "{}").unwrap_err().to_string(),
        "parameter `p` must be a list, not object"
    );
}

#[test]
fn assignments_name_the_parameter() {
    let d = decls();
    assert_eq!(
        parse_assignment(&d, "rows=7").unwrap(),
        ("rows".into(), json!(7))
    );
    assert_eq!(
        parse_assignment(&d, "date=a=b").unwrap(),
        ("date".into(), json!("a=b"))
    );
    assert_eq!(
        parse_assignment(&d, "nope=1").unwrap_err(),
        ParamError::Unknown {
            name: "nope".into()
        }
    );
    assert_eq!(
        parse_assignment(&d, "token=x").unwrap_err(),
        ParamError::SecretGiven {
            name: "token".into()
        }
    );
    assert_eq!(
        parse_assignment(&d, "rows").unwrap_err().to_string(),
        "`--param rows`: expected NAME=VALUE"
    );
}
