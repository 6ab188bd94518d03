//! `[params]`: each parameter's type, default, description and secret source, in the order
//! the file declares them.

use super::raw::RawParam;
use super::DefinitionError;
use super::Locator;
use apollo11_core::{ParamKind, ParamSpec, SecretSource, Value};
use std::collections::BTreeMap;
use std::path::Path;
use toml::Spanned;

/// The declarations of `[params]`, in file order.
pub(super) fn params(
    at: &Locator<'_>,
    raw: &BTreeMap<String, Spanned<RawParam>>,
) -> Result<Vec<ParamSpec>, DefinitionError> {
    let mut declared: Vec<(&String, &Spanned<RawParam>)> = raw.iter().collect();
    declared.sort_by_key(|(_, p)| p.span().start);
    declared
        .into_iter()
        .map(|(name, p)| param(at, name, p))
        .collect()
}

fn param(
    at: &Locator<'_>,
    name: &str,
    spanned: &Spanned<RawParam>,
) -> Result<ParamSpec, DefinitionError> {
    let raw = spanned.get_ref();
    let here = |offset: usize, what: &str| at.error(offset, &format!("parameter `{name}`: {what}"));
    if !is_identifier(name) {
        return Err(here(
            spanned.span().start,
            "a name is letters, digits and `_`, not starting with a digit",
        ));
    }
    let kind = kind(raw.kind.get_ref()).ok_or_else(|| {
        here(
            raw.kind.span().start,
            &format!(
                "type `{}` is not one of string, integer, number, boolean, list, object",
                raw.kind.get_ref()
            ),
        )
    })?;
    let default = match &raw.default {
        Some(d) => Some(json(d.get_ref()).map_err(|e| here(d.span().start, &e))?),
        None => None,
    };
    if raw.required && default.is_some() {
        return Err(here(
            spanned.span().start,
            "a parameter with a default is never required: drop one of them",
        ));
    }
    let secret = match &raw.secret {
        None => None,
        Some(s) => Some(secret(s).map_err(|e| here(s.span().start, e))?),
    };
    if secret.is_some() && default.is_some() {
        return Err(here(
            spanned.span().start,
            "a secret has no default: its value is only read from its source",
        ));
    }
    let spec = ParamSpec {
        name: name.to_owned(),
        kind,
        default,
        required: raw.required,
        description: raw.description.clone(),
        secret,
    };
    if let (Some(value), Some(d)) = (&spec.default, &raw.default) {
        apollo11_author::check_value(&spec, value)
            .map_err(|e| at.error(d.span().start, &format!("the default: {e}")))?;
    }
    Ok(spec)
}

fn secret(raw: &Spanned<super::raw::RawSecret>) -> Result<SecretSource, &'static str> {
    match (&raw.get_ref().env, &raw.get_ref().file) {
        (Some(var), None) => Ok(SecretSource::Env(var.clone())),
        (None, Some(path)) => Ok(SecretSource::File(path.clone())),
        _ => Err("a secret is read from one source: `{ env = \"VAR\" }` or `{ file = \"PATH\" }`"),
    }
}

fn kind(text: &str) -> Option<ParamKind> {
    Some(match text {
        "string" => ParamKind::String,
        "integer" => ParamKind::Integer,
        "number" => ParamKind::Number,
        "boolean" => ParamKind::Boolean,
        "list" => ParamKind::List,
        "object" => ParamKind::Object,
        _ => return None,
    })
}

/// Letters, digits and `_`, not starting with a digit: what a template and an expression
/// can name.
pub(super) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A TOML value as JSON: a date or time becomes its text.
///
/// # Errors
///
/// A float JSON cannot hold (NaN, an infinity).
pub(super) fn json(value: &toml::Value) -> Result<Value, String> {
    Ok(match value {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| format!("{f} is not a number JSON can hold"))?,
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => {
            Value::Array(items.iter().map(json).collect::<Result<_, _>>()?)
        }
        toml::Value::Table(table) => Value::Object(
            table
                .iter()
                .map(|(k, v)| Ok((k.clone(), json(v)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// The values of a parameters file (`--params-file`): a JSON object, or a TOML table, of
/// parameter names to values, read by the file's extension. The values are checked against
/// the declarations later, with those given otherwise.
///
/// # Errors
///
/// A [`DefinitionError`] naming the file: it cannot be read, its extension is neither
/// `.json` nor `.toml`, its text is not one object of values (at the line and column).
pub fn read_params_file(path: &Path) -> Result<BTreeMap<String, Value>, DefinitionError> {
    let file = path.display().to_string();
    let whole_file = |message: String| DefinitionError {
        file: file.clone(),
        line: 0,
        column: 0,
        message,
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| whole_file(format!("cannot read the parameters file: {e}")))?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => Ok(map.into_iter().collect()),
            Ok(other) => Err(whole_file(format!(
                "a parameters file holds one object of names to values, not {}",
                apollo11_author::value_type(&other)
            ))),
            Err(e) => Err(DefinitionError {
                file: file.clone(),
                line: e.line(),
                column: e.column(),
                message: format!("not JSON: {e}"),
            }),
        },
        Some("toml") => {
            let table: toml::Table =
                toml::from_str(&text).map_err(|e| super::toml_error(&text, &file, &e))?;
            table
                .iter()
                .map(|(name, value)| Ok((name.clone(), json(value).map_err(&whole_file)?)))
                .collect()
        }
        _ => Err(whole_file(
            "a parameters file is read as .json or .toml, by its name".to_owned(),
        )),
    }
}
