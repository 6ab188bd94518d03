//! A step's limits (`limits = { memory, cpu, processes, open_files, cpu_time }`) and how an
//! executor holds them: the isolation mode it runs with (`--isolation auto|cgroup|rlimit`)
//! and the plan for one try: a cgroup (`cgroup.rs`) and rlimits, both put on the try's
//! `sh` while it waits at its gate, before anything of the step runs.
//!
//! Which limit each mechanism can hold:
//! - memory: a cgroup (`memory.limit_in_bytes`, `memory.max`); `RLIMIT_AS` only with
//!   `--isolation rlimit` (address space, not memory used: a weaker bound);
//! - cpu (a share of cores): a cgroup only (CFS quota);
//! - processes: a cgroup only (`pids.max`; `RLIMIT_NPROC` counts every process of the user);
//! - open files: `RLIMIT_NOFILE`, always;
//! - cpu time: `RLIMIT_CPU`, always (SIGXCPU at the limit, SIGKILL a second later).

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// Step attribute: the step's limits, as JSON.
pub const LIMITS: &str = "limits";

/// What a step may use; `None` for no limit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Memory, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// A share of cores (0.5: half of one core).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<f64>,
    /// Processes (and threads) at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Open files per process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
    /// CPU time per process, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_time_s: Option<u64>,
}

impl Limits {
    /// The limits a step's attributes hold (none when they hold none).
    pub fn of_attributes(attributes: &std::collections::BTreeMap<String, String>) -> Limits {
        (attributes.get(LIMITS))
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or_default()
    }

    /// Whether it limits nothing.
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// The limits only a cgroup holds in `mode`, in words.
    fn cgroup_only(&self, mode: Isolation) -> Vec<&'static str> {
        let memory = self.memory.is_some() && mode != Isolation::Rlimit;
        [
            (memory, "memory"),
            (self.cpu.is_some(), "cpu"),
            (self.processes.is_some(), "processes"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect()
    }
}

/// How an executor holds its steps' limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// A cgroup where a step's limits need one, else rlimits alone.
    #[default]
    Auto,
    /// A cgroup for every step with limits: a try fails when none can be made.
    Cgroup,
    /// Rlimits alone (memory as `RLIMIT_AS`): a step limiting cpu or processes fails.
    Rlimit,
}

impl std::str::FromStr for Isolation {
    type Err = String;

    fn from_str(text: &str) -> Result<Isolation, String> {
        match text {
            "auto" => Ok(Isolation::Auto),
            "cgroup" => Ok(Isolation::Cgroup),
            "rlimit" => Ok(Isolation::Rlimit),
            other => Err(format!(
                "isolation `{other}` is not one of auto, cgroup, rlimit"
            )),
        }
    }
}

static ISOLATION: OnceLock<Isolation> = OnceLock::new();

/// Sets how this process holds its steps' limits (once, before any step runs; later calls
/// change nothing). Unset, it is [`Isolation::Auto`].
pub fn set_isolation(mode: Isolation) {
    let _ = ISOLATION.set(mode);
}

fn isolation() -> Isolation {
    ISOLATION.get().copied().unwrap_or_default()
}

/// How one try's limits are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// No limits.
    None,
    /// Rlimits alone.
    Rlimit,
    /// A cgroup, and the rlimits of open files and cpu time.
    Cgroup,
}

impl Held {
    /// In words, as the try's `Placed` detail records it.
    pub fn word(self) -> &'static str {
        match self {
            Held::None => "none",
            Held::Rlimit => "rlimit",
            Held::Cgroup => "cgroup",
        }
    }
}

/// How `limits` are held under this process's isolation mode, `cgroups` saying whether a
/// cgroup can be made here (asked only when it matters).
///
/// # Errors
///
/// A limit that no mechanism here holds, in words: the try must not run unlimited.
pub fn plan(limits: &Limits, cgroups: impl FnOnce() -> bool) -> Result<Held, String> {
    if limits.is_empty() {
        return Ok(Held::None);
    }
    let mode = isolation();
    let only = limits.cgroup_only(mode);
    if mode == Isolation::Rlimit && !only.is_empty() {
        return Err(format!(
            "the step limits {} and only a cgroup can hold that, but the isolation is `rlimit`",
            only.join(", ")
        ));
    }
    if mode == Isolation::Rlimit || (mode == Isolation::Auto && only.is_empty()) {
        return Ok(Held::Rlimit);
    }
    if cgroups() {
        return Ok(Held::Cgroup);
    }
    let needing = if only.is_empty() {
        "any".to_owned()
    } else {
        only.join(", ")
    };
    Err(format!(
        "the step has limits ({needing}) that need a cgroup, and no cgroup can be made here (cgroup v1 controllers at /sys/fs/cgroup/{{memory,cpu,pids}} or a cgroup v2 mount at /sys/fs/cgroup, writable by this user); run where one can be, or with --isolation rlimit for memory as RLIMIT_AS"
    ))
}

/// Sets the rlimits of `limits` on the process `pid` (a try's `sh` waiting at its gate):
/// open files, cpu time, and memory as address space when `held` is [`Held::Rlimit`].
pub fn set_rlimits(pid: u32, limits: &Limits, held: Held) -> std::io::Result<()> {
    use rustix::process::{prlimit, Pid, Resource, Rlimit};
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw);
    let memory = limits.memory.filter(|_| held == Held::Rlimit);
    // The hard cpu time limit a second over the soft one: SIGXCPU first, which says why.
    for (resource, value, over) in [
        (Resource::Nofile, limits.open_files, 0),
        (Resource::Cpu, limits.cpu_time_s, 1),
        (Resource::As, memory, 0),
    ] {
        if let Some(value) = value {
            let limit = Rlimit {
                current: Some(value),
                maximum: Some(value.saturating_add(over)),
            };
            prlimit(pid, resource, limit)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_only_a_cgroup_holds_is_refused_without_one() {
        let processes = Limits {
            processes: Some(64),
            ..Limits::default()
        };
        assert_eq!(plan(&processes, || true), Ok(Held::Cgroup));
        let refused = plan(&processes, || false).unwrap_err();
        assert!(
            refused.contains("processes") && refused.contains("cgroup"),
            "{refused}"
        );
        let files = Limits {
            open_files: Some(256),
            ..Limits::default()
        };
        assert_eq!(plan(&files, || false), Ok(Held::Rlimit));
        assert_eq!(plan(&Limits::default(), || false), Ok(Held::None));
        assert!("none"
            .parse::<Isolation>()
            .unwrap_err()
            .contains("auto, cgroup, rlimit"));
    }
}
