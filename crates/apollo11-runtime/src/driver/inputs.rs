//! What an attempt reads besides its own payload: the scope its templates, conditions and
//! code see. The driver fills it before the attempt's `Started` is appended (the run's
//! arguments and id, the step's item and wave, and the outputs and statuses of the steps it
//! may read, each output read from the store, its blob fetched and checked); the secrets are
//! read from their sources when the attempt begins, and never written anywhere.

use super::Driver;
use crate::engine::Store;
use crate::reads::{frame, Frame};
use crate::{EngineError, StepError, Try};
use apollo11_author::Scope;
use apollo11_core::{ParamSpec, SecretSource, Seq, StepName};
use apollo11_store::StoreError;
use std::collections::BTreeMap;

/// Payloads read for one decision's launches, by the seq of the event that holds each: the
/// items of a template all read the same outputs, and read them once.
pub(super) type Read = BTreeMap<Seq, Vec<u8>>;

/// What a launch hands its try, read before its `Started` or `Compensating` is appended.
pub(super) struct Prepared {
    /// The step's checkpoint marker, or for a compensation its output.
    pub payload: Option<Vec<u8>>,
    /// What it reads, but the secrets.
    pub scope: Scope,
}

impl<S: Store> Driver<S> {
    /// What each launch hands its step (its checkpoint marker, or for a compensation its
    /// output, and the outputs it may read), read before its `Started` or `Compensating` is
    /// appended. A payload that cannot be read (a damaged or missing blob) stops the run with
    /// the store's error before that append: a step must never run with nothing in place of
    /// what it was promised. Outcomes already known are appended first: they are facts worth
    /// keeping.
    pub(super) async fn prepare(&mut self, launches: &[Try]) -> Result<Vec<Prepared>, EngineError> {
        let mut prepared = Vec::with_capacity(launches.len());
        let mut outputs = Read::new();
        for tried in launches {
            let read = async {
                let payload = self.recorded_payload(&tried.step, tried.kind).await?;
                let scope = self.scope_of(&tried.step, &mut outputs).await?;
                Ok::<_, StoreError>(Prepared { payload, scope })
            };
            match read.await {
                Ok(p) => prepared.push(p),
                Err(e) => {
                    self.commit(Vec::new()).await?;
                    return Err(e.into());
                }
            }
        }
        Ok(prepared)
    }

    /// The scope of an attempt (or compensation) of `step`, but its secrets: what it reads
    /// ([`crate::reads::frame`]), the outputs taken from `read` or read into it.
    pub(super) async fn scope_of(
        &self,
        step: &StepName,
        read: &mut Read,
    ) -> Result<Scope, StoreError> {
        let Frame { mut scope, outputs } =
            frame(&self.spec, self.machine.dag(), self.state(), step);
        for (name, seq) in outputs {
            let bytes = match read.get(&seq) {
                Some(bytes) => bytes.clone(),
                None => {
                    let bytes = self.payload_at(Some(seq)).await?.unwrap_or_default();
                    read.insert(seq, bytes.clone());
                    bytes
                }
            };
            scope.outputs.insert(name, bytes);
        }
        Ok(scope)
    }
}

/// The secret parameters of `params` with their values, read now from their sources (an
/// environment variable of the engine, or a file, one trailing newline removed).
///
/// # Errors
///
/// A fatal [`StepError`] naming the parameter and where it was looked for; never the value.
pub(super) fn read_secrets(params: &[ParamSpec]) -> Result<BTreeMap<String, String>, StepError> {
    let mut secrets = BTreeMap::new();
    for param in params {
        let Some(source) = &param.secret else {
            continue;
        };
        let missing = |why: String| {
            StepError::fatal(format!(
                "the secret parameter `{}` has no value: {why}",
                param.name
            ))
        };
        let value = match source {
            SecretSource::Env(var) => std::env::var(var).map_err(|e| {
                missing(match e {
                    std::env::VarError::NotPresent => {
                        format!("the environment variable `{var}` is not set")
                    }
                    std::env::VarError::NotUnicode(_) => {
                        format!("the environment variable `{var}` is not UTF-8")
                    }
                })
            })?,
            SecretSource::File(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| missing(format!("the file `{path}` cannot be read: {e}")))?;
                let text = text.strip_suffix('\n').unwrap_or(&text);
                text.strip_suffix('\r').unwrap_or(text).to_owned()
            }
        };
        secrets.insert(param.name.clone(), value);
    }
    Ok(secrets)
}
