//! What a waiting step waits for. A waiting step runs no code: its attempt starts like any
//! other (`Started`), holds no process and no concurrency slot, and ends when what it waits
//! for comes: a signal (`Signalled`, whose payload becomes the step's output) or its timer
//! (`Succeeded`). Its deadline, if any, is the step's timeout: past it the attempt fails
//! with class `timeout`.

use serde::{Deserialize, Serialize};

/// What a waiting step waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wait {
    /// A signal or an approval from an operator (CLI, API, UI), with a JSON payload.
    Signal,
    /// A timer of this many milliseconds from the attempt's `Started` event.
    After {
        /// The duration, in milliseconds.
        ms: u64,
    },
    /// A timer until this wall-clock instant, in milliseconds since the Unix epoch.
    Until {
        /// The instant.
        ms: u64,
    },
}

impl Wait {
    /// When the timer of an attempt started at `started_ms` fires; `None` for a signal.
    pub fn due_ms(self, started_ms: u64) -> Option<u64> {
        match self {
            Wait::Signal => None,
            Wait::After { ms } => Some(started_ms.saturating_add(ms)),
            Wait::Until { ms } => Some(ms),
        }
    }

    /// Whether a signal ends the wait.
    pub fn takes_signal(self) -> bool {
        self == Wait::Signal
    }
}
