//! `apollo11 serve`: the engine on the data dir (or the database of `--store`, shared with
//! other instances) behind the HTTP API, until Ctrl-C, SIGTERM or SIGHUP. The runs it was driving are stopped as a crash would stop them; the next
//! `serve` (or `resume`) picks them up.

use crate::data::{check_layout, store_exit, DataDir};
use crate::flags::read_token;
use crate::{out, run::Interrupts, Exit};
use apollo11_server::{ConnLimits, GcSchedule, ServeError, Server, ServerConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// What `serve` was asked, beside the data dir.
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub workflows: Option<PathBuf>,
    pub token_file: Option<PathBuf>,
    /// The ttl of this instance's leases (with `--store`).
    pub lease_ttl: Duration,
    /// How often to archive what the data dir's retention policy lets go.
    pub gc_every: Option<Duration>,
    /// More names a request's Host may give this server (`--allow-host`).
    pub allow_host: Vec<String>,
    /// How connections are bounded.
    pub conns: ConnLimits,
    /// The workers' token file.
    pub worker_token_file: Option<PathBuf>,
    /// A worker silent this long is lost.
    pub heartbeat_timeout: Duration,
}

pub async fn serve(dir: &DataDir, options: ServeOptions) -> Result<Exit, Exit> {
    let ServeOptions {
        listen,
        workflows,
        token_file,
        lease_ttl,
        gc_every,
        allow_host,
        conns,
        worker_token_file,
        heartbeat_timeout,
    } = options;
    let mut interrupts = Interrupts::install()?;
    let token = token_file
        .map(|f| read_token(&f))
        .transpose()
        .map_err(|e| Exit::fail(2, e))?;
    let workflows = workflows
        .map(|w| {
            std::path::absolute(&w)
                .map_err(|e| Exit::fail(2, format!("--workflows {}: {e}", w.display())))
        })
        .transpose()?;
    check_layout(&dir.path)?;
    apollo11_shell::files::create_private_dir(&dir.path).map_err(|e| {
        Exit::fail(
            1,
            format!("cannot create the data dir {}: {e}", dir.path.display()),
        )
    })?;
    let mut config = ServerConfig::new(dir.path.clone(), listen);
    config.options = dir.log_options()?;
    config.workflows = workflows;
    config.token = token;
    config.worker_token = worker_token_file
        .map(|f| read_token(&f))
        .transpose()
        .map_err(|e| Exit::fail(2, e.replace("--token-file", "--worker-token-file")))?;
    config.dispatch.heartbeat_timeout = heartbeat_timeout;
    config.store = dir.open_shared().await?;
    config.lease_ttl = lease_ttl;
    config.allowed_hosts = allow_host;
    config.conns = conns;
    config.gc = gc_every
        .map(|every| {
            let policy = crate::gc::file_log_policy(dir, None, None)?;
            Ok::<_, Exit>(GcSchedule { every, policy })
        })
        .transpose()?;
    config.metrics = Some(
        apollo11_server::metrics::install()
            .map_err(|e| Exit::fail(1, format!("cannot record metrics: {e}")))?,
    );
    #[cfg(feature = "postgres")]
    apollo11_postgres::metrics::describe();
    let server = Server::bind(config).await.map_err(serve_exit)?;
    let events = match &dir.shared {
        Some(shared) => format!(
            "the database's schema {} (step files in {})",
            crate::shared::schema(shared),
            dir.path.display()
        ),
        None => dir.path.display().to_string(),
    };
    out::line(format!(
        "serving {events} at http://{}/ (Ctrl-C stops)",
        server.local_addr()
    ))?;
    server
        .run(async move { interrupts.recv().await })
        .await
        .map_err(serve_exit)?;
    Ok(Exit::code(0))
}

fn serve_exit(e: ServeError) -> Exit {
    match e {
        ServeError::Store(s) => store_exit(s),
        ServeError::Engine(e) => crate::data::engine_exit(e),
        ServeError::Config(_) => Exit::fail(2, e.to_string()),
        other => Exit::fail(1, other.to_string()),
    }
}

/// `--lease-ttl`: a humantime duration in the range the engine accepts.
pub fn parse_lease_ttl(text: &str) -> Result<Duration, String> {
    let ttl = humantime::parse_duration(text).map_err(|e| format!("`{text}`: {e}"))?;
    let (min, max) = (
        apollo11_runtime::LEASE_TTL_MIN,
        apollo11_store::LEASE_TTL_MAX,
    );
    if !(min..=max).contains(&ttl) {
        return Err(format!(
            "`{text}`: from {} to {} is allowed",
            humantime::format_duration(min),
            humantime::format_duration(max)
        ));
    }
    Ok(ttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_ttl_is_held_to_the_range_the_engine_accepts() {
        assert_eq!(parse_lease_ttl("10s"), Ok(Duration::from_secs(10)));
        assert!(parse_lease_ttl("1ms").unwrap_err().contains("is allowed"));
        assert!(parse_lease_ttl("soon").is_err());
    }
}
