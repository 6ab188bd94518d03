//! The workflow file's shape as serde reads it: every value spanned, so an error can be put
//! where it was written.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub workflow: Spanned<RawWorkflow>,
    #[serde(default)]
    pub params: BTreeMap<String, Spanned<RawParam>>,
    #[serde(default)]
    pub defaults: RawDefaults,
    #[serde(default)]
    pub steps: Vec<Spanned<RawStep>>,
    #[serde(default)]
    pub classify: Vec<Spanned<RawClassRule>>,
    #[serde(default)]
    pub schedules: BTreeMap<String, Spanned<RawSchedule>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSchedule {
    pub cron: Spanned<String>,
    pub zone: Option<Spanned<String>>,
    pub params: Option<BTreeMap<String, Spanned<toml::Value>>>,
    pub catch_up: Option<Spanned<String>>,
    pub catch_up_max: Option<Spanned<u32>>,
    pub overlap: Option<Spanned<String>>,
    pub jitter: Option<Spanned<String>>,
    pub enabled: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClassRule {
    pub class: Spanned<String>,
    pub exit_codes: Option<Vec<Spanned<i32>>>,
    pub stderr: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWorkflow {
    pub name: Spanned<String>,
    pub on_failure: Option<Spanned<String>>,
    pub max_concurrency: Option<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawParam {
    #[serde(rename = "type")]
    pub kind: Spanned<String>,
    pub default: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub description: String,
    pub secret: Option<Spanned<RawSecret>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSecret {
    pub env: Option<String>,
    pub file: Option<String>,
}

/// A step's environment: variable names to (templated) values.
pub(super) type RawEnv = Spanned<BTreeMap<String, Spanned<String>>>;

/// A step's limits: names to values, checked by name (`definition/limits.rs`).
pub(super) type RawLimits = super::limits::Table;

/// The labels a worker must carry: label names to (templated) values.
pub(super) type RawLabels = Spanned<BTreeMap<String, Spanned<String>>>;

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDefaults {
    pub timeout: Option<Spanned<String>>,
    pub retry: Option<RawRetry>,
    pub non_retryable_exit_codes: Option<Vec<i32>>,
    pub env: Option<RawEnv>,
    pub cwd: Option<Spanned<String>>,
    pub env_pass: Option<Vec<Spanned<String>>>,
    pub on: Option<RawLabels>,
    pub queue_timeout: Option<Spanned<String>>,
    pub limits: Option<RawLimits>,
}

#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetry {
    pub max_attempts: Option<Spanned<u32>>,
    pub backoff: Option<Spanned<String>>,
    pub initial: Option<Spanned<String>>,
    pub max: Option<Spanned<String>>,
    pub jitter_pct: Option<Spanned<u8>>,
    pub same_failure_max: Option<Spanned<u32>>,
    pub class: Option<BTreeMap<String, Spanned<toml::Value>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStep {
    pub name: Spanned<String>,
    pub run: Option<Spanned<String>>,
    pub wait: Option<Spanned<toml::Value>>,
    pub deadline: Option<Spanned<String>>,
    pub idempotency: Option<Spanned<String>>,
    pub compensate: Option<Spanned<String>>,
    #[serde(default)]
    pub depends_on: Vec<Spanned<String>>,
    pub timeout: Option<Spanned<String>>,
    pub retry: Option<RawRetry>,
    pub non_retryable_exit_codes: Option<Vec<i32>>,
    pub for_each: Option<Spanned<toml::Value>>,
    pub waves: Option<Spanned<u32>>,
    pub gate: Option<Spanned<String>>,
    pub key: Option<Spanned<String>>,
    pub when: Option<Spanned<String>>,
    pub trigger: Option<Spanned<String>>,
    pub env: Option<RawEnv>,
    pub cwd: Option<Spanned<String>>,
    pub on: Option<RawLabels>,
    pub compensate_on: Option<RawLabels>,
    pub queue_timeout: Option<Spanned<String>>,
    pub limits: Option<RawLimits>,
}
