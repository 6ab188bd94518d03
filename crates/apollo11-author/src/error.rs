//! Why a definition cannot be instantiated, grown or run: each error names the step (the
//! declaration as written) and, when it is about text, the field and a byte offset in it, so
//! a front end can point at the file's line and column.

use crate::{ExprError, Missing, ParamError, TemplateError};
use apollo11_core::{NameError, Value};
use apollo11_dag::DagError;
use std::fmt;

/// What is wrong with a definition, located.
#[derive(Clone, Debug, PartialEq)]
pub enum AuthorError {
    /// The values given at start.
    Param(ParamError),
    /// The graph (declared, or expanded: a name made twice, a cycle through waves).
    Graph(DagError),
    /// A step the definition does not have.
    UnknownStep {
        /// The name.
        step: String,
    },
    /// A `for_each` over a parameter that is not declared.
    UnknownParam {
        /// The declaration.
        step: String,
        /// The parameter.
        param: String,
    },
    /// A `for_each` over a parameter, or an output at run time, that is not a list.
    NotAList {
        /// The declaration.
        step: String,
        /// Where the items were to come from (`params.hosts`, `steps.s.output.a`).
        source: String,
        /// What it is instead.
        found: &'static str,
    },
    /// More items than [`apollo11_core::limits::FOR_EACH_ITEMS_MAX`].
    TooManyItems {
        /// The declaration.
        step: String,
        /// Items given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// An item with no usable key: not an object with the `key` field as a string or a number.
    NoKey {
        /// The declaration.
        step: String,
        /// The item's position, from 1.
        position: usize,
        /// The `key` field looked for.
        key: String,
    },
    /// Two items with the same key, hence the same step name.
    DuplicateKey {
        /// The name both would have.
        name: String,
        /// The first item's position, from 1, and the item.
        first: (usize, Value),
        /// The second item's position, from 1, and the item.
        second: (usize, Value),
    },
    /// A generated step name that is not a valid name.
    BadName {
        /// The declaration.
        step: String,
        /// Why the name is refused.
        error: NameError,
    },
    /// Two `for_each` declarations depending on each other whose keys differ.
    Unpaired {
        /// The declaration depending.
        step: String,
        /// The declaration it depends on.
        dependency: String,
        /// A key one side has and the other lacks.
        key: String,
        /// Which side lacks it: the dependency (true) or the step.
        missing_in_dependency: bool,
    },
    /// A `gate` naming no declaration.
    UnknownGate {
        /// The declaration naming it.
        step: String,
        /// The gate.
        gate: String,
    },
    /// A gate that cannot be one: itself a `for_each`, the gate of two declarations, on a
    /// list known only at run time, or depending on no step of its declaration's items.
    BadGate {
        /// The declaration naming it.
        step: String,
        /// The gate.
        gate: String,
        /// Why.
        problem: String,
    },
    /// A `wave_size` of 0.
    ZeroWaveSize {
        /// The declaration.
        step: String,
    },
    /// The output a `for_each` reads its items from at run time, unreadable.
    Output {
        /// The declaration.
        step: String,
        /// What is wrong with the output.
        missing: Missing,
    },
    /// `grow` on a step that is not a `for_each` over an output, or that already grew.
    NotATemplate {
        /// The step.
        step: String,
        /// Why.
        problem: &'static str,
    },
    /// A `for_each` over the output of a step that is not among its dependencies.
    SourceNotDependency {
        /// The declaration.
        step: String,
        /// The step whose output it reads.
        source: String,
    },
    /// A template in a step's field.
    Template {
        /// The step.
        step: String,
        /// The field (`condition`, or the attribute's name).
        field: String,
        /// What is wrong, and the byte offset in the field's text.
        error: TemplateError,
    },
    /// A step's condition.
    Condition {
        /// The step.
        step: String,
        /// What is wrong.
        error: ExprError,
    },
    /// A reference to a step that is not a (transitive) dependency: its value would not
    /// exist when the step runs.
    NotUpstream {
        /// The step referring.
        step: String,
        /// The field holding the reference.
        field: String,
        /// The byte offset of the reference in the field's text.
        at: usize,
        /// The step referred to.
        target: String,
    },
    /// A reference, by its declaration's name, to a `for_each`'s steps from a step not made
    /// from the same items: which of them is meant?
    ManySteps {
        /// The step referring.
        step: String,
        /// The field holding the reference.
        field: String,
        /// The byte offset of the reference in the field's text.
        at: usize,
        /// The `for_each` declaration referred to.
        target: String,
    },
    /// Two secret parameters whose names give one environment variable.
    SecretVarClash {
        /// The first parameter.
        first: String,
        /// The second.
        second: String,
        /// The variable both would be passed in.
        var: String,
    },
    /// A secret parameter in a condition.
    SecretInCondition {
        /// The step.
        step: String,
        /// The byte offset of the reference in the condition.
        at: usize,
        /// The parameter.
        param: String,
    },
    /// A reference to a parameter the workflow does not declare.
    UndeclaredParam {
        /// The step referring.
        step: String,
        /// The field holding the reference.
        field: String,
        /// The byte offset of the reference in the field's text.
        at: usize,
        /// The parameter.
        param: String,
    },
    /// `item` or `wave` in a step no `for_each` makes (or `wave` without waves).
    NoItemHere {
        /// The step referring.
        step: String,
        /// The field holding the reference.
        field: String,
        /// The byte offset of the reference in the field's text.
        at: usize,
        /// `item` or `wave`.
        what: &'static str,
    },
}

/// The alternate form (`{:#}`) leaves out the byte offsets in a condition or a field's text.
impl fmt::Display for AuthorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthorError::Param(e) => write!(f, "{e}"),
            AuthorError::Graph(e) => write!(f, "{e}"),
            AuthorError::UnknownStep { step } => {
                write!(f, "step `{step}` is not a step of the workflow")
            }
            AuthorError::UnknownParam { step, param } => write!(
                f,
                "step `{step}`: for_each over `params.{param}`, which is not declared"
            ),
            AuthorError::NotAList {
                step,
                source,
                found,
            } => write!(
                f,
                "step `{step}`: for_each over `{source}`, which is {found}, not a list"
            ),
            AuthorError::TooManyItems { step, count, max } => write!(
                f,
                "step `{step}`: for_each over {count} items; at most {max} are allowed"
            ),
            AuthorError::NoKey {
                step,
                position,
                key,
            } => write!(
                f,
                "step `{step}`: item {position} has no field `{key}` holding a string or a \
                 number to name its step"
            ),
            AuthorError::DuplicateKey {
                name,
                first,
                second,
            } => write!(
                f,
                "items {} ({}) and {} ({}) would both make step `{name}`",
                first.0,
                shown(&first.1),
                second.0,
                shown(&second.1)
            ),
            AuthorError::BadName { step, error } => write!(f, "step `{step}`: {error}"),
            AuthorError::Unpaired {
                step,
                dependency,
                key,
                missing_in_dependency,
            } => {
                let (has, lacks) = match missing_in_dependency {
                    true => (step, dependency),
                    false => (dependency, step),
                };
                write!(
                    f,
                    "step `{step}` depends on `{dependency}`, and both are for_each: their \
                     items pair by key, but `{has}` has key `{key}` and `{lacks}` has not"
                )
            }
            AuthorError::UnknownGate { step, gate } => write!(
                f,
                "step `{step}`: gate `{gate}` is not a step of the workflow"
            ),
            AuthorError::BadGate {
                step,
                gate,
                problem,
            } => write!(f, "step `{step}`: gate `{gate}` {problem}"),
            AuthorError::ZeroWaveSize { step } => {
                write!(f, "step `{step}`: a wave_size of 0 makes no wave")
            }
            AuthorError::Output { step, missing } => {
                write!(f, "step `{step}`: for_each: {missing}")
            }
            AuthorError::NotATemplate { step, problem } => write!(f, "step `{step}` {problem}"),
            AuthorError::SourceNotDependency { step, source } => write!(
                f,
                "step `{step}`: for_each over the output of `{source}`, which is not among \
                 its dependencies"
            ),
            AuthorError::Template { step, field, error } => {
                write!(f, "step `{step}`, {field} {error}")
            }
            AuthorError::Condition { step, error } if f.alternate() => {
                write!(f, "step `{step}`, condition {error:#}")
            }
            AuthorError::Condition { step, error } => {
                write!(f, "step `{step}`, condition {error}")
            }
            AuthorError::NotUpstream {
                step,
                field,
                at,
                target,
            } => write!(
                f,
                "step `{step}`, {field}{}: refers to step `{target}`, which is not \
                 among its dependencies (direct or not), so it may not have run",
                at_byte(f, *at)
            ),
            AuthorError::ManySteps {
                step,
                field,
                at,
                target,
            } => write!(
                f,
                "step `{step}`, {field}{}: `{target}` is a for_each, made of one \
                 step per item: name one (`{target}[KEY]`), or read it from a for_each over \
                 the same items",
                at_byte(f, *at)
            ),
            AuthorError::SecretVarClash { first, second, var } => write!(
                f,
                "secret parameters `{first}` and `{second}` would both be passed in `{var}`: \
                 rename one"
            ),
            AuthorError::SecretInCondition { step, at, param } => write!(
                f,
                "step `{step}`, condition{}: parameter `{param}` is a secret, which \
                 a condition cannot read",
                at_byte(f, *at)
            ),
            AuthorError::UndeclaredParam {
                step,
                field,
                at,
                param,
            } => write!(
                f,
                "step `{step}`, {field}{}: parameter `{param}` is not declared",
                at_byte(f, *at)
            ),
            AuthorError::NoItemHere {
                step,
                field,
                at,
                what,
            } => write!(
                f,
                "step `{step}`, {field}{}: `{what}` is only set in a step a \
                 for_each makes{}",
                at_byte(f, *at),
                if *what == "wave" { " in waves" } else { "" }
            ),
        }
    }
}

impl std::error::Error for AuthorError {}

impl From<ParamError> for AuthorError {
    fn from(e: ParamError) -> Self {
        AuthorError::Param(e)
    }
}

impl From<DagError> for AuthorError {
    fn from(e: DagError) -> Self {
        AuthorError::Graph(e)
    }
}

/// ` at byte N`, left out of the alternate form (`{:#}`): a front end that puts an error at
/// its place in the text says where it is better.
fn at_byte(f: &fmt::Formatter<'_>, at: usize) -> String {
    match f.alternate() {
        true => String::new(),
        false => format!(" at byte {at}"),
    }
}

/// An item as a message shows it: its JSON text, cut after 60 characters.
fn shown(item: &Value) -> String {
    let text = item.to_string();
    match text.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}
