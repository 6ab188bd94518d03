//! A shell step's place: the process group its `sh` leads, on this host, in this boot.
//!
//! The handle is `{"pgid", "boot", "start"}`: the group's id, the kernel's boot id, and the
//! leader's start time in clock ticks since boot. A later `apollo11` finds the group from it
//! and stops it (SIGKILL to the group, then waits until no member but zombies is left):
//! - on another host, it cannot: the try is unreachable and the run pauses for a person;
//! - after a reboot (another boot id), nothing of it runs;
//! - when the leader's pid now names a process started at another time, the pid was reused,
//!   which Linux does only once no process of the group is left: nothing of it runs.
//!
//! Linux only (`/proc`), as the rest of the shell steps' process handling.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// How long a group may take to end after SIGKILL before it is called unreachable.
const STOP_WITHIN: Duration = Duration::from_secs(10);

/// A process group of this host and boot.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub pgid: i32,
    pub boot: String,
    pub start: u64,
}

/// This machine's name, as the place's host.
pub fn host() -> std::io::Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/hostname")?
        .trim()
        .to_owned())
}

fn boot_id() -> std::io::Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?
        .trim()
        .to_owned())
}

/// A process's state letter, process group and start time, from `/proc/PID/stat`.
struct Stat {
    state: char,
    pgrp: i32,
    start: u64,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold anything: fields are counted after its `)`.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

impl Group {
    /// The group a just-spawned process leads (it was made leader of its own group).
    pub fn led_by(pid: u32) -> std::io::Result<Group> {
        let pgid = i32::try_from(pid).map_err(std::io::Error::other)?;
        let start = stat(pgid)
            .ok_or_else(|| std::io::Error::other(format!("process {pid} has no readable stat")))?
            .start;
        Ok(Group {
            pgid,
            boot: boot_id()?,
            start,
        })
    }

    pub fn handle(&self) -> String {
        serde_json::to_string(self).expect("a group serializes")
    }

    /// The group on `host` in words: its leader's pid, the host and the boot it ran in (the
    /// boot id's first 8 characters).
    pub fn words(&self, host: &str) -> String {
        let boot: String = self.boot.chars().take(8).collect();
        format!("pid {} on {host} (boot {boot})", self.pgid)
    }

    /// Processes of the group that still run (zombies have ended; their parent may be slow
    /// to reap them).
    fn live_members(&self) -> Vec<i32> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| stat(pid).is_some_and(|s| s.pgrp == self.pgid && s.state != 'Z'))
            .collect()
    }

    /// How long ago its leader started: the time since boot less its start time.
    pub fn started_ago(&self) -> Option<Duration> {
        let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
        let since_boot: f64 = uptime.split_whitespace().next()?.parse().ok()?;
        let ticks = rustix::param::clock_ticks_per_second().max(1) as f64;
        let ago = since_boot - self.start as f64 / ticks;
        Some(Duration::from_secs_f64(ago.max(0.0)))
    }

    /// Whether anything of the group still runs.
    pub fn runs(&self) -> bool {
        !self.is_gone().unwrap_or(true) && !self.live_members().is_empty()
    }

    /// True when the group's number now belongs to someone else, or the machine rebooted.
    fn is_gone(&self) -> std::io::Result<bool> {
        if boot_id()? != self.boot {
            return Ok(true);
        }
        Ok(stat(self.pgid).is_some_and(|leader| leader.start != self.start))
    }

    /// Kills every process of the group and waits until none runs.
    fn stop(&self) -> Result<(), String> {
        let gone = self
            .is_gone()
            .map_err(|e| format!("reading the boot id: {e}"))?;
        if gone {
            return Ok(());
        }
        let deadline = Instant::now() + STOP_WITHIN;
        while !self.live_members().is_empty() {
            if Instant::now() > deadline {
                return Err(format!(
                    "process group {} still runs {} s after SIGKILL",
                    self.pgid,
                    STOP_WITHIN.as_secs()
                ));
            }
            let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }
}

/// Stops what may still run of a try placed at `host` with `handle`: `Err` says why it
/// cannot be (another host, a handle this version cannot read, a group that will not end).
pub async fn stop(host_of_try: &str, handle: &str) -> Result<(), String> {
    let here = host().map_err(|e| format!("reading this host's name: {e}"))?;
    if host_of_try != here {
        return Err(format!(
            "it runs on host `{host_of_try}` and this is `{here}`: stop it there"
        ));
    }
    let group: Group = serde_json::from_str(handle)
        .map_err(|e| format!("the handle `{handle}` names no process group ({e})"))?;
    tokio::task::spawn_blocking(move || group.stop())
        .await
        .map_err(|e| format!("stopping the process group: {e}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_reads_back_and_this_process_is_found_in_its_group() {
        let me = Group::led_by(std::process::id()).unwrap();
        assert_eq!(serde_json::from_str::<Group>(&me.handle()).unwrap(), me);
        assert!(!me.is_gone().unwrap());
        let rebooted = Group {
            boot: "another boot".into(),
            ..Group::led_by(std::process::id()).unwrap()
        };
        assert!(rebooted.is_gone().unwrap());
        let reused = Group {
            start: me.start + 1,
            ..Group::led_by(std::process::id()).unwrap()
        };
        assert!(reused.is_gone().unwrap());
    }

    #[test]
    fn a_group_in_words_names_its_pid_and_boot() {
        let group = Group {
            pgid: 10268,
            boot: "8c1f2a3b-aaaa-bbbb-cccc-0123456789ab".into(),
            start: 7,
        };
        assert_eq!(group.words("db1"), "pid 10268 on db1 (boot 8c1f2a3b)");
    }

    #[tokio::test]
    async fn another_host_or_a_foreign_handle_is_unreachable() {
        let other = stop("surely-not-this-host", "{}").await.unwrap_err();
        assert!(other.contains("surely-not-this-host"), "{other}");
        let foreign = stop(&host().unwrap(), "job-1").await.unwrap_err();
        assert!(foreign.contains("job-1"), "{foreign}");
    }
}
