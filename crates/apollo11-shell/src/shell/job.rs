//! A try as its executor needs it, everything rendered: what the engine runs itself and
//! what it sends a worker (as JSON, bytes in base64). And the outcome a worker sends back.

use super::command::Prepared;
use super::limits::{self, Held, Limits};
use crate::classify::ClassRule;
use apollo11_core::{FailureClass, Usage, Value};
use apollo11_runtime::{Output, StepContext, StepError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One try of a shell step, rendered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The run.
    pub run_id: String,
    /// The step.
    pub step: String,
    /// The attempt.
    pub attempt: u32,
    /// A try of the step's compensation.
    pub compensation: bool,
    /// The shell command, rendered.
    pub command: String,
    /// Variables set for it (its `env`, its secrets').
    pub env: Vec<(String, String)>,
    /// The executor's own variables it keeps (`None`: all).
    pub pass: Option<Vec<String>>,
    /// The folder it runs in.
    pub dir: PathBuf,
    /// The outputs of the steps it may read, by name (`APOLLO11_INPUTS`).
    #[serde(with = "b64map")]
    pub inputs: BTreeMap<String, Vec<u8>>,
    /// The run's arguments (`APOLLO11_PARAMS`).
    pub params: BTreeMap<String, Value>,
    /// The previous attempt's payload, or for a compensation the step's output.
    #[serde(with = "b64opt")]
    pub payload: Option<Vec<u8>>,
    /// Exit codes no retry can fix.
    pub non_retryable: Vec<i32>,
    /// The author's rules that classify a failure (`[[classify]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassRule>,
    /// What it may use (`limits`).
    #[serde(default, skip_serializing_if = "Limits::is_empty")]
    pub limits: Limits,
}

impl Job {
    /// The job of the try `ctx` is for, `prepared` for it.
    pub fn of(
        ctx: &StepContext,
        prepared: Prepared,
        compensation: bool,
        non_retryable: &[i32],
        classes: &[ClassRule],
        limits: &Limits,
    ) -> Job {
        let payload = if compensation {
            ctx.output.clone()
        } else {
            ctx.previous_payload.clone()
        };
        Job {
            run_id: ctx.run_id.to_string(),
            step: ctx.step.to_string(),
            attempt: ctx.attempt,
            compensation,
            command: prepared.command,
            env: prepared.env,
            pass: prepared.pass,
            dir: prepared.dir,
            inputs: ctx.scope().outputs.clone(),
            params: ctx.scope().arguments.clone(),
            payload,
            non_retryable: non_retryable.to_vec(),
            classes: classes.to_vec(),
            limits: limits.clone(),
        }
    }

    /// How its limits are held here: by this process's `--isolation` and whether a cgroup
    /// can be made.
    ///
    /// # Errors
    ///
    /// A limit nothing here can hold, in words.
    pub fn held(&self) -> Result<Held, String> {
        limits::plan(&self.limits, super::cgroup::available)
    }
}

impl Job {
    /// What the `Placed` event of a try on a worker records of it: `{"command", "cwd"}`,
    /// the command as it runs (a secret only as the variable it is in) and its folder (how
    /// its limits are held is the worker's to know).
    pub fn detail(&self) -> Vec<u8> {
        self.detail_with(None)
    }

    /// [`Job::detail`] of a try that runs here, with `"isolation"`: how its limits are held
    /// (`none`, `rlimit`, `cgroup`; `refused` when nothing here can hold them).
    pub fn detail_here(&self) -> Vec<u8> {
        self.detail_with(Some(self.held().map_or("refused", Held::word)))
    }

    fn detail_with(&self, isolation: Option<&str>) -> Vec<u8> {
        let mut detail = serde_json::json!({
            "command": self.command,
            "cwd": self.dir.to_string_lossy(),
        });
        if let Some(isolation) = isolation {
            detail["isolation"] = isolation.into();
        }
        serde_json::to_vec(&detail).expect("JSON values serialize")
    }
}

/// How a try on a worker ended, as the worker reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// Whether it succeeded.
    pub ok: bool,
    /// Its failure, in words (empty on success).
    #[serde(default)]
    pub error: String,
    /// Whether a retry may help.
    #[serde(default)]
    pub retryable: bool,
    /// Its output, or the marker a failure left.
    #[serde(with = "b64opt", default)]
    pub payload: Option<Vec<u8>>,
    /// Its failure's class (none on success, or from a worker that does not classify).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<FailureClass>,
    /// Its failure's fingerprint; 0 for none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fingerprint: u64,
    /// The delay before the next attempt its failure asks for, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// What the try used (none from a worker that does not measure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Outcome {
    /// The report of `result`, with what the try used.
    pub fn of(result: &Result<Output, StepError>, usage: Option<Usage>) -> Outcome {
        match result {
            Ok(output) => Outcome {
                ok: true,
                error: String::new(),
                retryable: false,
                payload: Some(output.0.clone()),
                class: None,
                fingerprint: 0,
                retry_after_ms: None,
                usage,
            },
            Err(e) => Outcome {
                ok: false,
                error: e.message.clone(),
                retryable: e.retryable,
                payload: e.payload.clone(),
                class: e.class.clone(),
                fingerprint: e.fingerprint,
                retry_after_ms: e.retry_after_ms,
                usage,
            },
        }
    }

    /// The attempt's result it reports.
    ///
    /// # Errors
    ///
    /// The attempt's failure, when it reports one; a failure no retry can fix for a
    /// payload over `STEP_OUTPUT_BYTES_MAX`, the bound a local output has.
    pub fn result(self) -> Result<Output, StepError> {
        let max = apollo11_core::limits::STEP_OUTPUT_BYTES_MAX;
        let bytes = self.payload.as_ref().map_or(0, Vec::len) as u64;
        if bytes > max {
            return Err(StepError::fatal(format!(
                "the worker reported an output of {bytes} bytes, over the limit of {max} bytes (STEP_OUTPUT_BYTES_MAX)"
            )));
        }
        if self.ok {
            return Ok(Output(self.payload.unwrap_or_default()));
        }
        let error = StepError {
            message: self.error,
            retryable: self.retryable,
            class: self.class,
            fingerprint: self.fingerprint,
            retry_after_ms: self.retry_after_ms,
            ..StepError::fatal("")
        };
        Err(match self.payload {
            Some(p) if !p.is_empty() => error.with_payload(p),
            _ => error,
        })
    }
}

mod b64opt {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(b) => s.serialize_some(&STANDARD.encode(b)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| STANDARD.decode(text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

mod b64map {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(
        map: &BTreeMap<String, Vec<u8>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(map.iter().map(|(k, v)| (k, STANDARD.encode(v))))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Vec<u8>>, D::Error> {
        BTreeMap::<String, String>::deserialize(d)?
            .into_iter()
            .map(|(k, v)| Ok((k, STANDARD.decode(v).map_err(serde::de::Error::custom)?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_and_an_outcome_survive_json_with_any_bytes() {
        let job = Job {
            run_id: "r".into(),
            step: "s".into(),
            attempt: 2,
            compensation: false,
            command: "echo 'x; y'".into(),
            env: vec![("A".into(), "b".into())],
            pass: Some(vec!["PATH".into()]),
            dir: "/tmp".into(),
            inputs: BTreeMap::from([("dep".to_owned(), vec![0, 255, 10])]),
            params: BTreeMap::from([("n".to_owned(), Value::from(3))]),
            payload: Some(vec![0xff, 0]),
            non_retryable: vec![3],
            classes: vec![ClassRule {
                class: "transient".into(),
                exit_codes: vec![75],
                stderr: Some("refused".into()),
            }],
            limits: Limits {
                memory: Some(1 << 28),
                cpu: Some(0.5),
                ..Limits::default()
            },
        };
        let text = serde_json::to_vec(&job).unwrap();
        assert_eq!(serde_json::from_slice::<Job>(&text).unwrap(), job);
        let failed = Err(StepError::retryable("exited with code 1")
            .with_class(apollo11_core::FailureClass::Exit(1))
            .with_fingerprint("refused")
            .with_retry_after(std::time::Duration::from_secs(30))
            .with_payload(vec![1, 2]));
        let used = Usage {
            isolation: "cgroup".into(),
            wall_ms: 5,
            ..Usage::default()
        };
        let outcome = Outcome::of(&failed, Some(used.clone()));
        let back: Outcome = serde_json::from_slice(&serde_json::to_vec(&outcome).unwrap()).unwrap();
        assert_eq!(back.usage.as_ref(), Some(&used));
        assert_eq!(back.result(), failed);
        let ok = Ok(Output(vec![0, 1]));
        assert_eq!(Outcome::of(&ok, None).result(), ok);
        let max = apollo11_core::limits::STEP_OUTPUT_BYTES_MAX as usize;
        let over = Outcome::of(&Ok(Output(vec![b'x'; max + 1])), None)
            .result()
            .unwrap_err();
        assert!(
            !over.retryable && over.message.contains("over the limit"),
            "{over:?}"
        );
        let at = Outcome::of(&Ok(Output(vec![b'x'; max])), None).result();
        assert_eq!(at.map(|o| o.0.len()), Ok(max));
    }
}
