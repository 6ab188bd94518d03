//! `Server`: binds its address, opens the data dir's log for writing (the lock records the
//! address), owns the engine, resumes the runs it finds interrupted, and serves the API
//! until it is told to stop.

use crate::conns::{self, ConnLimits};
use crate::drive;
use crate::fanout::Fanout;
use crate::guard::Hosts;
use crate::router::router;
use crate::workflows::Registry;
use apollo11_dispatch::Dispatcher;
use apollo11_log::{FileLog, Options};
use apollo11_prometheus::Prometheus;
use apollo11_runtime::{Engine, EngineConfig, Inspector, Leasing};
use apollo11_store::{DynStore, EventStore, StoreError};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The address `apollo11 serve` binds by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8711";

/// How a server is set up.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The data dir (absolute).
    pub data_dir: PathBuf,
    /// The log's options.
    pub options: Options,
    /// Where to listen (port 0: any free port).
    pub listen: SocketAddr,
    /// The folder of workflow files runs can be started from.
    pub workflows: Option<PathBuf>,
    /// The bearer token every API call needs, if any.
    pub token: Option<String>,
    /// The token of workers: it opens the worker routes and nothing else (without one, the
    /// worker routes take `token`).
    pub worker_token: Option<String>,
    /// How the dispatcher judges workers (heartbeat timeout, adoption grace).
    pub dispatch: apollo11_dispatch::Config,
    /// The process's Prometheus recorder, which `/metrics` renders (see
    /// [`crate::metrics::install`]); without one `/metrics` answers 404.
    pub metrics: Option<Prometheus>,
    /// A store shared with other instances (a database), instead of the data dir's file
    /// log: runs are driven under its leases, this server claims its share of them, and
    /// the data dir keeps only the step files.
    pub store: Option<DynStore>,
    /// This instance's name in leases and events.
    pub instance: String,
    /// How long a lease of this server's lasts unrenewed, with a shared store.
    pub lease_ttl: std::time::Duration,
    /// Archive finished runs on a schedule (the file log only).
    pub gc: Option<crate::GcSchedule>,
    /// More names (`NAME` or `NAME:PORT`) a request's `Host` may give this server, beside
    /// its address (and the loopback names when it listens on loopback).
    pub allowed_hosts: Vec<String>,
    /// How connections are bounded: their number, their time to send a request's head, the
    /// listen backlog.
    pub conns: ConnLimits,
}

impl ServerConfig {
    /// A server of `data_dir` on `listen`, with no workflows and no token.
    pub fn new(data_dir: PathBuf, listen: SocketAddr) -> ServerConfig {
        ServerConfig {
            data_dir,
            options: Options::default(),
            listen,
            workflows: None,
            token: None,
            worker_token: None,
            dispatch: apollo11_dispatch::Config::default(),
            metrics: None,
            store: None,
            instance: EngineConfig::default().instance,
            lease_ttl: DEFAULT_LEASE_TTL,
            gc: None,
            allowed_hosts: Vec::new(),
            conns: ConnLimits::default(),
        }
    }
}

/// How long a lease lasts unrenewed by default: a dead instance's runs are taken over after it.
pub const DEFAULT_LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// Why a server did not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A setting is refused (a non-loopback address without a token, an invalid workflow).
    #[error("{0}")]
    Config(String),
    /// The address cannot be bound or served.
    #[error("{0}")]
    Io(String),
    /// The data dir cannot be opened (locked, damaged).
    #[error(transparent)]
    Store(#[from] apollo11_store::StoreError),
    /// The engine cannot open.
    #[error(transparent)]
    Engine(#[from] apollo11_runtime::EngineError),
}

/// What every request handler shares.
pub(crate) struct AppState {
    pub engine: Engine<DynStore>,
    pub store: Arc<DynStore>,
    pub inspector: Inspector<DynStore>,
    /// Which store the server runs on, and so how it learns it is ready.
    pub backend: Backend,
    /// The store's change feed, routed to the event streams by run.
    pub fanout: Arc<Fanout>,
    pub data_dir: PathBuf,
    pub workflows_dir: Option<PathBuf>,
    pub registry: RwLock<Arc<Registry>>,
    /// The recorder `/metrics` renders.
    pub metrics: Option<Prometheus>,
    /// Turns true when the server stops: live streams end.
    pub closing: watch::Receiver<bool>,
    /// Archive finished runs on this schedule (the file log only).
    pub gc: Option<crate::GcSchedule>,
    /// Where tries placed on workers wait for them.
    pub workers: Dispatcher,
}

/// The store the server runs on.
pub(crate) enum Backend {
    /// The data dir's file log, which this server alone writes.
    FileLog(Arc<FileLog>),
    /// A store shared by instances, whose runs each claims in rounds.
    Shared {
        /// The last claim round's outcome: its error while the store is out of reach (see
        /// [`crate::drive::claim_rounds`]).
        claims: Arc<RwLock<Result<(), String>>>,
    },
}

impl Backend {
    /// Whether the store takes writes now (what `/readyz` answers): the file log's own
    /// check, or the last claim round's outcome.
    pub fn readiness(&self) -> Result<(), StoreError> {
        match self {
            Backend::FileLog(log) => log.check_writable(),
            Backend::Shared { claims } => {
                let last = claims.read().unwrap_or_else(|p| p.into_inner());
                last.clone().map_err(StoreError::unavailable)
            }
        }
    }
}

/// The inspector of `store`; of the file log's archive too, when the store is the file log.
fn inspector(store: Arc<DynStore>, backend: &Backend) -> Inspector<DynStore> {
    match backend {
        Backend::FileLog(log) => Inspector::new(store).with_archive(log.clone()),
        Backend::Shared { .. } => Inspector::new(store),
    }
}

/// Opens the data dir's file log for writing, its lock naming the server's address.
async fn open_file_log(
    config: &ServerConfig,
    address: SocketAddr,
) -> Result<Arc<FileLog>, ServeError> {
    let (data_dir, options) = (config.data_dir.clone(), config.options.clone());
    let log = tokio::task::spawn_blocking(move || {
        FileLog::open_serving(&data_dir, options, &address.to_string())
    })
    .await
    .map_err(|e| ServeError::Io(format!("opening the data dir: {e}")))??;
    Ok(Arc::new(log))
}

impl AppState {
    /// The registered workflows now.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// A server bound to its address, holding the data dir.
pub struct Server {
    listener: TcpListener,
    state: Arc<AppState>,
    token: Option<String>,
    worker_token: Option<String>,
    hosts: Hosts,
    closing: watch::Sender<bool>,
    conns: ConnLimits,
}

impl Server {
    /// Binds the address, takes the data dir (its lock records the bound address), opens the
    /// engine and loads the workflows.
    ///
    /// # Errors
    ///
    /// A non-loopback address without a token, an address that cannot be bound, a data dir
    /// held by another writer or damaged, an invalid workflow file.
    pub async fn bind(config: ServerConfig) -> Result<Server, ServeError> {
        if config.token.is_none() && !config.listen.ip().is_loopback() {
            return Err(ServeError::Config(format!(
                "--listen {}: not a loopback address; serving other hosts needs --token-file",
                config.listen
            )));
        }
        let listener = conns::bind(config.listen, config.conns.backlog)
            .map_err(|e| ServeError::Io(format!("--listen {}: {e}", config.listen)))?;
        let address = listener
            .local_addr()
            .map_err(|e| ServeError::Io(format!("--listen {}: {e}", config.listen)))?;
        let hosts = Hosts::new(address, &config.allowed_hosts).map_err(ServeError::Config)?;
        let registry = Registry::load(config.workflows.as_deref(), &config.data_dir)
            .map_err(ServeError::Config)?;
        let (store, leasing, backend) = match config.store.clone() {
            Some(_) if config.gc.is_some() => {
                return Err(ServeError::Config(
                    "--gc-every archives runs of the data dir's file log; with --store the \
                     database keeps the events"
                        .into(),
                ))
            }
            Some(shared) => {
                let leases = shared.leases().ok_or_else(|| {
                    ServeError::Config("a store shared by instances needs leases".into())
                })?;
                let leasing = Leasing::new(leases, config.lease_ttl)?;
                let claims = Arc::new(RwLock::new(Err("no claim round yet".to_owned())));
                (shared, Some(leasing), Backend::Shared { claims })
            }
            None => {
                let log = open_file_log(&config, address).await?;
                (DynStore::new(log.clone()), None, Backend::FileLog(log))
            }
        };
        let store = Arc::new(store);
        let engine_config = EngineConfig {
            instance: config.instance.clone(),
            ..EngineConfig::default()
        };
        let engine = Engine::open_with(store.clone(), engine_config, leasing).await?;
        let fanout = Arc::new(Fanout::new(store.last_event_id().await?));
        let (closing, closing_rx) = watch::channel(false);
        let state = AppState {
            engine,
            inspector: inspector(store.clone(), &backend),
            fanout,
            store,
            backend,
            data_dir: config.data_dir,
            workflows_dir: config.workflows,
            registry: RwLock::new(Arc::new(registry)),
            metrics: config.metrics,
            closing: closing_rx,
            gc: config.gc,
            workers: Dispatcher::new(config.dispatch),
        };
        Ok(Server {
            listener,
            state: Arc::new(state),
            token: config.token,
            worker_token: config.worker_token,
            hosts,
            closing,
            conns: config.conns,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The router this server answers with (routes, token, error objects), to drive it
    /// without a socket: `tower::ServiceExt::oneshot` in tests and in the fuzz target of
    /// `fuzz/`. Runs interrupted before the server started are not resumed by it.
    pub fn router(&self) -> axum::Router {
        router(
            self.state.clone(),
            self.token.clone(),
            self.worker_token.clone(),
            self.hosts.clone(),
        )
    }

    /// Resumes the runs left interrupted (paused ones stay paused), then serves until
    /// `shutdown` completes; live streams end then, and runs being driven are stopped as a
    /// crash would stop them (the next start resumes them).
    ///
    /// # Errors
    ///
    /// The store cannot be read to find interrupted runs; the listener fails.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let (fanout, store) = (self.state.fanout.clone(), self.state.store.clone());
        let closing = self.state.closing.clone();
        tokio::spawn(async move { fanout.route(store.as_ref(), closing).await });
        let background = match &self.state.backend {
            Backend::FileLog(log) => {
                let resumed = drive::resume_interrupted(&self.state).await?;
                tracing::info!(resumed, address = %self.local_addr(), "serving");
                (self.state.gc.clone()).map(|schedule| {
                    tokio::spawn(crate::gc::rounds(self.state.clone(), log.clone(), schedule))
                })
            }
            Backend::Shared { .. } => {
                tracing::info!(address = %self.local_addr(), "serving; claiming runs");
                Some(tokio::spawn(drive::claim_rounds(self.state.clone())))
            }
        };
        let firing = tokio::spawn(crate::firing::fire_rounds(self.state.clone()));
        let app = self.router();
        let closing = self.closing;
        let cap = conns::connection_cap(self.conns.max_connections);
        let stopping = async move {
            shutdown.await;
            let _ = closing.send(true);
        };
        conns::serve(self.listener, app, self.conns, cap, stopping).await;
        firing.abort();
        let _ = firing.await;
        if let Some(background) = background {
            background.abort();
            let _ = background.await;
        }
        // A last snapshot, when nothing else holds the engine any more (a stream's task
        // may still be ending: then the next start folds a little more).
        if let Ok(state) = Arc::try_unwrap(self.state) {
            state.engine.close().await;
        }
        Ok(())
    }
}
