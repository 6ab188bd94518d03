use crate::spec::{for_each, list, list_param, spec, step, waves};
use apollo11_author::{validate, AuthorError, TemplateField};
use apollo11_core::{ItemSource, ParamKind, ParamSpec, SecretSource, StepSpec, WorkflowSpec};

fn load(s: &mut WorkflowSpec) -> &mut StepSpec {
    &mut s.steps[2]
}
use serde_json::json;

fn field(step: &str, field: &str, text: &str) -> TemplateField {
    TemplateField {
        step: step.into(),
        field: field.into(),
        text: text.into(),
    }
}

fn workflow() -> WorkflowSpec {
    let mut check = step("check", &["discover"]);
    check.condition = Some(r#"steps.discover.status == "succeeded""#.into());
    let mut s = spec(vec![
        step("discover", &[]),
        check,
        for_each("load", &["check"], ItemSource::Param("hosts".into())),
        step("alone", &[]),
        waves(for_each("w", &[], list(&["a"])), 1, Some("gate")),
        step("gate", &["w"]),
    ]);
    s.params = vec![
        list_param("hosts", json!(["h1"])),
        ParamSpec {
            name: "token".into(),
            kind: ParamKind::String,
            default: None,
            required: false,
            description: String::new(),
            secret: Some(SecretSource::Env("T".into())),
        },
    ];
    s
}

#[test]
fn references_to_reachable_steps_and_declared_params_pass() {
    let fields = [
        field(
            "load",
            "run",
            "up ${item} ${steps.discover.output.x} ${params.token}",
        ),
        field("load", "env.RUN", "${run.id}"),
        field("gate", "run", "check ${wave} ${steps.w[a].output}"),
    ];
    validate(&workflow(), &fields).unwrap();
}

#[test]
fn each_unreachable_reference_is_named_with_its_place() {
    let cases = [
        (
            field("alone", "run", "echo ${steps.discover.output}"),
            "step `alone`, run at byte 5: refers to step `discover`, which is not among its \
             dependencies (direct or not), so it may not have run",
        ),
        (
            field("check", "cwd", "/x/${params.nope}"),
            "step `check`, cwd at byte 3: parameter `nope` is not declared",
        ),
        (
            field("check", "run", "echo ${item.host}"),
            "step `check`, run at byte 5: `item` is only set in a step a for_each makes",
        ),
        (
            field("alone", "run", "echo ${wave}"),
            "step `alone`, run at byte 5: `wave` is only set in a step a for_each makes in \
             waves",
        ),
        (
            field("check", "run", "echo ${steps.load.output}"),
            "step `check`, run at byte 5: refers to step `load`, which is not among its \
             dependencies (direct or not), so it may not have run",
        ),
        (
            field("gate", "run", "echo ${steps.w.status}"),
            "step `gate`, run at byte 5: `w` is a for_each, made of one step per item: name \
             one (`w[KEY]`), or read it from a for_each over the same items",
        ),
        (
            field("check", "run", "echo ${oops"),
            "step `check`, run at byte 5: `${` is not closed by `}`",
        ),
        (
            field("ghost", "run", "true"),
            "step `ghost` is not a step of the workflow",
        ),
    ];
    for (f, text) in cases {
        let e = validate(&workflow(), &[f]).unwrap_err();
        assert_eq!(e.to_string(), text);
    }
}

#[test]
fn declarations_that_cannot_hold_are_refused() {
    let with = |edit: &dyn Fn(&mut WorkflowSpec)| {
        let mut s = workflow();
        edit(&mut s);
        validate(&s, &[]).unwrap_err()
    };
    let e = with(&|s| load(s).condition = Some("steps.alone.output.ok".into()));
    assert_eq!(
        e,
        AuthorError::NotUpstream {
            step: "load".into(),
            field: "condition".into(),
            at: 0,
            target: "alone".into()
        }
    );
    let e = with(&|s| load(s).condition = Some(r#"item == "a" || params.token == "x""#.into()));
    assert_eq!(
        e.to_string(),
        "step `load`, condition at byte 15: parameter `token` is a secret, which a condition \
         cannot read"
    );
    let e = with(&|s| load(s).condition = Some("params.hosts ==".into()));
    assert!(matches!(e, AuthorError::Condition { .. }), "{e}");
    let e = with(&|s| load(s).condition = Some(r#"item == "a" || params.hosts > 1"#.into()));
    assert_eq!(
        e.to_string(),
        "step `load`, condition compares list with integer (`>`)"
    );
    let AuthorError::Condition { error, .. } = e else {
        panic!("{e}");
    };
    assert_eq!(
        error,
        apollo11_author::ExprError::Mismatch {
            at: Some(15),
            operator: ">",
            left: "list",
            right: "integer"
        }
    );
    let e = with(&|s| load(s).for_each.as_mut().unwrap().items = ItemSource::Param("token".into()));
    assert_eq!(
        e.to_string(),
        "step `load`: for_each over `params.token`, which is a secret, not a list"
    );
    let e = with(&|s| {
        let mut twin = s.params[1].clone();
        twin.name = "TOKEN".into();
        s.params.push(twin);
    });
    assert_eq!(
        e.to_string(),
        "secret parameters `token` and `TOKEN` would both be passed in \
         `APOLLO11_SECRET_TOKEN`: rename one"
    );
    let e = with(&|s| s.params[0].kind = ParamKind::String);
    assert_eq!(
        e.to_string(),
        "parameter `hosts` must be a string, not list"
    );
    let e = with(&|s| {
        load(s).for_each.as_mut().unwrap().items = ItemSource::Output {
            step: "alone".into(),
            path: String::new(),
        }
    });
    assert_eq!(
        e.to_string(),
        "step `load`: for_each over the output of `alone`, which is not among its dependencies"
    );
    let e = with(&|s| s.steps[4].for_each.as_mut().unwrap().gate = Some("nope".into()));
    assert_eq!(
        e.to_string(),
        "step `w`: gate `nope` is not a step of the workflow"
    );
    let e = with(&|s| s.steps[0].depends_on = vec!["gate".into(), "check".into()]);
    assert!(matches!(e, AuthorError::Graph(_)), "{e}");
}

#[test]
fn a_gate_may_have_a_trigger_and_a_condition() {
    let mut s = workflow();
    s.steps[5].trigger = apollo11_core::TriggerRule::AllDone;
    s.steps[5].condition = Some("wave < 3".into());
    validate(&s, &[]).unwrap();
    let mut s = spec(vec![step("only", &[])]);
    s.steps[0].condition = Some("item.x == 1".into());
    assert_eq!(
        validate(&s, &[]).unwrap_err().to_string(),
        "step `only`, condition at byte 0: `item` is only set in a step a for_each makes"
    );
}
