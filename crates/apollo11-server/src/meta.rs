//! `GET /api/v1/meta`: what a client of the API would otherwise copy from the server: the
//! limits it enforces and the names of run states, step states and override targets, so
//! the web UI checks and lists them as the server does.

use crate::{BODY_BYTES_MAX, LOG_BYTES_MAX, START_BODY_BYTES_MAX};
use apollo11_core::{limits, OverrideTarget};
use apollo11_runtime::{RunStatus, StepStatus};
use axum::Json;
use serde::Serialize;

/// The override targets in the order a client offers them: done by hand, run again,
/// skipped, failed for good.
const OFFERED: [OverrideTarget; 4] = [
    OverrideTarget::Succeeded,
    OverrideTarget::Pending,
    OverrideTarget::Skipped,
    OverrideTarget::Failed,
];

/// The answer of `GET /api/v1/meta`.
#[derive(Serialize)]
pub struct Meta {
    limits: Limits,
    run_states: Vec<&'static str>,
    step_states: Vec<&'static str>,
    override_targets: Vec<&'static str>,
}

/// The server's limits, in bytes.
#[derive(Serialize)]
struct Limits {
    /// An operator's name (`by`).
    by_bytes: u32,
    /// An operator's reason.
    reason_bytes: u32,
    /// The end of a step's log that is served.
    log_bytes: u64,
    /// A request's body.
    body_bytes: usize,
    /// A start's body.
    start_body_bytes: usize,
    /// A parameter's value, as JSON text.
    param_value_bytes: u32,
}

/// `GET /api/v1/meta`.
pub async fn meta() -> Json<Meta> {
    Json(Meta {
        limits: Limits {
            by_bytes: limits::LABEL_BYTES_MAX,
            reason_bytes: limits::ERROR_MESSAGE_BYTES_MAX,
            log_bytes: LOG_BYTES_MAX,
            body_bytes: BODY_BYTES_MAX,
            start_body_bytes: START_BODY_BYTES_MAX,
            param_value_bytes: limits::PARAM_VALUE_BYTES_MAX,
        },
        run_states: RunStatus::ALL.map(RunStatus::name).to_vec(),
        step_states: StepStatus::ALL.map(StepStatus::name).to_vec(),
        override_targets: OFFERED.map(OverrideTarget::name).to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_override_target_is_offered_once() {
        let mut offered = OFFERED.map(OverrideTarget::name);
        let mut all = OverrideTarget::ALL.map(OverrideTarget::name);
        offered.sort_unstable();
        all.sort_unstable();
        assert_eq!(offered, all);
    }
}
