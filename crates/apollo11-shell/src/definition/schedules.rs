//! `[schedules.NAME]`: when `apollo11 serve` starts runs of the workflow on its own. Each
//! schedule is a cron expression in a time zone, the values of the run's parameters (which
//! may read the fire time: `${schedule.date}`), what a restart does with fire times it
//! missed, what a fire does while an earlier run still goes, a jitter, and a switch. Every
//! value is checked and located here; a run's parameters are checked by instantiating the
//! definition with the values of a sample fire.

use super::raw::{RawFile, RawSchedule};
use super::toml_text::value_offset;
use super::{params, step, DefinitionError, Locator};
use apollo11_core::{ParamKind, ParamSpec, Value, WorkflowSpec};
use apollo11_schedule::{template, CatchUp, Cron, FireTime, Overlap, Values};
use std::collections::BTreeMap;
use toml::Spanned;

/// The longest schedule name: it is part of its runs' ids.
pub const SCHEDULE_NAME_BYTES_MAX: usize = 64;
/// The largest `catch_up_max`.
pub const CATCH_UP_MAX: usize = 10_000;

/// One schedule of a workflow, checked.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// Its name, from `[schedules.NAME]`.
    pub name: String,
    /// The cron expression as written.
    pub cron_text: String,
    /// The expression read in its zone.
    pub cron: Cron,
    /// Values of the run's parameters; strings may read the fire time.
    pub params: BTreeMap<String, Value>,
    /// What a restart does with the fire times it missed.
    pub catch_up: CatchUp,
    /// What a fire does while an earlier run of the schedule still goes.
    pub overlap: Overlap,
    /// A fire waits a stable delay below this after its time (0: none).
    pub jitter_ms: u64,
    /// Whether `serve` fires it.
    pub enabled: bool,
}

impl Schedule {
    /// The values of a run's parameters at `fire`: each `${schedule.…}` rendered, a string
    /// given to a parameter of another type read as `--param` reads it.
    ///
    /// # Errors
    ///
    /// A rendered value its parameter cannot take, naming it.
    pub fn params_at(
        &self,
        declared: &[ParamSpec],
        fire: FireTime,
    ) -> Result<BTreeMap<String, Value>, String> {
        let previous = (fire.ms.checked_sub(1))
            .and_then(|ms| self.cron.latest_at_or_before(ms))
            .unwrap_or(fire);
        let values = Values {
            name: &self.name,
            fire,
            previous,
        };
        let mut out = BTreeMap::new();
        for (name, value) in &self.params {
            let rendered = rendered(value, &values);
            let decl = declared.iter().find(|d| &d.name == name);
            let value = match (rendered, decl) {
                (Value::String(text), Some(d)) if d.kind != ParamKind::String => {
                    apollo11_author::parse_cli(d, &text).map_err(|e| e.to_string())?
                }
                (value, _) => value,
            };
            out.insert(name.clone(), value);
        }
        Ok(out)
    }
}

/// Every string of `value` rendered for `values`.
fn rendered(value: &Value, values: &Values<'_>) -> Value {
    match value {
        Value::String(text) => Value::String(template::render(text, values)),
        Value::Array(items) => Value::Array(items.iter().map(|v| rendered(v, values)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), rendered(v, values)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The schedules of `raw`, in file order, checked against the declared `spec`.
pub(super) fn schedules(
    at: &Locator<'_>,
    raw: &RawFile,
    spec: &WorkflowSpec,
) -> Result<Vec<Schedule>, DefinitionError> {
    let mut declared: Vec<(&String, &Spanned<RawSchedule>)> = raw.schedules.iter().collect();
    declared.sort_by_key(|(_, s)| s.span().start);
    declared
        .into_iter()
        .map(|(name, s)| schedule(at, name, s, spec))
        .collect()
}

fn schedule(
    at: &Locator<'_>,
    name: &str,
    spanned: &Spanned<RawSchedule>,
    spec: &WorkflowSpec,
) -> Result<Schedule, DefinitionError> {
    let raw = spanned.get_ref();
    let here = |offset: usize, what: &str| at.error(offset, &format!("schedule `{name}`: {what}"));
    if !is_schedule_name(name) {
        return Err(here(
            spanned.span().start,
            &format!(
                "a name is 1 to {SCHEDULE_NAME_BYTES_MAX} letters, digits, `_` and `-`, \
                 starting with a letter"
            ),
        ));
    }
    let zone = raw.zone.as_ref();
    let cron = Cron::parse(
        raw.cron.get_ref(),
        zone.map_or("UTC", |z| z.get_ref().as_str()),
    )
    .map_err(|e| {
        let offset = match e {
            apollo11_schedule::CronError::Zone(_) => zone.map_or(0, |z| z.span().start),
            apollo11_schedule::CronError::Expression(_) => raw.cron.span().start,
        };
        here(offset, &e.to_string())
    })?;
    let schedule = Schedule {
        name: name.to_owned(),
        cron_text: raw.cron.get_ref().clone(),
        cron,
        params: schedule_params(at, name, raw, spec)?,
        catch_up: catch_up(at, name, raw)?,
        overlap: match &raw.overlap {
            None => Overlap::default(),
            Some(o) => Overlap::parse(o.get_ref()).ok_or_else(|| {
                here(
                    o.span().start,
                    &format!(
                        "overlap is `{}`; expected skip, allow or queue",
                        o.get_ref()
                    ),
                )
            })?,
        },
        jitter_ms: match &raw.jitter {
            None => 0,
            Some(j) => step::duration_ms(at, j)?,
        },
        enabled: raw.enabled.unwrap_or(true),
    };
    // A sample fire's values must make a run of the workflow: required parameters given,
    // each of its type.
    if let Some(fire) = schedule.cron.next_after(0) {
        schedule
            .params_at(&spec.params, fire)
            .and_then(|given| super::instantiate(spec, &given).map(drop))
            .map_err(|e| here(spanned.span().start, &format!("its params: {e}")))?;
    }
    Ok(schedule)
}

fn catch_up(at: &Locator<'_>, name: &str, raw: &RawSchedule) -> Result<CatchUp, DefinitionError> {
    let max = match &raw.catch_up_max {
        None => apollo11_schedule::CATCH_UP_MAX_DEFAULT,
        Some(m) if (1..=CATCH_UP_MAX as u32).contains(m.get_ref()) => *m.get_ref() as usize,
        Some(m) => {
            return Err(at.error(
                m.span().start,
                &format!("schedule `{name}`: catch_up_max is 1 to {CATCH_UP_MAX}"),
            ))
        }
    };
    match &raw.catch_up {
        None => Ok(CatchUp::Latest),
        Some(c) => CatchUp::parse(c.get_ref(), max).ok_or_else(|| {
            at.error(
                c.span().start,
                &format!(
                    "schedule `{name}`: catch_up is `{}`; expected none, latest or all",
                    c.get_ref()
                ),
            )
        }),
    }
}

/// `params = { … }`: each a declared parameter, not a secret, its strings' references
/// readable at a fire.
fn schedule_params(
    at: &Locator<'_>,
    name: &str,
    raw: &RawSchedule,
    spec: &WorkflowSpec,
) -> Result<BTreeMap<String, Value>, DefinitionError> {
    let mut out = BTreeMap::new();
    for (param, value) in raw.params.iter().flatten() {
        let start = value.span().start;
        let here = |offset: usize, what: &str| {
            at.error(
                offset,
                &format!("schedule `{name}`, param `{param}`: {what}"),
            )
        };
        match spec.params.iter().find(|p| &p.name == param) {
            None => return Err(here(start, "not declared in [params]")),
            Some(p) if p.secret.is_some() => {
                return Err(here(start, "a secret is read from its source, never given"))
            }
            Some(_) => {}
        }
        let json = params::json(value.get_ref()).map_err(|e| here(start, &e))?;
        check_templates(&json).map_err(|e| {
            let written = &at.text[value.span()];
            let offset = match value.get_ref() {
                toml::Value::String(s) => value_offset(written, s, e.offset).map(|o| start + o),
                _ => None,
            };
            here(offset.unwrap_or(start), &e.message)
        })?;
        out.insert(param.clone(), json);
    }
    Ok(out)
}

fn check_templates(value: &Value) -> Result<(), template::TemplateError> {
    match value {
        Value::String(text) => template::check(text),
        Value::Array(items) => items.iter().try_for_each(check_templates),
        Value::Object(map) => map.values().try_for_each(check_templates),
        _ => Ok(()),
    }
}

/// 1 to [`SCHEDULE_NAME_BYTES_MAX`] letters, digits, `_` and `-`, starting with a letter.
fn is_schedule_name(name: &str) -> bool {
    name.len() <= SCHEDULE_NAME_BYTES_MAX
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
