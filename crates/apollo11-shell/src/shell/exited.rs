//! The CPU time of a try held by no cgroup: its `sh` watched through a pidfd until it ends,
//! and read from `/proc` before it is reaped (a process that ended still shows its own CPU
//! time and that of the children it waited for). Its peak memory is not kept there: only a
//! cgroup's counters give one.

use rustix::process::{pidfd_open, Pid, PidfdFlags};
use std::os::fd::OwnedFd;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Waits until the process `pid`, a child of this process not yet reaped, has ended, and
/// answers the CPU time it used, user and system, in milliseconds; `None` where the kernel
/// has no pidfd or `/proc` does not say (the caller then just waits for it).
pub async fn cpu_ms(pid: u32) -> Option<(u64, u64)> {
    let pid = Pid::from_raw(i32::try_from(pid).ok()?)?;
    let fd = pidfd_open(pid, PidfdFlags::empty()).ok()?;
    let fd = watch(fd).ok()?;
    let _ended = fd.readable().await.ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero())).ok()?;
    of_stat(&stat, rustix::param::clock_ticks_per_second())
}

/// The pidfd `fd` on the runtime's reactor, readable once its process ends.
#[expect(
    deprecated,
    reason = "the safe constructor: the pidfd is an `OwnedFd` the `AsyncFd` owns alone, so it cannot be closed or replaced while registered, which is what the deprecation is about; its replacement is `unsafe`, which this workspace forbids"
)]
fn watch(fd: OwnedFd) -> std::io::Result<AsyncFd<OwnedFd>> {
    AsyncFd::with_interest(fd, Interest::READABLE)
}

/// User and system CPU time in milliseconds from a `/proc/PID/stat` line, each the
/// process's own and its waited-for children's (`utime` + `cutime`, `stime` + `cstime`),
/// counted in `ticks` a second.
fn of_stat(stat: &str, ticks: u64) -> Option<(u64, u64)> {
    // The name, in parentheses, may hold spaces and parentheses: fields follow the last `)`.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<u64> = (rest.split_whitespace())
        .skip(11)
        .take(4)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let [utime, stime, cutime, cstime] = fields[..] else {
        return None;
    };
    let ms = |t: u64| t.saturating_mul(1_000) / ticks.max(1);
    Some((ms(utime + cutime), ms(stime + cstime)))
}

#[cfg(test)]
mod tests {
    use super::of_stat;

    #[test]
    fn cpu_time_is_the_process_s_and_its_children_s() {
        let stat = "4242 (a (b) c) Z 1 4242 4242 0 -1 4227148 219 0 0 0 12 3 30 5 20 0 1 0";
        assert_eq!(of_stat(stat, 100), Some((420, 80)));
        assert_eq!(of_stat("4242 (sh) Z 1", 100), None);
    }
}
