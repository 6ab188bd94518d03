//! The server's connections, bounded so that no client can take what the engine needs: the
//! listener's backlog, a cap on connections open at once (past it a connection gets a fixed
//! 503 and is closed), the time a connection gets to send a request's head (which also bounds
//! how long a kept-alive connection may sit idle), and file descriptors kept in reserve for
//! the engine's own work (steps, their logs, segments): the process's soft limit is raised
//! to its hard limit, and the cap never exceeds that limit minus the reserve.

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections served at once by default (lowered to fit the file limit).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 1024;
/// How long a connection may take to send a request's head, or wait idle for the next one.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The listen backlog by default (the kernel caps it at `net.core.somaxconn`).
pub const DEFAULT_BACKLOG: u32 = 1024;

/// Requests handled at once, over all connections; more wait for their turn. What handlers
/// allocate at once (a run's events read and folded, its view and JSON) is bounded by it;
/// the allocator hands it back once the burst is over.
pub const REQUESTS_MAX: usize = 64;
/// Refused connections being answered at once; past them a refused connection is closed
/// unanswered.
const REFUSALS_MAX: usize = 32;
/// How long a refused connection's request is read (and dropped) before it is closed, so that
/// the client reads the 503 rather than a reset.
const REFUSAL_DRAIN: Duration = Duration::from_millis(200);
/// The pause after a failed accept (out of descriptors), so the loop does not spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// The answer past the cap.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
content-length: 82\r\n\
retry-after: 1\r\n\
connection: close\r\n\
\r\n\
{\"error\":{\"code\":\"unavailable\",\"message\":\"too many connections; try again later\"}}";

/// How connections are bounded.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ConnLimits {
    /// Connections served at once; the server lowers it to the file limit minus its reserve.
    pub max_connections: u32,
    /// How long a connection may take to send a request's head, counted from its opening or
    /// from the end of its previous response: a slow or idle client is closed after it.
    pub header_timeout: Duration,
    /// The listen backlog.
    pub backlog: u32,
}

impl Default for ConnLimits {
    fn default() -> ConnLimits {
        ConnLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            backlog: DEFAULT_BACKLOG,
        }
    }
}

/// Binds `address` with `backlog`.
pub(crate) fn bind(address: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket = match address {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(backlog)
}

/// Descriptors kept for the engine out of a file limit of `limit`: half of it, from 32 to
/// 1,024.
pub fn fd_reserve(limit: u64) -> u64 {
    (limit / 2).clamp(32, 1024)
}

/// The cap on connections: `wanted`, lowered to the file limit (raised to its hard limit
/// first) minus the engine's reserve; one at least.
pub(crate) fn connection_cap(wanted: u32) -> usize {
    let limit = raise_file_limit();
    let room = limit.saturating_sub(fd_reserve(limit));
    let cap = u64::from(wanted).min(room).max(1);
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    if cap < wanted as usize {
        tracing::warn!(
            wanted,
            cap,
            file_limit = limit,
            "--max-connections lowered to fit the file limit"
        );
    }
    cap
}

/// Raises the soft limit on open files to the hard one; returns the soft limit now.
fn raise_file_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return u64::MAX;
    };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return hard;
    }
    soft
}

/// Serves `app` on `listener`, at most `cap` connections at once, until `shutdown`
/// completes; then waits for the open connections to finish their requests.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    cap: usize,
    shutdown: impl Future<Output = ()>,
) {
    let (permits, refusals) = (
        Arc::new(Semaphore::new(cap)),
        Arc::new(Semaphore::new(REFUSALS_MAX)),
    );
    let app = tower::limit::ConcurrencyLimit::new(app, REQUESTS_MAX);
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refuse(stream, &refusals);
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Answers a connection past the cap with [`BUSY`] and closes it. What the client has sent
/// is read first, so that closing sends no reset that would discard the answer; then, while
/// fewer than [`REFUSALS_MAX`] are, a task waits a moment for the rest of its request.
fn refuse(stream: TcpStream, refusals: &Arc<Semaphore>) {
    discard_received(&stream);
    if stream.try_write(BUSY).is_err() {
        return;
    }
    if let Ok(permit) = refusals.clone().try_acquire_owned() {
        tokio::spawn(linger(stream, permit));
    }
}

/// Reads and drops what `stream` holds received, without waiting.
fn discard_received(stream: &TcpStream) {
    let mut sink = [0u8; 4096];
    while matches!(stream.try_read(&mut sink), Ok(n) if n > 0) {}
}

/// Closes the writing side, then reads what comes until the client closes or
/// [`REFUSAL_DRAIN`] passes.
async fn linger(mut stream: TcpStream, _permit: OwnedSemaphorePermit) {
    use tokio::io::AsyncWriteExt;
    let drained = async {
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(REFUSAL_DRAIN, drained).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_answer_states_its_body_length() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}\r\n", body.len())));
        let parsed: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(parsed["error"]["code"], "unavailable");
    }

    #[test]
    fn the_reserve_is_half_the_file_limit_within_bounds() {
        assert_eq!(fd_reserve(256), 128);
        assert_eq!(fd_reserve(40), 32);
        assert_eq!(fd_reserve(1 << 20), 1024);
    }
}
