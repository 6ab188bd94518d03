//! An expanded definition drawn: a text summary (steps per declaration, by wave), Graphviz
//! `dot` and a Mermaid flowchart. Deterministic: the steps in definition order, each
//! step's dependencies in its own order.

use apollo11_core::{ItemSource, StepSpec, WorkflowSpec};
use std::fmt::Write;

/// A summary: the workflow's name and size, then one entry per declaration in order: a
/// plain step's name; for a `for_each`'s steps their count, first and last, by wave; for a
/// `for_each` over an output, where its items will come from.
pub fn graph_text(spec: &WorkflowSpec) -> String {
    let groups = declarations(&spec.steps);
    let mut out = format!(
        "{}: {} steps from {} declarations\n",
        spec.name,
        spec.steps.len(),
        groups.len()
    );
    for (declaration, steps) in groups {
        match steps {
            [one] if one.origin.is_none() => {
                let _ = writeln!(out, "{}{}", one.name, run_time(one));
            }
            _ => write_group(&mut out, declaration, steps),
        }
    }
    out
}

/// ` (for_each over steps.S.output.P, at run time)` for a template step, else nothing.
fn run_time(step: &StepSpec) -> String {
    match step.for_each.as_ref().map(|f| &f.items) {
        Some(ItemSource::Output { step: source, path }) => {
            let dotted = if path.is_empty() {
                String::new()
            } else {
                format!(".{path}")
            };
            format!(" (for_each over steps.{source}.output{dotted}, at run time)")
        }
        _ => String::new(),
    }
}

/// A declaration's steps: their count, then per wave (or all together) first … last.
fn write_group(out: &mut String, declaration: &str, steps: &[StepSpec]) {
    let waves = chunks(steps, |s| s.origin.as_ref().and_then(|o| o.wave));
    let _ = write!(out, "{declaration}: {} steps", steps.len());
    match waves.as_slice() {
        [(None, all)] => {
            let _ = writeln!(out, ", {}", span(all));
        }
        _ => {
            let _ = writeln!(out, " in {} waves", waves.len());
            for (wave, members) in &waves {
                let wave = wave.map_or_else(|| "-".to_owned(), |w| w.to_string());
                let _ = writeln!(out, "  wave {wave}: {}", span(members));
            }
        }
    }
}

/// `a`, `a, b` or `a … z (N)`.
fn span(steps: &[StepSpec]) -> String {
    match steps {
        [] => String::new(),
        [one] => one.name.clone(),
        [a, b] => format!("{}, {}", a.name, b.name),
        [first, .., last] => format!("{} … {} ({})", first.name, last.name, steps.len()),
    }
}

/// Consecutive steps with the same `key`, grouped.
fn chunks<K: PartialEq>(steps: &[StepSpec], key: impl Fn(&StepSpec) -> K) -> Vec<(K, &[StepSpec])> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=steps.len() {
        if i == steps.len() || key(&steps[i]) != key(&steps[start]) {
            out.push((key(&steps[start]), &steps[start..i]));
            start = i;
        }
    }
    out
}

/// Consecutive steps of one declaration, with its name.
fn declarations(steps: &[StepSpec]) -> Vec<(&str, &[StepSpec])> {
    let declaration = |s: &StepSpec| -> String {
        s.origin
            .as_ref()
            .map_or_else(|| s.name.clone(), |o| o.declaration.clone())
    };
    chunks(steps, declaration)
        .into_iter()
        .map(|(_, group)| {
            let first = &group[0];
            let name = first
                .origin
                .as_ref()
                .map_or(first.name.as_str(), |o| o.declaration.as_str());
            (name, group)
        })
        .collect()
}

/// Graphviz `dot`: one node per step, one edge per dependency (from the dependency), a
/// `for_each` over an output drawn as a folder.
pub fn graph_dot(spec: &WorkflowSpec) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let mut out = format!("digraph {} {{\n  rankdir=LR;\n", quote(&spec.name));
    for step in &spec.steps {
        let shape = if step.for_each.is_some() {
            " [shape=folder]"
        } else {
            ""
        };
        let _ = writeln!(out, "  {}{shape};", quote(&step.name));
    }
    for step in &spec.steps {
        for dep in &step.depends_on {
            let _ = writeln!(out, "  {} -> {};", quote(dep), quote(&step.name));
        }
    }
    out.push_str("}\n");
    out
}

/// A Mermaid flowchart: steps as `s0`, `s1`, ... in definition order, labelled with their
/// names; a `for_each` over an output drawn as a subroutine.
pub fn graph_mermaid(spec: &WorkflowSpec) -> String {
    let label = |s: &str| s.replace('"', "#quot;");
    let mut out = String::from("flowchart LR\n");
    let ids: std::collections::HashMap<&str, usize> = spec
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), i))
        .collect();
    for (i, step) in spec.steps.iter().enumerate() {
        let (open, close) = if step.for_each.is_some() {
            ("[[", "]]")
        } else {
            ("[", "]")
        };
        let _ = writeln!(out, "  s{i}{open}\"{}\"{close}", label(&step.name));
    }
    for (i, step) in spec.steps.iter().enumerate() {
        for dep in step.depends_on.iter().filter_map(|d| ids.get(d.as_str())) {
            let _ = writeln!(out, "  s{dep} --> s{i}");
        }
    }
    out
}
