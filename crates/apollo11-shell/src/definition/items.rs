//! A step's `for_each`: a list written in the file, a list parameter, an inventory file read
//! now, or a dependency's output known at run time; with `waves`, `gate` and `key`.

use super::params::json;
use super::raw::RawStep;
use super::{DefinitionError, Locator};
use apollo11_author::Ref;
use apollo11_core::{ForEach, ItemSource, Value};
use std::io::Read;
use std::path::Path;
use toml::Spanned;

/// The largest inventory file read.
pub const INVENTORY_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// The step's `for_each` declaration, if any; `dir` is the workflow file's folder, where an
/// inventory file's path starts.
pub(super) fn for_each(
    at: &Locator<'_>,
    raw: &RawStep,
    dir: &Path,
) -> Result<Option<ForEach>, DefinitionError> {
    let name = raw.name.get_ref();
    let Some(source) = &raw.for_each else {
        let stray = [
            raw.waves.as_ref().map(|w| ("waves", w.span().start)),
            raw.gate.as_ref().map(|g| ("gate", g.span().start)),
            raw.key.as_ref().map(|k| ("key", k.span().start)),
        ];
        return match stray.into_iter().flatten().next() {
            Some((key, offset)) => Err(at.error(
                offset,
                &format!("step `{name}`: `{key}` applies to a step with `for_each` only"),
            )),
            None => Ok(None),
        };
    };
    if let Some(w) = raw.waves.as_ref().filter(|w| *w.get_ref() == 0) {
        return Err(at.error(
            w.span().start,
            &format!("step `{name}`: `waves` is the number of items per wave: at least 1"),
        ));
    }
    Ok(Some(ForEach {
        items: items(at, name, source, dir)?,
        wave_size: raw.waves.as_ref().map(|w| *w.get_ref()),
        gate: raw.gate.as_ref().map(|g| g.get_ref().clone()),
        key: raw.key.as_ref().map(|k| k.get_ref().clone()),
    }))
}

fn items(
    at: &Locator<'_>,
    name: &str,
    source: &Spanned<toml::Value>,
    dir: &Path,
) -> Result<ItemSource, DefinitionError> {
    let here = |what: &str| at.error(source.span().start, &format!("step `{name}`: {what}"));
    match source.get_ref() {
        toml::Value::Array(list) => list
            .iter()
            .map(json)
            .collect::<Result<_, _>>()
            .map(ItemSource::List)
            .map_err(|e| here(&e)),
        toml::Value::String(text) => reference(text).ok_or_else(|| here(&format!(
            "for_each `{text}` is not `${{params.NAME}}`, `${{steps.STEP.output}}` or `${{steps.STEP.output.PATH}}`"
        ))),
        toml::Value::Table(table) => match (table.get("file"), table.len()) {
            (Some(toml::Value::String(file)), 1) => {
                inventory(dir, file).map(ItemSource::List).map_err(|e| here(&e))
            }
            _ => Err(here("a for_each table is `{ file = \"PATH\" }` (a .toml or .json file of items)")),
        },
        _ => Err(here(
            "for_each is a list, `${params.NAME}`, `${steps.STEP.output[.PATH]}` or `{ file = \"PATH\" }`",
        )),
    }
}

/// `${params.NAME}` or `${steps.STEP.output[.PATH]}`, the whole text.
fn reference(text: &str) -> Option<ItemSource> {
    let inner = text.strip_prefix("${")?.strip_suffix('}')?;
    match Ref::parse(inner)? {
        Ref::Param(name) => Some(ItemSource::Param(name)),
        Ref::Output { step, path } => Some(ItemSource::Output {
            step,
            path: path.join("."),
        }),
        _ => None,
    }
}

/// The items of an inventory file: a JSON file holding one array, or a TOML file holding
/// one key whose value is an array (`[[hosts]]` tables, say).
fn inventory(dir: &Path, file: &str) -> Result<Vec<Value>, String> {
    let path = dir.join(file);
    let shown = path.display();
    let unreadable = |e: std::io::Error| format!("cannot read the inventory file {shown}: {e}");
    let opened = std::fs::File::open(&path).map_err(unreadable)?;
    if !opened.metadata().map_err(unreadable)?.is_file() {
        return Err(format!("the inventory file {shown} is not a regular file"));
    }
    // Bounded: a file that grows while it is read is cut, and refused, at the limit.
    let mut text = String::new();
    opened
        .take(INVENTORY_BYTES_MAX + 1)
        .read_to_string(&mut text)
        .map_err(unreadable)?;
    if text.len() as u64 > INVENTORY_BYTES_MAX {
        return Err(format!(
            "the inventory file {shown} is over {INVENTORY_BYTES_MAX} bytes, the most read"
        ));
    }
    let value = match path.extension().and_then(|e| e.to_str()) {
        Some("json") => serde_json::from_str::<Value>(&text)
            .map_err(|e| format!("the inventory file {shown} is not JSON: {e}"))?,
        Some("toml") => {
            let table: toml::Table = toml::from_str(&text)
                .map_err(|e| format!("the inventory file {shown} is not TOML: {}", e.message()))?;
            let mut values = table.values();
            match (values.next(), values.next()) {
                (Some(list), None) => json(list)?,
                _ => return Err(format!(
                    "the inventory file {shown} must hold one list (e.g. `[[hosts]]` tables), under one key"
                )),
            }
        }
        _ => {
            return Err(format!(
                "the inventory file {shown} is read as .toml or .json, by its name"
            ))
        }
    };
    match value {
        Value::Array(items) => Ok(items),
        other => Err(format!(
            "the inventory file {shown} holds {}, not a list",
            apollo11_author::value_type(&other)
        )),
    }
}
