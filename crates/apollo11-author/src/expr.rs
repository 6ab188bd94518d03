//! Conditions (`when`): expressions of the `evalexpr` language over the references a
//! template may use, written bare: `params.full == true`, `steps.check.output.count > 0`,
//! `steps.probe.status == "failed"`, `item.region != "eu"`. References are found in the text
//! first (a step's name may hold `-` or `[`, which the language would read as operators) and
//! handed to the language as plain variables, so every error can say where it is.

use crate::rewrite::{extract, var, VAR_PREFIX};
use crate::scope::Missing;
use crate::syntax::{culprit, tree};
use crate::{Ref, Scope};
use apollo11_core::{ParamKind, Value};
use evalexpr::{
    ContextWithMutableVariables, EvalexprError, HashMapContext, Node, Operator, Value as EValue,
};
use std::fmt;

/// A condition, parsed: its text, its references and where they are, its expression tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    refs: Vec<(usize, Ref)>,
    tree: Node,
}

/// Why a condition cannot be read or evaluated.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprError {
    /// The text is not an expression.
    Parse {
        /// The byte offset of the culprit in the text: the first token after which it can
        /// be the start of no expression, its end when it stops short, or a parenthesis
        /// never closed.
        at: usize,
        /// What is wrong there.
        message: String,
    },
    /// A name that is not a reference (`params.X`, `run.id`, `steps.S.output[.F...]`,
    /// `steps.S.status`, `item[.F...]`, `wave`) nor a function of the language.
    UnknownName {
        /// The byte offset of the name in the text.
        at: usize,
        /// The name.
        name: String,
    },
    /// A reference with no value at this attempt.
    Missing {
        /// The byte offset of the reference in the text.
        at: usize,
        /// What is not there.
        missing: Missing,
    },
    /// Two values compared that are of different types.
    Mismatch {
        /// The byte offset of the comparison's first reference in the text, if it has one.
        at: Option<usize>,
        /// The operator (`==`, `<`, ...).
        operator: &'static str,
        /// The left value's type.
        left: &'static str,
        /// The right value's type.
        right: &'static str,
    },
    /// The expression's value is not a boolean.
    NotBoolean {
        /// Its type.
        found: &'static str,
    },
    /// Evaluation failed otherwise (an operator given the wrong type, a division by zero).
    Eval {
        /// The language's message.
        message: String,
    },
}

/// The alternate form (`{:#}`) leaves the byte offsets out: a front end that puts the error
/// at its place in the text says where it is better.
impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let byte = |at: &usize| match f.alternate() {
            true => String::new(),
            false => format!("at byte {at}: "),
        };
        match self {
            ExprError::Parse { at, message } => match f.alternate() {
                true => write!(f, "is not an expression: {message}"),
                false => write!(f, "is not an expression at byte {at}: {message}"),
            },
            ExprError::UnknownName { at, name } => write!(
                f,
                "{}`{name}` names nothing: expected params.NAME, run.id, \
                 steps.STEP.output[.FIELD...], steps.STEP.status, item[.FIELD...] or wave",
                byte(at)
            ),
            ExprError::Missing { at, missing } => write!(f, "{}{missing}", byte(at)),
            ExprError::Mismatch {
                operator,
                left,
                right,
                ..
            } => write!(f, "compares {left} with {right} (`{operator}`)"),
            ExprError::NotBoolean { found } => write!(f, "is {found}, not a boolean"),
            ExprError::Eval { message } => write!(f, "cannot be evaluated: {message}"),
        }
    }
}

impl std::error::Error for ExprError {}

impl Condition {
    /// Reads a condition: its references, then the expression.
    ///
    /// # Errors
    ///
    /// [`ExprError::Parse`] when the text is not an expression; [`ExprError::UnknownName`]
    /// at the first name that is neither a reference nor a function.
    pub fn parse(text: &str) -> Result<Condition, ExprError> {
        let rewritten = extract(text)?;
        let tree = tree(&rewritten.text).map_err(|_| {
            let (at, message) = culprit(&rewritten.text);
            ExprError::Parse {
                at: rewritten.original(at),
                message,
            }
        })?;
        if let Some(name) = tree
            .iter_variable_identifiers()
            .find(|name| !name.starts_with(VAR_PREFIX))
        {
            return Err(ExprError::UnknownName {
                at: rewritten.original(rewritten.name_at(name)),
                name: name.to_owned(),
            });
        }
        Ok(Condition {
            refs: rewritten.refs,
            tree,
        })
    }

    /// Checks the comparisons whose operands' types are known before the run: literals and
    /// the parameters `kind` gives the declared kind of (an output's type is known only
    /// once it is there).
    ///
    /// # Errors
    ///
    /// [`ExprError::Mismatch`] at the first comparison of values of two types, located at
    /// its first reference.
    pub fn check_types(&self, kind: impl Fn(&Ref) -> Option<ParamKind>) -> Result<(), ExprError> {
        static_type(&self.tree, &self.refs, &kind).map(|_| ())
    }

    /// The references in order, each with its byte offset in the text.
    pub fn references(&self) -> impl Iterator<Item = (usize, &Ref)> {
        self.refs.iter().map(|(at, r)| (*at, r))
    }

    /// The condition's value at an attempt. `&&` and `||` stop at their first operand when
    /// it decides, so `steps.s.status == "succeeded" && steps.s.output.n > 0` reads no
    /// output of a step that did not succeed.
    ///
    /// # Errors
    ///
    /// [`ExprError`]: a reference read with no value, values of two types compared, a
    /// value that is not a boolean, or the language's own error.
    pub fn eval(&self, scope: &Scope) -> Result<bool, ExprError> {
        let mut context = HashMapContext::new();
        for (i, (_, reference)) in self.refs.iter().enumerate() {
            if let Ok(value) = scope.value(reference) {
                context
                    .set_value(var(i), to_evalexpr(&value))
                    .map_err(|e| eval_error(e, self, scope))?;
            }
        }
        match evaluate(&self.tree, &context, &self.refs).map_err(|e| self.located(e, scope))? {
            EValue::Boolean(b) => Ok(b),
            other => Err(ExprError::NotBoolean {
                found: type_name(&other),
            }),
        }
    }

    /// An evaluation error, with a missing reference located and explained.
    fn located(&self, e: Failure, scope: &Scope) -> ExprError {
        match e {
            Failure::Expr(e) => e,
            Failure::Language(e) => eval_error(e, self, scope),
        }
    }
}

/// The language's error; for a variable it did not find, the reference's own reason.
fn eval_error(e: EvalexprError, condition: &Condition, scope: &Scope) -> ExprError {
    if let EvalexprError::VariableIdentifierNotFound(name) = &e {
        let found = condition
            .refs
            .iter()
            .enumerate()
            .find(|(i, _)| var(*i) == *name);
        if let Some((_, (at, reference))) = found {
            if let Err(missing) = scope.value(reference) {
                return ExprError::Missing { at: *at, missing };
            }
        }
    }
    ExprError::Eval {
        message: e.to_string(),
    }
}

enum Failure {
    Expr(ExprError),
    Language(EvalexprError),
}

impl From<EvalexprError> for Failure {
    fn from(e: EvalexprError) -> Self {
        Failure::Language(e)
    }
}

/// Evaluates `node`: `&&`, `||` and `!` here (short-circuiting), comparisons with their
/// operands' types checked, the rest by the language. `refs` locate a mismatch.
fn evaluate(
    node: &Node,
    context: &HashMapContext,
    refs: &[(usize, Ref)],
) -> Result<EValue, Failure> {
    let children = node.children();
    match node.operator() {
        Operator::RootNode if children.len() == 1 => evaluate(&children[0], context, refs),
        Operator::And | Operator::Or if children.len() == 2 => {
            let stop = matches!(node.operator(), Operator::Or);
            if boolean(&children[0], context, refs)? == stop {
                return Ok(EValue::Boolean(stop));
            }
            Ok(EValue::Boolean(boolean(&children[1], context, refs)?))
        }
        Operator::Not if children.len() == 1 => {
            Ok(EValue::Boolean(!boolean(&children[0], context, refs)?))
        }
        op if children.len() == 2 && comparison(op).is_some() => {
            let left = evaluate(&children[0], context, refs)?;
            let right = evaluate(&children[1], context, refs)?;
            let types = (Some(known(&left)), Some(known(&right)));
            compared(node, types, refs).map_err(Failure::Expr)?;
            Ok(node.eval_with_context(context)?)
        }
        _ => Ok(node.eval_with_context(context)?),
    }
}

/// A type as comparisons see it: its class (values of one class compare with each other)
/// and its name in messages.
type Known = (u8, &'static str);

fn known(value: &EValue) -> Known {
    (type_class(value), type_name(value))
}

/// Checks comparison `node` whose operands have these types (`None`: not known).
fn compared(
    node: &Node,
    (left, right): (Option<Known>, Option<Known>),
    refs: &[(usize, Ref)],
) -> Result<(), ExprError> {
    match (left, right) {
        (Some(l), Some(r)) if l.0 != r.0 => Err(ExprError::Mismatch {
            at: reference_at(node, refs),
            operator: comparison(node.operator()).unwrap_or_default(),
            left: l.1,
            right: r.1,
        }),
        _ => Ok(()),
    }
}

/// The byte offset of the first reference under `node`.
fn reference_at(node: &Node, refs: &[(usize, Ref)]) -> Option<usize> {
    let name = node.iter_variable_identifiers().next()?;
    let i: usize = name.strip_prefix(VAR_PREFIX)?.parse().ok()?;
    refs.get(i).map(|(at, _)| *at)
}

/// The type of `node`'s value, when it is known before any value is: a literal's, a
/// declared parameter's (`kind` of a reference), a comparison's or a logical operator's;
/// each comparison under it checked on the way.
fn static_type(
    node: &Node,
    refs: &[(usize, Ref)],
    kind: &impl Fn(&Ref) -> Option<ParamKind>,
) -> Result<Option<Known>, ExprError> {
    let children = node.children();
    let types = (children.iter())
        .map(|c| static_type(c, refs, kind))
        .collect::<Result<Vec<_>, _>>()?;
    const BOOLEAN: Option<Known> = Some((2, "boolean"));
    Ok(match node.operator() {
        Operator::RootNode if children.len() == 1 => types[0],
        Operator::Const { value } => Some(known(value)),
        Operator::VariableIdentifierRead { identifier } => {
            let i: Option<usize> = identifier
                .strip_prefix(VAR_PREFIX)
                .and_then(|i| i.parse().ok());
            let reference = i.and_then(|i| refs.get(i)).map(|(_, r)| r);
            reference.and_then(kind).and_then(kind_type)
        }
        op if children.len() == 2 && comparison(op).is_some() => {
            compared(node, (types[0], types[1]), refs)?;
            BOOLEAN
        }
        Operator::And | Operator::Or | Operator::Not => BOOLEAN,
        _ => None,
    })
}

/// The type a parameter of this kind has in a condition (an object's is its JSON text, which
/// compares as a string: left unknown).
fn kind_type(kind: ParamKind) -> Option<Known> {
    Some(match kind {
        ParamKind::Integer => (0, "integer"),
        ParamKind::Number => (0, "number"),
        ParamKind::String => (1, "string"),
        ParamKind::Boolean => (2, "boolean"),
        ParamKind::List => (3, "list"),
        ParamKind::Object => return None,
    })
}

/// A boolean operand: its value, or a mismatch naming what it is.
fn boolean(node: &Node, context: &HashMapContext, refs: &[(usize, Ref)]) -> Result<bool, Failure> {
    match evaluate(node, context, refs)? {
        EValue::Boolean(b) => Ok(b),
        other => Err(Failure::Language(EvalexprError::ExpectedBoolean {
            actual: other,
        })),
    }
}

/// The text of a comparison operator; `None` for any other operator.
fn comparison(op: &Operator) -> Option<&'static str> {
    Some(match op {
        Operator::Eq => "==",
        Operator::Neq => "!=",
        Operator::Gt => ">",
        Operator::Lt => "<",
        Operator::Geq => ">=",
        Operator::Leq => "<=",
        _ => return None,
    })
}

/// Values of one class compare with each other: integers with floats, strings with
/// strings, ...
fn type_class(value: &EValue) -> u8 {
    match value {
        EValue::Int(_) | EValue::Float(_) => 0,
        EValue::String(_) => 1,
        EValue::Boolean(_) => 2,
        EValue::Tuple(_) => 3,
        EValue::Empty => 4,
    }
}

/// A value's type in messages, in the words of parameter kinds.
fn type_name(value: &EValue) -> &'static str {
    match value {
        EValue::Int(_) => "integer",
        EValue::Float(_) => "number",
        EValue::String(_) => "string",
        EValue::Boolean(_) => "boolean",
        EValue::Tuple(_) => "list",
        EValue::Empty => "null",
    }
}

/// A JSON value for the language: `null` is empty, a list a tuple, an object its JSON text.
fn to_evalexpr(value: &Value) -> EValue {
    match value {
        Value::Null => EValue::Empty,
        Value::Bool(b) => EValue::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => EValue::Int(i),
            None => EValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => EValue::String(s.clone()),
        Value::Array(list) => EValue::Tuple(list.iter().map(to_evalexpr).collect()),
        Value::Object(_) => EValue::String(value.to_string()),
    }
}

/// Checks a condition's text and gives its references with their offsets.
///
/// # Errors
///
/// What [`Condition::parse`] finds.
pub fn check(text: &str) -> Result<Vec<(usize, Ref)>, ExprError> {
    Ok(Condition::parse(text)?
        .references()
        .map(|(at, r)| (at, r.clone()))
        .collect())
}

/// Parses and evaluates a condition in one go.
///
/// # Errors
///
/// What [`Condition::parse`] and [`Condition::eval`] find.
pub fn eval(text: &str, scope: &Scope) -> Result<bool, ExprError> {
    Condition::parse(text)?.eval(scope)
}
