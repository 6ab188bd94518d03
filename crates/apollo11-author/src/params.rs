//! A run's arguments: the values given at start checked against the declarations, defaults
//! filled in; and `--param NAME=VALUE` text read by a parameter's declared kind.

use apollo11_core::limits::PARAM_VALUE_BYTES_MAX;
use apollo11_core::{ParamKind, ParamSpec, Value};
use std::collections::BTreeMap;
use std::fmt;

/// Why the values given at start cannot be a run's arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamError {
    /// A value was given for a parameter the workflow does not declare.
    Unknown {
        /// The name given.
        name: String,
    },
    /// A required parameter with no default was given no value.
    Missing {
        /// The parameter.
        name: String,
    },
    /// A value (given, or a declared default) is not of the declared kind.
    WrongType {
        /// The parameter.
        name: String,
        /// The declared kind.
        expected: ParamKind,
        /// What the value is (`string`, `integer`, `number`, `boolean`, `list`, `object`,
        /// `null`).
        found: &'static str,
    },
    /// A value's JSON text is longer than [`PARAM_VALUE_BYTES_MAX`].
    TooLarge {
        /// The parameter.
        name: String,
        /// Its JSON text's length.
        bytes: usize,
    },
    /// A value was given for a secret parameter, whose value is only ever read from its source.
    SecretGiven {
        /// The parameter.
        name: String,
    },
    /// The text of `--param NAME=VALUE` cannot be read as the parameter's kind.
    Unreadable {
        /// The parameter (empty when the text has no `=`).
        name: String,
        /// The kind it was read as (`None` when the text has no `=`).
        kind: Option<ParamKind>,
        /// Why.
        problem: String,
    },
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamError::Unknown { name } => {
                write!(f, "parameter `{name}` is not declared by the workflow")
            }
            ParamError::Missing { name } => {
                write!(f, "parameter `{name}` is required and was given no value")
            }
            ParamError::WrongType {
                name,
                expected,
                found,
            } => write!(
                f,
                "parameter `{name}` must be {}, not {found}",
                kind_label(*expected)
            ),
            ParamError::TooLarge { name, bytes } => write!(
                f,
                "parameter `{name}` is {bytes} bytes of JSON; at most {PARAM_VALUE_BYTES_MAX} \
                 are allowed"
            ),
            ParamError::SecretGiven { name } => write!(
                f,
                "parameter `{name}` is a secret: its value is read from its source at each \
                 attempt and cannot be given at start"
            ),
            ParamError::Unreadable {
                name,
                kind: None,
                problem,
            } => write!(f, "`--param {name}`: {problem}"),
            ParamError::Unreadable {
                name,
                kind: Some(kind),
                problem,
            } => write!(
                f,
                "parameter `{name}` must be {}: {problem}",
                kind_label(*kind)
            ),
        }
    }
}

impl std::error::Error for ParamError {}

impl ParamError {
    /// The parameter the error is about (empty for `--param` text with no `=`).
    pub fn name(&self) -> &str {
        match self {
            ParamError::Unknown { name }
            | ParamError::Missing { name }
            | ParamError::WrongType { name, .. }
            | ParamError::TooLarge { name, .. }
            | ParamError::SecretGiven { name }
            | ParamError::Unreadable { name, .. } => name,
        }
    }
}

/// How a kind is called in messages: `a string`, `an integer`, ...
pub fn kind_label(kind: ParamKind) -> &'static str {
    match kind {
        ParamKind::String => "a string",
        ParamKind::Integer => "an integer",
        ParamKind::Number => "a number",
        ParamKind::Boolean => "a boolean",
        ParamKind::List => "a list",
        ParamKind::Object => "an object",
    }
}

/// What a JSON value is, in the words of [`ParamKind`]: `string`, `integer` (a number that
/// fits an `i64`), `number`, `boolean`, `list`, `object` or `null`.
pub fn value_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// Whether `value` is of `kind` (an integer is a number too).
pub fn has_kind(kind: ParamKind, value: &Value) -> bool {
    match kind {
        ParamKind::String => value.is_string(),
        ParamKind::Integer => value.is_i64(),
        ParamKind::Number => value.is_number(),
        ParamKind::Boolean => value.is_boolean(),
        ParamKind::List => value.is_array(),
        ParamKind::Object => value.is_object(),
    }
}

/// A run's arguments: each given value checked against its declaration, then each declared
/// default filled in for a parameter given none. Secret parameters are never among them.
/// Names are checked in a fixed order (the given names, then the declarations in order), so
/// the same input always gives the same error.
///
/// # Errors
///
/// [`ParamError`]: a name not declared, a secret given, a value or default of the wrong
/// kind or too large, a required parameter given nothing.
pub fn bind(
    decls: &[ParamSpec],
    given: &BTreeMap<String, Value>,
) -> Result<BTreeMap<String, Value>, ParamError> {
    for name in given.keys() {
        match decls.iter().find(|d| &d.name == name) {
            None => return Err(ParamError::Unknown { name: name.clone() }),
            Some(d) if d.secret.is_some() => {
                return Err(ParamError::SecretGiven { name: name.clone() })
            }
            Some(_) => {}
        }
    }
    let mut arguments = BTreeMap::new();
    for decl in decls.iter().filter(|d| d.secret.is_none()) {
        let value = match (given.get(&decl.name), &decl.default) {
            (Some(value), _) | (None, Some(value)) => value,
            (None, None) if decl.required => {
                return Err(ParamError::Missing {
                    name: decl.name.clone(),
                })
            }
            (None, None) => continue,
        };
        check_value(decl, value)?;
        arguments.insert(decl.name.clone(), value.clone());
    }
    Ok(arguments)
}

/// Checks one value against its declaration: its kind, then its size.
///
/// # Errors
///
/// [`ParamError::WrongType`] or [`ParamError::TooLarge`], naming the parameter.
pub fn check_value(decl: &ParamSpec, value: &Value) -> Result<(), ParamError> {
    if !has_kind(decl.kind, value) {
        return Err(ParamError::WrongType {
            name: decl.name.clone(),
            expected: decl.kind,
            found: value_type(value),
        });
    }
    let bytes = value.to_string().len();
    if bytes > PARAM_VALUE_BYTES_MAX as usize {
        return Err(ParamError::TooLarge {
            name: decl.name.clone(),
            bytes,
        });
    }
    Ok(())
}

/// The value of `--param NAME=TEXT` for the declaration `decl`: a string as is; an integer,
/// a number or a boolean parsed; a list or an object read as JSON.
///
/// # Errors
///
/// [`ParamError::Unreadable`] naming the parameter and its kind, or
/// [`ParamError::WrongType`] when JSON text is of another kind.
pub fn parse_cli(decl: &ParamSpec, text: &str) -> Result<Value, ParamError> {
    let unreadable = |problem: String| ParamError::Unreadable {
        name: decl.name.clone(),
        kind: Some(decl.kind),
        problem,
    };
    let value = match decl.kind {
        ParamKind::String => Value::String(text.to_owned()),
        ParamKind::Integer => text
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|e| unreadable(format!("`{text}`: {e}")))?,
        ParamKind::Number => number(text.trim()).ok_or_else(|| unreadable(format!("`{text}`")))?,
        ParamKind::Boolean => match text.trim() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => return Err(unreadable(format!("`{text}` is not `true` or `false`"))),
        },
        ParamKind::List | ParamKind::Object => {
            serde_json::from_str(text).map_err(|e| unreadable(format!("not JSON ({e})")))?
        }
    };
    check_value(decl, &value)?;
    Ok(value)
}

/// A finite number: as an integer when it reads as one, else as a float.
fn number(text: &str) -> Option<Value> {
    if let Ok(i) = text.parse::<i64>() {
        return Some(Value::from(i));
    }
    let f = text.parse::<f64>().ok().filter(|f| f.is_finite())?;
    serde_json::Number::from_f64(f).map(Value::Number)
}

/// `--param NAME=TEXT` read against the declarations: the name and its value.
///
/// # Errors
///
/// [`ParamError::Unreadable`] when there is no `=`; [`ParamError::Unknown`],
/// [`ParamError::SecretGiven`], or what [`parse_cli`] finds wrong with the value.
pub fn parse_assignment(decls: &[ParamSpec], text: &str) -> Result<(String, Value), ParamError> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(ParamError::Unreadable {
            name: text.to_owned(),
            kind: None,
            problem: "expected NAME=VALUE".to_owned(),
        });
    };
    let decl = decls
        .iter()
        .find(|d| d.name == name)
        .ok_or_else(|| ParamError::Unknown {
            name: name.to_owned(),
        })?;
    if decl.secret.is_some() {
        return Err(ParamError::SecretGiven {
            name: name.to_owned(),
        });
    }
    Ok((name.to_owned(), parse_cli(decl, value)?))
}
