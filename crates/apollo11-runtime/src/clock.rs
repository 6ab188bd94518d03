//! The engine's clock: wall-clock milliseconds for events and `decide`, advanced by tokio's
//! clock so tests can pause and jump time. The wall clock is read once, at engine start.

use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// Milliseconds since the Unix epoch, driven by tokio's (pausable) clock.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    wall_at_start_ms: u64,
    start: Instant,
}

impl Clock {
    /// A clock starting at the current wall-clock time.
    pub fn system() -> Clock {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Clock::starting_at(wall.as_millis() as u64)
    }

    /// A clock reading `ms` now (a simulation's, so that a seed replays exactly).
    pub fn starting_at(ms: u64) -> Clock {
        Clock {
            wall_at_start_ms: ms,
            start: Instant::now(),
        }
    }

    /// Now, in milliseconds since the epoch.
    pub fn now_ms(&self) -> u64 {
        self.wall_at_start_ms + self.start.elapsed().as_millis() as u64
    }

    /// Sleeps until the clock reads `ms`.
    pub async fn sleep_until_ms(&self, ms: u64) {
        let offset = Duration::from_millis(ms.saturating_sub(self.wall_at_start_ms));
        tokio::time::sleep_until(self.start + offset).await;
    }
}
