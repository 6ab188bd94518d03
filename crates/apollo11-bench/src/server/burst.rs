//! Memory after a burst: the process's resident set before, right after a burst of
//! connections that each read a run's state at once, and after a pause with nothing to do.
//! The load generator shares the process; its part is the connections' own buffers.

use super::http::Conn;
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::time::Duration;

/// The idle pause after a burst before the last reading.
const IDLE: Duration = Duration::from_secs(2);

/// Resident set sizes, in KiB.
pub struct Rss {
    pub before: u64,
    pub after: u64,
    pub idle: u64,
}

/// `VmRSS` of this process, in KiB.
fn rss_kib() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in /proc/self/status")
}

/// `conns` connections opened at once, each reading `path` once, twice over.
pub async fn burst(addr: SocketAddr, conns: u64, path: String) -> Result<Rss> {
    let before = rss_kib()?;
    for _ in 0..2 {
        let reads: Vec<_> = (0..conns)
            .map(|_| {
                let path = path.clone();
                tokio::spawn(async move { Conn::open(addr).await?.get(&path).await })
            })
            .collect();
        for read in reads {
            read.await??;
        }
    }
    let after = rss_kib()?;
    tokio::time::sleep(IDLE).await;
    Ok(Rss {
        before,
        after,
        idle: rss_kib()?,
    })
}
