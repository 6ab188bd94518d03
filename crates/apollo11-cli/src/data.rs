//! Opening the data directory, and turning store errors into the command's exit codes: 2 for
//! what the user asked wrong, 3 for damaged data, 4 for a data dir another writer holds (or
//! a `gc` swap in progress that a read-only command met).

use crate::shared::Shared;
use crate::Exit;
use apollo11_log::{FileLog, Options};
use apollo11_runtime::{Engine, EngineConfig, EngineError, Leasing};
use apollo11_store::{DynStore, StoreError};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Exit code and message for a store error.
pub fn store_exit(e: StoreError) -> Exit {
    match e {
        StoreError::Locked { .. } => Exit::fail(
            4,
            format!("{e}; read-only commands (status, events, runs, plan, verify) still work"),
        ),
        // Another process's `gc` swap met half done (or one a crash left): not damage.
        StoreError::GcInProgress { .. } => Exit::fail(4, e.to_string()),
        StoreError::Corrupted { .. } => damaged(e),
        // Something the log points at (a blob, an event) is gone: the data dir is damaged.
        StoreError::NotFound { .. } => damaged(format!(
            "{e}, but the log refers to it: the data dir is damaged"
        )),
        // A refused append (an archived run takes no more events), a bad name.
        StoreError::Invalid { .. } => Exit::fail(2, e.to_string()),
        other => Exit::fail(1, other.to_string()),
    }
}

/// Exit 3 for damaged data, with what to do next. The library's errors name the damage
/// only: advice about commands is this binary's to give.
pub fn damaged(what: impl std::fmt::Display) -> Exit {
    Exit::fail(3, format!("{what}; {DAMAGE_ADVICE}"))
}

/// What every exit 3 tells the operator.
pub const DAMAGE_ADVICE: &str = "run `apollo11 verify` to see all the damage, and `apollo11 repair` to see what it would cut to get past it (nothing is cut without `--yes`)";

pub fn engine_exit(e: EngineError) -> Exit {
    match e {
        EngineError::Store(s) => store_exit(s),
        EngineError::UnknownRun { .. } => {
            Exit::fail(2, format!("{e} in this data dir (see `apollo11 runs`)"))
        }
        EngineError::Leased { .. } => Exit::fail(4, e.to_string()),
        EngineError::BeforeRun { .. }
        | EngineError::UnknownStep { .. }
        | EngineError::RunExists { .. }
        | EngineError::NotAllowed { .. }
        | EngineError::OverrideNotAllowed { .. }
        | EngineError::RerunNotAllowed { .. }
        | EngineError::SignalNotAllowed { .. } => Exit::fail(2, e.to_string()),
        other => Exit::fail(1, other.to_string()),
    }
}

/// The data directory and how its log is laid out; or, with `--store`, the database that
/// holds the events instead (the data dir keeps the step files).
pub struct DataDir {
    /// Always absolute: steps run in their workflow's folder and get paths inside it.
    pub path: std::path::PathBuf,
    pub segment_bytes: u64,
    /// `--compress-after`.
    pub compress_after: Option<usize>,
    /// `--store` and `--store-schema`: a PostgreSQL database shared by instances.
    pub shared: Option<Shared>,
}

/// How long a lease of this process lasts unrenewed (`run`, `resume` and `serve` with
/// `--store`): another instance takes its runs over after it.
pub const LEASE_TTL: Duration = Duration::from_secs(10);

impl DataDir {
    /// `--data-dir` made absolute (against the current folder; symlinks are kept), and
    /// `--store` checked: a `postgres://` or `postgresql://` url.
    pub fn new(
        path: &Path,
        (segment_bytes, compress_after): (u64, Option<usize>),
        store: Option<&str>,
        schema: &str,
    ) -> Result<DataDir, Exit> {
        let path = std::path::absolute(path)
            .map_err(|e| Exit::fail(2, format!("--data-dir {}: {e}", path.display())))?;
        let shared = store
            .map(|url| crate::shared::options(url, schema))
            .transpose()?;
        Ok(DataDir {
            path,
            segment_bytes,
            compress_after,
            shared,
        })
    }

    /// The options the data dir's log is opened with for writing (`run`, `serve`, …).
    ///
    /// # Errors
    ///
    /// Exit code 2 naming `--segment-bytes` when it is out of range.
    pub fn log_options(&self) -> Result<Options, Exit> {
        let options = Options {
            segment_bytes_max: self.segment_bytes,
            compress_after: self.compress_after,
            ..Options::default()
        };
        options
            .validate()
            .map_err(|e| Exit::fail(2, format!("--segment-bytes: {e}")))?;
        Ok(options)
    }

    /// Opens the shared store of `--store`, if given.
    pub async fn open_shared(&self) -> Result<Option<DynStore>, Exit> {
        let Some(options) = &self.shared else {
            return Ok(None);
        };
        crate::shared::open(options).await.map(Some)
    }

    /// The store readers use: the shared one, or the data dir's log read-only.
    pub async fn open_reader(&self) -> Result<DynStore, Exit> {
        match self.open_shared().await? {
            Some(store) => Ok(store),
            None => Ok(DynStore::new(Arc::new(open_reader(&self.path)?))),
        }
    }

    /// Refuses a command that works on the data dir's log only when `--store` is given.
    pub fn file_log_only(&self, command: &str) -> Result<(), Exit> {
        if self.shared.is_some() {
            return Err(Exit::fail(
                2,
                format!("`{command}` checks the data dir's file log; with --store the database keeps the events"),
            ));
        }
        Ok(())
    }
}

/// An engine on `store`, under its leases when it is shared.
pub async fn open_engine(store: &Arc<DynStore>) -> Result<Engine<DynStore>, Exit> {
    let leasing = store
        .leases()
        .map(|leases| Leasing::new(leases, LEASE_TTL))
        .transpose()
        .map_err(store_exit)?;
    Engine::open_with(store.clone(), EngineConfig::default(), leasing)
        .await
        .map_err(engine_exit)
}

impl std::ops::Deref for DataDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

/// Says what is wrong when `--data-dir` (which may not exist yet) cannot be a data dir: it is
/// a file, or its `segments` is not a folder (damage, or a folder that is not Apollo-11's).
pub fn check_layout(dir: &Path) -> Result<(), Exit> {
    if dir.exists() && !dir.is_dir() {
        let message = format!("--data-dir {} is not a folder", dir.display());
        return Err(Exit::fail(2, message));
    }
    let segments = dir.join("segments");
    if segments.exists() && !segments.is_dir() {
        return Err(damaged(format!(
            "{} is not a folder: this data dir is damaged, or is not an Apollo-11 data dir",
            segments.display()
        )));
    }
    Ok(())
}

/// Opens the data dir for writing (takes the lock).
pub fn open_writer(dir: &DataDir) -> Result<FileLog, Exit> {
    let options = dir.log_options()?;
    check_layout(&dir.path)?;
    apollo11_shell::files::create_private_dir(&dir.path).map_err(|e| {
        Exit::fail(
            1,
            format!("cannot create the data dir {}: {e}", dir.path.display()),
        )
    })?;
    FileLog::open(&dir.path, options).map_err(store_exit)
}

/// Opens for writing a data dir that holds a log already: for the commands that only rework
/// one (`gc`, `compact`), where a mistyped `--data-dir` must not become a new, empty one.
pub fn open_existing_writer(dir: &DataDir) -> Result<FileLog, Exit> {
    require_data(&dir.path)?;
    open_writer(dir)
}

/// Opens the data dir read-only (no lock: works while a run is in progress).
pub fn open_reader(dir: &Path) -> Result<FileLog, Exit> {
    require_data(dir)?;
    FileLog::open_read_only(dir).map_err(store_exit)
}

/// Refuses a data dir that holds no log (exit 2).
fn require_data(dir: &Path) -> Result<(), Exit> {
    check_layout(dir)?;
    if dir.join("segments").is_dir() {
        return Ok(());
    }
    Err(Exit::fail(
        2,
        format!(
            "{} holds no Apollo-11 data (nothing has run with this --data-dir yet)",
            dir.display()
        ),
    ))
}
