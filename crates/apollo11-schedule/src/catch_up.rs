//! After downtime: which missed fire times start a run. And a fire's jitter.

use crate::cron::Cron;
use crate::fire::FireTime;

/// `catch_up_max` when a file gives none.
pub const CATCH_UP_MAX_DEFAULT: usize = 100;

/// Missed fire times counted at most, for the count of those not started.
const COUNTED_MAX: usize = 10_000;

/// What a restart does with the fire times it missed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CatchUp {
    /// Starts none of them.
    None,
    /// Starts the newest one.
    Latest,
    /// Starts each, oldest first, the newest `max` when there are more.
    All {
        /// The most started.
        max: usize,
    },
}

/// The missed fire times a [`CatchUp`] starts, and how many it leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due {
    /// To start, oldest first.
    pub fire: Vec<FireTime>,
    /// Missed and not started (counted up to 10,000).
    pub missed: usize,
}

impl CatchUp {
    /// The policy a file names (`none`, `latest`, `all`), `all` keeping at most `max`.
    pub fn parse(text: &str, max: usize) -> Option<CatchUp> {
        Some(match text {
            "none" => CatchUp::None,
            "latest" => CatchUp::Latest,
            "all" => CatchUp::All { max },
            _ => return None,
        })
    }

    /// The policy's name, as a file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::None => "none",
            CatchUp::Latest => "latest",
            CatchUp::All { .. } => "all",
        }
    }

    /// The fire times of `cron` strictly after `last_ms` (the newest fire time known
    /// started) and at or before `now_ms` that this policy starts.
    pub fn due(self, cron: &Cron, last_ms: u64, now_ms: u64) -> Due {
        let keep = match self {
            CatchUp::None => 0,
            CatchUp::Latest => 1,
            CatchUp::All { max } => max,
        };
        let newest_first = newest_first(cron, last_ms, now_ms, keep.max(COUNTED_MAX));
        let missed = newest_first.len().saturating_sub(keep);
        let mut fire: Vec<FireTime> = newest_first.into_iter().take(keep).collect();
        fire.reverse();
        Due { fire, missed }
    }
}

/// Fire times in `(after_ms, up_to_ms]`, newest first, at most `limit`.
fn newest_first(cron: &Cron, after_ms: u64, up_to_ms: u64, limit: usize) -> Vec<FireTime> {
    let mut fires = Vec::new();
    let mut cursor = up_to_ms;
    while fires.len() < limit {
        match cron.latest_at_or_before(cursor) {
            Some(fire) if fire.ms > after_ms => {
                cursor = fire.ms.saturating_sub(1);
                fires.push(fire);
            }
            _ => break,
        }
    }
    fires
}

/// A fire's delay in `[0, max_ms)`, the same on every instance for the same `key` (the
/// workflow, schedule and fire time): FNV-1a of the key.
pub fn jitter_ms(key: &str, max_ms: u64) -> u64 {
    if max_ms == 0 {
        return 0;
    }
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    hash % max_ms
}
