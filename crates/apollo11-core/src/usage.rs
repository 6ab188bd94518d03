//! What one try used, as its `AttemptUsage` event records it: wall time, CPU time, peak
//! memory, how its limits were held and the memory limit it ran with.

use serde::{Deserialize, Serialize};

/// What one try (an attempt, or a try of a compensation) used. A figure the executor could
/// not read is `None` (peak memory is known only where a cgroup held the try).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Usage {
    /// How its limits were held: `cgroup`, `rlimit` or `none`.
    pub isolation: String,
    /// From its start to its end, in milliseconds.
    pub wall_ms: u64,
    /// CPU time in user mode, its own and its children's, in milliseconds.
    pub cpu_user_ms: Option<u64>,
    /// CPU time in the kernel on its behalf, in milliseconds.
    pub cpu_system_ms: Option<u64>,
    /// The most memory it held at once, in bytes.
    pub peak_memory_bytes: Option<u64>,
    /// The memory limit it ran with, in bytes: the step's, or more after an `oom`.
    pub memory_limit_bytes: Option<u64>,
}

impl Usage {
    /// CPU time, user and system, in seconds; `None` when not known.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let ms = self
            .cpu_user_ms?
            .saturating_add(self.cpu_system_ms.unwrap_or(0));
        Some(ms as f64 / 1000.0)
    }

    /// In words, for a line of text: `wall 1.2 s, cpu 0.3 s user + 0.0 s system, peak
    /// 104.9 MB, cgroup, limit 256.0 MiB`.
    pub fn words(&self) -> String {
        let mut parts = vec![format!("wall {}", seconds(self.wall_ms))];
        if let Some(user) = self.cpu_user_ms {
            let system = self.cpu_system_ms.unwrap_or(0);
            parts.push(format!(
                "cpu {} user + {} system",
                seconds(user),
                seconds(system)
            ));
        }
        if let Some(peak) = self.peak_memory_bytes {
            parts.push(format!("peak {}", bytes(peak)));
        }
        parts.push(self.isolation.clone());
        if let Some(limit) = self.memory_limit_bytes {
            parts.push(format!("limit {}", bytes(limit)));
        }
        parts.join(", ")
    }
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// `bytes` in binary units, one decimal (`104.9 MiB`).
pub fn bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_reads_in_words() {
        let usage = Usage {
            isolation: "cgroup".into(),
            wall_ms: 1_250,
            cpu_user_ms: Some(300),
            cpu_system_ms: Some(20),
            peak_memory_bytes: Some(110 << 20),
            memory_limit_bytes: Some(256 << 20),
        };
        assert_eq!(
            usage.words(),
            "wall 1.2 s, cpu 0.3 s user + 0.0 s system, peak 110.0 MiB, cgroup, limit 256.0 MiB"
        );
        assert_eq!(usage.cpu_seconds(), Some(0.32));
        assert_eq!(bytes(512), "512 B");
        let bare = Usage {
            isolation: "none".into(),
            wall_ms: 40,
            ..Usage::default()
        };
        assert_eq!(bare.words(), "wall 0.0 s, none");
        assert_eq!(bare.cpu_seconds(), None);
    }
}
