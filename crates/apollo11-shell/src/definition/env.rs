//! A step's environment and folder (`env`, `cwd`, in `[defaults]` and per step) and which of
//! the engine's own variables steps see (`env_pass`). Shell-only: kept in the attributes.

use super::raw::{RawDefaults, RawEnv, RawStep};
use super::{DefinitionError, Locator};
use std::collections::BTreeMap;

/// Step attribute: the step's environment, a JSON object of names to (templated) values,
/// `[defaults] env` merged under the step's own.
pub const ENV: &str = "env";
/// Step attribute: the folder the step runs in, relative to the workflow file's (templated).
pub const CWD: &str = "cwd";
/// Workflow attribute: the engine's environment variables steps see, a JSON array of
/// names. Without it a step sees the engine's whole environment, as it always has.
pub const ENV_PASS: &str = "env_pass";

/// Adds the step's `env` and `cwd` attributes, when it or `[defaults]` sets them.
pub(super) fn step_attributes(
    at: &Locator<'_>,
    raw: &RawStep,
    defaults: &RawDefaults,
    attributes: &mut BTreeMap<String, String>,
) -> Result<(), DefinitionError> {
    let mut env = BTreeMap::new();
    for table in [&defaults.env, &raw.env].into_iter().flatten() {
        check_env(at, table)?;
        for (name, value) in table.get_ref() {
            env.insert(name.clone(), value.get_ref().clone());
        }
    }
    if !env.is_empty() {
        let text = serde_json::to_string(&env).expect("a map of strings serializes");
        attributes.insert(ENV.to_owned(), text);
    }
    if let Some(cwd) = raw.cwd.as_ref().or(defaults.cwd.as_ref()) {
        if cwd.get_ref().contains('\0') || cwd.get_ref().is_empty() {
            return Err(at.error(
                cwd.span().start,
                "cwd is a folder's path: not empty, no NUL",
            ));
        }
        attributes.insert(CWD.to_owned(), cwd.get_ref().clone());
    }
    Ok(())
}

/// The workflow's `env_pass` attribute, when `[defaults]` sets it.
pub(super) fn env_pass(
    at: &Locator<'_>,
    defaults: &RawDefaults,
    attributes: &mut BTreeMap<String, String>,
) -> Result<(), DefinitionError> {
    let Some(names) = &defaults.env_pass else {
        return Ok(());
    };
    for name in names {
        if !is_variable(name.get_ref()) {
            return Err(at.error(
                name.span().start,
                &format!("env_pass: `{}` is not a variable name", name.get_ref()),
            ));
        }
    }
    let names: Vec<&String> = names.iter().map(|n| n.get_ref()).collect();
    let text = serde_json::to_string(&names).expect("a list of strings serializes");
    attributes.insert(ENV_PASS.to_owned(), text);
    Ok(())
}

fn check_env(at: &Locator<'_>, table: &RawEnv) -> Result<(), DefinitionError> {
    for (name, value) in table.get_ref() {
        let problem = if !is_variable(name) {
            format!("env: `{name}` is not a variable name (letters, digits, `_`)")
        } else if name.starts_with("APOLLO11_") {
            format!("env: `{name}`: the APOLLO11_ variables are set by the engine")
        } else if value.get_ref().contains('\0') {
            format!("env: `{name}` cannot hold a NUL character")
        } else {
            continue;
        };
        return Err(at.error(value.span().start, &problem));
    }
    Ok(())
}

fn is_variable(name: &str) -> bool {
    super::params::is_identifier(name)
}
