//! A try's cgroup: made under an `apollo11` parent, its `sh` moving itself in before it waits
//! at its gate (so nothing of the step runs outside it), read for the kernel's OOM kills and for
//! what the try used (peak memory, CPU time) once it ends, and removed after (what still
//! runs in it killed first). Its name is derived from the try and the folder its executor
//! keeps tries in ([`name_of`]), so that a later life of the executor (a worker restarted,
//! an engine resuming a run) finds it again.
//!
//! cgroup v1 (one folder per controller: `memory`, `cpu`, `pids` under /sys/fs/cgroup) and
//! v2 (a unified /sys/fs/cgroup), written by hand: a handful of files, no crate needed.

use super::limits::{Held, Limits};
use apollo11_core::Usage;
use std::path::{Path, PathBuf};
use std::time::Duration;

const ROOT: &str = "/sys/fs/cgroup";
const PARENT: &str = "apollo11";
/// The CFS period a cpu share is a quota of, in microseconds.
const CPU_PERIOD_US: u64 = 100_000;

/// The cgroup of one try: a folder per controller (v1) or one folder (v2).
pub struct Cgroup {
    dirs: Vec<PathBuf>,
    v2: bool,
}

fn v2() -> bool {
    Path::new(ROOT).join("cgroup.controllers").exists()
}

/// Whether a cgroup can be made here: the `apollo11` parent exists (or is made) and is
/// writable, in each controller a try may need.
pub fn available() -> bool {
    let parents = if v2() {
        vec![Path::new(ROOT).join(PARENT)]
    } else {
        ["memory", "cpu", "pids"]
            .iter()
            .map(|c| Path::new(ROOT).join(c).join(PARENT))
            .collect()
    };
    let writable = |p: &Path| rustix::fs::access(p, rustix::fs::Access::WRITE_OK).is_ok();
    parents
        .iter()
        .all(|p| std::fs::create_dir_all(p).is_ok() && writable(p))
}

/// The name of the cgroup of a try (`run`, `step`, `attempt`, of its compensation or
/// not) run from `base` (the data dir, a worker's work dir): the same in every life of its
/// executor, so that one restarted finds it again ([`Cgroup::find`]), and another for each
/// try, as no two executors share a base and a try runs once at a time.
pub fn name_of(base: &Path, run: &str, step: &str, attempt: u32, compensation: bool) -> String {
    let attempt = attempt.to_string();
    let kind: &[u8] = if compensation { b"c" } else { b"r" };
    let parts = [
        base.as_os_str().as_encoded_bytes(),
        run.as_bytes(),
        step.as_bytes(),
        attempt.as_bytes(),
        kind,
    ];
    // Each part followed by a NUL, which none holds: no two tries give the same bytes.
    let key: Vec<&[u8]> = parts.iter().flat_map(|p| [*p, &b"\0"[..]]).collect();
    format!("try-{:016x}", apollo11_core::fnv1a(&key))
}

/// The folders a cgroup named `name` has (or would have) in each controller a try's cgroup
/// may join.
fn folders(name: &str) -> Vec<PathBuf> {
    if v2() {
        return vec![Path::new(ROOT).join(PARENT).join(name)];
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for controller in ["memory", "cpu", "pids", "cpuacct"] {
        let root = std::fs::canonicalize(Path::new(ROOT).join(controller));
        let dir = root.map(|r| r.join(PARENT).join(name)).ok();
        if let Some(dir) = dir.filter(|d| !dirs.contains(d)) {
            dirs.push(dir);
        }
    }
    dirs
}

impl Cgroup {
    /// The cgroup named `name` an earlier life of this executor made, in the controllers
    /// where it is still there; `None` when it is nowhere. Read and removed as one made
    /// here.
    pub fn find(name: &str) -> Option<Cgroup> {
        let dirs: Vec<PathBuf> = (folders(name).into_iter()).filter(|d| d.is_dir()).collect();
        (!dirs.is_empty()).then(|| Cgroup { dirs, v2: v2() })
    }

    /// Makes the cgroup `name` ([`name_of`]) holding `limits` (a pids cgroup alone when
    /// none of them needs a controller). One of that name an earlier life of the executor
    /// left behind (it died before removing it) goes first, with what still runs in it.
    pub fn create(name: &str, limits: &Limits) -> std::io::Result<Cgroup> {
        drop(Cgroup::find(name));
        if v2() {
            return create_v2(name, limits);
        }
        let mut files: Vec<(&str, String, String)> = Vec::new();
        if let Some(bytes) = limits.memory {
            files.push(("memory", "memory.limit_in_bytes".into(), bytes.to_string()));
        }
        if let Some(share) = limits.cpu {
            files.push(("cpu", "cpu.cfs_period_us".into(), CPU_PERIOD_US.to_string()));
            files.push((
                "cpu",
                "cpu.cfs_quota_us".into(),
                quota_us(share).to_string(),
            ));
        }
        if let Some(n) = limits.processes {
            files.push(("pids", "pids.max".into(), n.to_string()));
        }
        if files.is_empty() {
            files.push(("pids", "pids.max".into(), "max".into()));
        }
        let mut cgroup = Cgroup {
            dirs: Vec::new(),
            v2: false,
        };
        for (controller, file, value) in files {
            let dir = cgroup.folder(controller, name)?;
            std::fs::write(dir.join(file), value)?;
        }
        // What the try used is read from these two: a kernel without one, or a parent that
        // cannot be made in it, leaves that figure unknown and the try runs all the same.
        for controller in ["memory", "cpuacct"] {
            let parent = Path::new(ROOT).join(controller).join(PARENT);
            if std::fs::create_dir_all(parent).is_ok() {
                cgroup.folder(controller, name)?;
            }
        }
        if let Some(bytes) = limits.memory {
            // Memory and swap together, so a try over its memory is killed rather than
            // swapped out; a kernel without swap accounting has no such file.
            let dir = Path::new(ROOT).join("memory").join(PARENT).join(name);
            let _ = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), bytes.to_string());
        }
        Ok(cgroup)
    }

    /// The try's folder in `controller`, made the first time (a controller mounted with
    /// another, `cpu,cpuacct`, shares its folder).
    fn folder(&mut self, controller: &str, name: &str) -> std::io::Result<PathBuf> {
        let root = std::fs::canonicalize(Path::new(ROOT).join(controller))?;
        let dir = root.join(PARENT).join(name);
        if !self.dirs.contains(&dir) {
            std::fs::create_dir(&dir)?;
            self.dirs.push(dir.clone());
        }
        Ok(dir)
    }

    /// What its processes used so far: its peak memory (`memory.max_usage_in_bytes` on v1,
    /// `memory.peak` on v2) and CPU time (`cpuacct.usage_user` and `cpuacct.usage_sys` on
    /// v1, `user_usec` and `system_usec` of `cpu.stat` on v2), each `None` where the kernel
    /// has no such file.
    pub fn used(&self) -> Used {
        let read = |file: &str| {
            (self.dirs.iter())
                .find_map(|d| std::fs::read_to_string(d.join(file)).ok())
                .and_then(|t| t.trim().parse::<u64>().ok())
        };
        if self.v2 {
            let stat = (self.dirs.iter())
                .find_map(|d| std::fs::read_to_string(d.join("cpu.stat")).ok())
                .unwrap_or_default();
            let field = |key: &str| {
                (stat.lines())
                    .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
                    .map(|us| us / 1_000)
            };
            return Used {
                peak_memory_bytes: read("memory.peak"),
                cpu_user_ms: field("user_usec "),
                cpu_system_ms: field("system_usec "),
            };
        }
        let ms = |ns: Option<u64>| ns.map(|ns| ns / 1_000_000);
        Used {
            peak_memory_bytes: read("memory.max_usage_in_bytes"),
            cpu_user_ms: ms(read("cpuacct.usage_user")),
            cpu_system_ms: ms(read("cpuacct.usage_sys")),
        }
    }

    /// What the try it held used from `started_ms` (ms since the Unix epoch) to now, as
    /// its counters say: for a try a dead engine left, found again ([`Cgroup::find`]).
    pub fn usage(&self, started_ms: u64) -> Usage {
        let used = self.used();
        let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let now_ms = since_epoch.map_or(0, |d| d.as_millis() as u64);
        Usage {
            isolation: Held::Cgroup.word().to_owned(),
            wall_ms: now_ms.saturating_sub(started_ms),
            cpu_user_ms: used.cpu_user_ms,
            cpu_system_ms: used.cpu_system_ms,
            peak_memory_bytes: used.peak_memory_bytes,
            memory_limit_bytes: self.memory_limit(),
        }
    }

    /// Its memory limit in bytes (`memory.limit_in_bytes` on v1, `memory.max` on v2);
    /// `None` when it has none.
    fn memory_limit(&self) -> Option<u64> {
        let file = if self.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        let text = (self.dirs.iter()).find_map(|d| std::fs::read_to_string(d.join(file)).ok())?;
        // No limit reads `max` (v2) or a page-rounded `i64::MAX` (v1).
        text.trim().parse::<u64>().ok().filter(|&b| b < 1 << 62)
    }

    /// The files a process writes `0` to, itself, to move into it: its `tasks` in each
    /// controller on v1, where a thread that moves itself takes no lock of the whole
    /// hierarchy (a process moved by pid through `cgroup.procs` waits for an RCU grace
    /// period, about 10 ms an attempt); its `cgroup.procs` on v2.
    pub fn entries(&self) -> Vec<PathBuf> {
        let file = if self.v2 { "cgroup.procs" } else { "tasks" };
        self.dirs.iter().map(|d| d.join(file)).collect()
    }

    /// Whether the kernel's OOM killer killed a process of it: the `oom_kill` count of
    /// `memory.events` (v2) or `memory.oom_control` (v1; on kernels without that count,
    /// a limit hit, `memory.failcnt`).
    pub fn oom_killed(&self) -> bool {
        let (file, fallback) = if self.v2 {
            ("memory.events", None)
        } else {
            ("memory.oom_control", Some("memory.failcnt"))
        };
        let Some(dir) = self.dirs.iter().find(|d| d.join(file).exists()) else {
            return false;
        };
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        let count = |t: &str| t.trim().parse::<u64>().unwrap_or(0);
        match text.lines().find_map(|l| l.strip_prefix("oom_kill ")) {
            Some(n) => count(n) > 0,
            None => fallback.is_some_and(|f| {
                count(&std::fs::read_to_string(dir.join(f)).unwrap_or_default()) > 0
            }),
        }
    }
}

/// What a cgroup's processes used, as its counters say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Used {
    /// The most memory they held at once, in bytes.
    pub peak_memory_bytes: Option<u64>,
    /// CPU time in user mode, in milliseconds.
    pub cpu_user_ms: Option<u64>,
    /// CPU time in the kernel, in milliseconds.
    pub cpu_system_ms: Option<u64>,
}

fn quota_us(share: f64) -> u64 {
    // A share is checked positive and at most the limit of cores when read.
    ((share * CPU_PERIOD_US as f64).round() as u64).max(1_000)
}

fn create_v2(name: &str, limits: &Limits) -> std::io::Result<Cgroup> {
    let parent = Path::new(ROOT).join(PARENT);
    for dir in [Path::new(ROOT), parent.as_path()] {
        std::fs::write(dir.join("cgroup.subtree_control"), "+memory +pids +cpu")?;
    }
    let dir = parent.join(name);
    std::fs::create_dir(&dir)?;
    let cgroup = Cgroup {
        dirs: vec![dir.clone()],
        v2: true,
    };
    if let Some(bytes) = limits.memory {
        std::fs::write(dir.join("memory.max"), bytes.to_string())?;
        std::fs::write(dir.join("memory.swap.max"), "0").ok();
    }
    if let Some(share) = limits.cpu {
        std::fs::write(
            dir.join("cpu.max"),
            format!("{} {CPU_PERIOD_US}", quota_us(share)),
        )?;
    }
    if let Some(n) = limits.processes {
        std::fs::write(dir.join("pids.max"), n.to_string())?;
    }
    Ok(cgroup)
}

impl Drop for Cgroup {
    /// Kills what still runs in it and removes its folders (a folder that stays busy for a
    /// second is left behind).
    fn drop(&mut self) {
        for dir in &self.dirs {
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                for pid in procs.lines().filter_map(|l| l.trim().parse().ok()) {
                    let pid = nix::unistd::Pid::from_raw(pid);
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}
