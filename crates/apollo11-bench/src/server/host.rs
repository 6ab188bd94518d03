//! Where the system under test runs: on a tokio runtime of its own (`apollo11`'s own,
//! `apollo11_runtime::tokio_runtime`), on a thread of its own, so the load generator's tasks never queue
//! behind its tasks or the other way round. The two still share the machine's cores.

use anyhow::{anyhow, Context, Result};
use apollo11_server::{Server, ServerConfig};
use std::future::Future;
use std::net::SocketAddr;
use tokio::sync::oneshot;

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(apollo11_runtime::tokio_runtime()?)
}

/// Runs the future `make` returns on a runtime of its own and returns its result.
pub async fn isolated<T, F>(make: impl FnOnce() -> F + Send + 'static) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>>,
{
    let (done, result) = oneshot::channel();
    std::thread::spawn(move || {
        let _ = done.send(runtime().and_then(|rt| rt.block_on(make())));
    });
    result
        .await
        .context("the isolated runtime's thread ended")?
}

/// A server serving on a runtime of its own until stopped.
pub struct Hosted {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: oneshot::Sender<()>,
    served: oneshot::Receiver<Result<()>>,
}

impl Hosted {
    /// Binds `config` (its data dir opened, interrupted runs resumed) and serves it.
    pub async fn start(config: ServerConfig) -> Result<Hosted> {
        let (bound, addr) = oneshot::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let (done, served) = oneshot::channel();
        std::thread::spawn(move || {
            let serve = async move {
                let server = Server::bind(config).await?;
                let _ = bound.send(server.local_addr());
                server.run(async move { drop(stopped.await) }).await?;
                Ok(())
            };
            let _ = done.send(runtime().and_then(|rt| rt.block_on(serve)));
        });
        match addr.await {
            Ok(addr) => Ok(Hosted { addr, stop, served }),
            Err(_) => Err(served.await.map_or_else(
                |_| anyhow!("the server's thread ended"),
                |r| {
                    r.err()
                        .unwrap_or_else(|| anyhow!("the server ended unbound"))
                },
            )),
        }
    }

    /// Stops it and waits until it has closed its data dir.
    pub async fn stop(self) -> Result<()> {
        let _ = self.stop.send(());
        self.served
            .await
            .context("the server's thread ended")?
            .context("serving")
    }
}
