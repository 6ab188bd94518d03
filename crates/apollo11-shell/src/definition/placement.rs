//! Where a step runs (`on`, `compensate_on`, `queue_timeout`; `on` and `queue_timeout` in
//! `[defaults]` too): labels a worker must carry, kept in the step's attributes for the
//! executor (`shell/remote.rs`).

use super::raw::{RawDefaults, RawLabels, RawStep};
use super::step::duration_ms;
use super::{DefinitionError, Locator};
use crate::shell::{COMPENSATE_ON, ON, QUEUE_TIMEOUT};
use apollo11_core::limits;
use std::collections::BTreeMap;

/// Adds the step's placement attributes, when it or `[defaults]` sets them.
pub(super) fn step_attributes(
    at: &Locator<'_>,
    raw: &RawStep,
    defaults: &RawDefaults,
    attributes: &mut BTreeMap<String, String>,
) -> Result<(), DefinitionError> {
    for (key, labels) in [
        (ON, raw.on.as_ref().or(defaults.on.as_ref())),
        (COMPENSATE_ON, raw.compensate_on.as_ref()),
    ] {
        if let Some(labels) = labels {
            attributes.insert(key.to_owned(), checked(at, key, labels)?);
        }
    }
    if let Some(t) = raw
        .queue_timeout
        .as_ref()
        .or(defaults.queue_timeout.as_ref())
    {
        let ms = duration_ms(at, t)?;
        if ms == 0 {
            return Err(at.error(
                t.span().start,
                "queue_timeout of zero would fail every placed try at once",
            ));
        }
        attributes.insert(QUEUE_TIMEOUT.to_owned(), ms.to_string());
    }
    Ok(())
}

/// The labels as a JSON object, each name and value checked.
fn checked(at: &Locator<'_>, key: &str, labels: &RawLabels) -> Result<String, DefinitionError> {
    if labels.get_ref().is_empty() {
        return Err(at.error(
            labels.span().start,
            &format!("`{key}` names no label: leave it out to run the step in the engine"),
        ));
    }
    let max = limits::LABEL_BYTES_MAX as usize;
    for (name, value) in labels.get_ref() {
        let problem = if !is_label(name) {
            format!(
                "{key}: `{name}` is not a label name (letters, digits, `_`, `-`, `.`; at most 64)"
            )
        } else if value.get_ref().is_empty() || value.get_ref().len() > max {
            format!("{key}.{name}: a label's value is 1 to {max} bytes")
        } else if value.get_ref().contains(['\0', ',', '=']) {
            format!("{key}.{name}: a label's value cannot hold NUL, `,` or `=`")
        } else {
            continue;
        };
        return Err(at.error(value.span().start, &problem));
    }
    let plain: BTreeMap<&String, &String> = labels
        .get_ref()
        .iter()
        .map(|(k, v)| (k, v.get_ref()))
        .collect();
    Ok(serde_json::to_string(&plain).expect("a map of strings serializes"))
}

/// A label's name: 1 to 64 of letters, digits, `_`, `-`, `.`.
pub fn is_label(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}
