//! What `${...}` and a condition's identifiers may name, read from their dotted text.

use std::fmt;

/// A value a template or a condition refers to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ref {
    /// `params.NAME`: an argument, or a secret.
    Param(String),
    /// `run.id`.
    RunId,
    /// `steps.STEP.output` (`path` empty: the whole output as text) or
    /// `steps.STEP.output.a.b` (a field of its JSON output).
    Output {
        /// The step.
        step: String,
        /// The fields walked, in order (a number indexes a list).
        path: Vec<String>,
    },
    /// `steps.STEP.status`: how the step ended (`succeeded`, `skipped`, `failed`, ...).
    Status {
        /// The step.
        step: String,
    },
    /// `item` (`path` empty) or `item.a.b`: the item of a step a `for_each` made.
    Item(Vec<String>),
    /// `wave`: the wave, from 1, of a step a `for_each` made.
    Wave,
}

impl Ref {
    /// Reads a dotted reference: `params.x`, `run.id`, `steps.s.output.a`, `steps.s.status`,
    /// `item.f`, `wave`. A step's name runs up to its `.output` or `.status`.
    pub fn parse(text: &str) -> Option<Ref> {
        let (root, rest) = match text.split_once('.') {
            Some((root, rest)) => (root, Some(rest)),
            None => (text, None),
        };
        match (root, rest) {
            ("params", Some(name)) if !name.is_empty() && !name.contains('.') => {
                Some(Ref::Param(name.to_owned()))
            }
            ("run", Some("id")) => Some(Ref::RunId),
            ("item", None) => Some(Ref::Item(Vec::new())),
            ("item", Some(path)) => fields(path).map(Ref::Item),
            ("wave", None) => Some(Ref::Wave),
            ("steps", Some(rest)) => step_ref(rest),
            _ => None,
        }
    }
}

/// `STEP.output[.path]` or `STEP.status`: the first `.output` ending the text or followed
/// by a field ends the step's name (`s.output.status` is the field `status` of `s`'s output).
fn step_ref(rest: &str) -> Option<Ref> {
    let output = rest.match_indices(".output").map(|(i, _)| i).find(|&i| {
        let after = &rest[i + ".output".len()..];
        after.is_empty() || after.starts_with('.')
    });
    let (step, reference) = match output {
        Some(i) => {
            let after = &rest[i + ".output".len()..];
            let path = match after.strip_prefix('.') {
                Some(path) => fields(path)?,
                None => Vec::new(),
            };
            let step = rest[..i].to_owned();
            (i, Ref::Output { step, path })
        }
        None => {
            let step = rest.strip_suffix(".status")?;
            (
                step.len(),
                Ref::Status {
                    step: step.to_owned(),
                },
            )
        }
    };
    (step > 0).then_some(reference)
}

/// `a.b.c` as its non-empty fields.
fn fields(path: &str) -> Option<Vec<String>> {
    let fields: Vec<String> = path.split('.').map(str::to_owned).collect();
    fields.iter().all(|f| !f.is_empty()).then_some(fields)
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dotted = |path: &[String]| path.iter().map(|p| format!(".{p}")).collect::<String>();
        match self {
            Ref::Param(name) => write!(f, "params.{name}"),
            Ref::RunId => write!(f, "run.id"),
            Ref::Output { step, path } => write!(f, "steps.{step}.output{}", dotted(path)),
            Ref::Status { step } => write!(f, "steps.{step}.status"),
            Ref::Item(path) => write!(f, "item{}", dotted(path)),
            Ref::Wave => write!(f, "wave"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_read_back_as_written() {
        for text in [
            "params.date",
            "run.id",
            "steps.discover.output",
            "steps.discover.output.partitions.0",
            "steps.a.b.output.x",
            "steps.s.output.status",
            "steps.s.status",
            "steps.drain[host-00].status",
            "item",
            "item.host",
            "wave",
        ] {
            let r = Ref::parse(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(r.to_string(), text);
        }
        for text in [
            "params",
            "params.",
            "params.a.b",
            "run.date",
            "steps.s",
            "steps..output",
            "steps..status",
            "steps.s.outputs",
            "steps.s.output.",
            "item..x",
            "wave.1",
            "env.HOME",
        ] {
            assert_eq!(Ref::parse(text), None, "{text}");
        }
    }
}
