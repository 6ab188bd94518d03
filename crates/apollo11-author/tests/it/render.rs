use crate::spec::{for_each, list, spec, step, waves};
use apollo11_author::{graph_dot, graph_mermaid, graph_text, instantiate};
use apollo11_core::{ItemSource, WorkflowSpec};
use std::collections::BTreeMap;

fn small() -> WorkflowSpec {
    let mut s = spec(vec![
        step("pre", &[]),
        waves(
            for_each("up", &["pre"], list(&["a", "b", "c"])),
            2,
            Some("gate"),
        ),
        step("gate", &["up"]),
        for_each(
            "load",
            &["gate"],
            ItemSource::Output {
                step: "pre".into(),
                path: "parts".into(),
            },
        ),
        for_each("two", &["pre"], list(&["x", "y"])),
    ]);
    s.name = "small \"one\"".into();
    instantiate(&s, &BTreeMap::new()).unwrap()
}

#[test]
fn text_sums_up_declarations_and_waves() {
    assert_eq!(
        graph_text(&small()),
        "small \"one\": 9 steps from 5 declarations\n\
         pre\n\
         up: 3 steps in 2 waves\n  \
           wave 1: up[a], up[b]\n  \
           wave 2: up[c]\n\
         gate: 2 steps in 2 waves\n  \
           wave 1: gate[wave-1]\n  \
           wave 2: gate[wave-2]\n\
         load (for_each over steps.pre.output.parts, at run time)\n\
         two: 2 steps, two[x], two[y]\n"
    );
}

#[test]
fn dot_draws_every_step_and_dependency() {
    assert_eq!(
        graph_dot(&small()),
        "digraph \"small \\\"one\\\"\" {\n  rankdir=LR;\n  \"pre\";\n  \"up[a]\";\n  \
         \"up[b]\";\n  \"up[c]\";\n  \"gate[wave-1]\";\n  \"gate[wave-2]\";\n  \
         \"load\" [shape=folder];\n  \"two[x]\";\n  \"two[y]\";\n  \"pre\" -> \"up[a]\";\n  \
         \"pre\" -> \"up[b]\";\n  \"pre\" -> \"up[c]\";\n  \"gate[wave-1]\" -> \"up[c]\";\n  \
         \"up[a]\" -> \"gate[wave-1]\";\n  \"up[b]\" -> \"gate[wave-1]\";\n  \
         \"up[c]\" -> \"gate[wave-2]\";\n  \"gate[wave-1]\" -> \"load\";\n  \
         \"gate[wave-2]\" -> \"load\";\n  \"pre\" -> \"two[x]\";\n  \"pre\" -> \"two[y]\";\n}\n"
    );
}

#[test]
fn mermaid_numbers_steps_and_labels_them() {
    let mut s = spec(vec![step("a \"q\"", &[]), step("b", &["a \"q\""])]);
    s.steps[1].for_each = Some(apollo11_core::ForEach {
        items: ItemSource::Output {
            step: "a \"q\"".into(),
            path: String::new(),
        },
        wave_size: None,
        gate: None,
        key: None,
    });
    assert_eq!(
        graph_mermaid(&s),
        "flowchart LR\n  s0[\"a #quot;q#quot;\"]\n  s1[[\"b\"]]\n  s0 --> s1\n"
    );
    assert_eq!(graph_mermaid(&small()), graph_mermaid(&small()));
}
