use crate::spec::{for_each, list_param, spec, step, waves};
use apollo11_author::{grow, instantiate, item_name};
use apollo11_core::{ItemSource, Value, WorkflowSpec};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A declared definition: a start, a chain of `chain` paired declarations over the list
/// parameter `xs` (the first maybe in waves, maybe gated), a template over the start's
/// output, and an end depending on all of it.
fn declared(chain: usize, wave: Option<u32>, gated: bool) -> WorkflowSpec {
    let mut steps = vec![step("start", &[])];
    for c in 0..chain {
        let name = format!("d{c}");
        let dep = if c == 0 {
            "start".to_owned()
        } else {
            format!("d{}", c - 1)
        };
        let mut d = for_each(&name, &[dep.as_str()], ItemSource::Param("xs".into()));
        if c == 0 {
            if let Some(n) = wave {
                d = waves(d, n, gated.then_some("gate"));
            }
        }
        steps.push(d);
    }
    let last = format!("d{}", chain - 1);
    if gated && wave.is_some() {
        steps.push(step("gate", &[last.as_str()]));
    }
    let source = ItemSource::Output {
        step: "start".into(),
        path: String::new(),
    };
    steps.push(for_each("later", &["start"], source));
    steps.push(step("end", &[last.as_str(), "later"]));
    let mut s = spec(steps);
    s.params = vec![list_param("xs", Value::Array(Vec::new()))];
    s
}

fn items() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec(
        prop_oneof![
            "[a-e]{1,2}".prop_map(Value::from),
            (0u32..20).prop_map(Value::from),
            Just(serde_json::json!({"nested": true})),
        ],
        0..12,
    )
}

proptest! {
    #[test]
    fn instantiate_is_deterministic_and_idempotent(
        xs in items(),
        chain in 1usize..4,
        wave in prop::option::of(1u32..5),
        gated in any::<bool>(),
    ) {
        let s = declared(chain, wave, gated);
        let given = BTreeMap::from([("xs".to_owned(), Value::Array(xs))]);
        let first = instantiate(&s, &given);
        prop_assert_eq!(&first, &instantiate(&s, &given));
        if let Ok(inst) = first {
            prop_assert_eq!(instantiate(&inst, &inst.arguments), Ok(inst));
        }
    }

    #[test]
    fn grown_names_are_stable_and_keep_the_others(xs in items(), found in items()) {
        let s = declared(1, None, false);
        let given = BTreeMap::from([("xs".to_owned(), Value::Array(xs))]);
        let Ok(inst) = instantiate(&s, &given) else { return Ok(()) };
        let Ok(grown) = grow(&inst, "later", &found) else { return Ok(()) };
        prop_assert_eq!(Ok(grown.clone()), grow(&inst, "later", &found));
        let (made, kept): (Vec<_>, Vec<_>) = grown
            .steps
            .iter()
            .partition(|s| s.origin.as_ref().is_some_and(|o| o.declaration == "later"));
        prop_assert_eq!(made.len(), found.len());
        for (s, item) in made.iter().zip(&found) {
            let origin = s.origin.as_ref().unwrap();
            prop_assert_eq!(&origin.item, item);
            prop_assert_eq!(&s.name, &item_name("later", &origin.key));
        }
        let kept: Vec<&str> = kept.iter().map(|s| s.name.as_str()).collect();
        let before: Vec<&str> = inst.steps.iter().map(|s| s.name.as_str()).collect();
        prop_assert_eq!(kept, before);
    }
}
