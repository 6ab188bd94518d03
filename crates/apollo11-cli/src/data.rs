//! Opening the data directory, and turning store errors into the command's exit codes: 2 for
//! what the user asked wrong, 3 for damaged data, 4 for a data dir another writer holds.

use crate::Exit;
#[cfg(test)]
use apollo11_core::EventId;
use apollo11_core::{RunId, Seq, WorkflowSpec};
use apollo11_log::{FileLog, Options};
use apollo11_machine::{fold, run_status, Policy, RunState, RunStatus};
use apollo11_runtime::EngineError;
use apollo11_store::{resolve, BlobStore, EventStore, StoreError};
use std::path::Path;

/// Exit code and message for a store error.
pub fn store_exit(e: StoreError) -> Exit {
    match e {
        StoreError::Locked { .. } => Exit::fail(
            4,
            format!("{e}; read-only commands (status, events, runs, plan, verify) still work"),
        ),
        StoreError::Corrupted { .. } => damaged(e),
        // Something the log points at (a blob, an event) is gone: the data dir is damaged.
        StoreError::NotFound { .. } => damaged(format!(
            "{e}, but the log refers to it: the data dir is damaged"
        )),
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
        EngineError::UnknownRun { .. }
        | EngineError::UnknownStep { .. }
        | EngineError::RunExists { .. }
        | EngineError::NotAllowed { .. } => Exit::fail(2, e.to_string()),
        other => Exit::fail(1, other.to_string()),
    }
}

/// The data directory and how its log is laid out.
pub struct DataDir {
    /// Always absolute: steps run in their workflow's folder and get paths inside it.
    pub path: std::path::PathBuf,
    pub segment_bytes: u64,
}

impl DataDir {
    /// `--data-dir` made absolute (against the current folder; symlinks are kept).
    pub fn new(path: &Path, segment_bytes: u64) -> Result<DataDir, Exit> {
        let path = std::path::absolute(path)
            .map_err(|e| Exit::fail(2, format!("--data-dir {}: {e}", path.display())))?;
        Ok(DataDir {
            path,
            segment_bytes,
        })
    }
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
    let options = Options {
        segment_bytes_max: dir.segment_bytes,
        ..Options::default()
    };
    if let Err(e) = options.validate() {
        return Err(Exit::fail(2, format!("--segment-bytes: {e}")));
    }
    check_layout(&dir.path)?;
    crate::files::create_private_dir(&dir.path).map_err(|e| {
        Exit::fail(
            1,
            format!("cannot create the data dir {}: {e}", dir.path.display()),
        )
    })?;
    FileLog::open(&dir.path, options).map_err(store_exit)
}

/// Opens the data dir read-only (no lock: works while a run is in progress).
pub fn open_reader(dir: &Path) -> Result<FileLog, Exit> {
    check_layout(dir)?;
    if !dir.join("segments").is_dir() {
        return Err(Exit::fail(
            2,
            format!(
                "{} holds no Apollo-11 data (nothing has run with this --data-dir yet)",
                dir.display()
            ),
        ));
    }
    FileLog::open_read_only(dir).map_err(store_exit)
}

/// A run's events, folded state and pinned definition.
pub struct Run {
    pub state: RunState,
    pub spec: WorkflowSpec,
    pub events: Vec<apollo11_core::Event>,
}

impl Run {
    pub fn status(&self) -> RunStatus {
        match Policy::compile(&self.spec, |_, fallback| fallback) {
            Ok((dag, policy)) => run_status(&self.state, &dag, &policy),
            Err(_) => RunStatus::Failed,
        }
    }
}

/// Loads a run, optionally only up to event `at`: its events with ids up to `at` (an id
/// between two of its events, or in a gap of the store's ids, means the earlier one).
pub async fn load_run<S: EventStore + BlobStore>(
    store: &S,
    run_id: &str,
    at: Option<u64>,
) -> Result<Run, Exit> {
    let id = RunId::from(run_id);
    let events = store.read_run(&id, Seq(1)).await.map_err(store_exit)?;
    if events.is_empty() {
        return Err(Exit::fail(
            2,
            format!("no run `{run_id}` in this data dir (see `apollo11 runs`)"),
        ));
    }
    let begins = events[0].event_id.0;
    if let Some(at) = at.filter(|at| *at < begins) {
        return Err(Exit::fail(
            2,
            format!("run `{run_id}` begins at event {begins}; --at {at} is before it existed (event ids count every run's events)"),
        ));
    }
    // The definition is pinned by the first event, whatever point in time is asked for.
    let bytes = resolve(store, &events[0].payload)
        .await
        .map_err(store_exit)?;
    let events: Vec<_> = events
        .into_iter()
        .filter(|e| at.is_none_or(|at| e.event_id.0 <= at))
        .collect();
    let state = fold(&id, &events);
    let spec = serde_json::from_slice(&bytes).map_err(|e| {
        Exit::fail(
            1,
            format!("run `{run_id}` has an unreadable definition: {e}"),
        )
    })?;
    Ok(Run {
        state,
        spec,
        events,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo11_core::{EventKind, Payload, StepName};
    use apollo11_store::{IdGaps, MemStore, NewEvent};

    fn event(step: Option<&str>, kind: EventKind, payload: Payload) -> NewEvent {
        NewEvent {
            step: step.map(StepName::from),
            kind,
            attempt: 1,
            at_ms: 0,
            instance: "test".into(),
            payload,
        }
    }

    /// `status --at` on a store whose ids have gaps: it never counts ids, it compares them.
    #[test]
    fn at_selects_by_id_comparison_on_a_store_whose_ids_have_gaps() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let store = MemStore::with_id_gaps(IdGaps::Even);
            let toml = "[workflow]\nname = \"wf\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n";
            let spec = crate::definition::parse(toml, "wf.toml", Path::new("/")).unwrap();
            let spec = serde_json::to_vec(&spec).unwrap();
            let created = EventKind::RunCreated {
                workflow: "wf".into(),
            };
            let run = RunId::from("r");
            store
                .append(
                    &RunId::from("other"),
                    Seq(1),
                    vec![event(None, created.clone(), Payload::Empty)],
                )
                .await
                .unwrap();
            let ids = store
                .append(
                    &run,
                    Seq(1),
                    vec![
                        event(None, created, Payload::inline(spec)),
                        event(Some("a"), EventKind::Started, Payload::Empty),
                        event(Some("a"), EventKind::Succeeded, Payload::Empty),
                    ],
                )
                .await
                .unwrap();
            assert_eq!(ids, [EventId(4), EventId(6), EventId(8)]);
            let seqs = |at| {
                let store = &store;
                async move {
                    let run = load_run(store, "r", at).await.map_err(|e| e.code)?;
                    Ok::<_, i32>(run.events.iter().map(|e| e.seq.0).collect::<Vec<_>>())
                }
            };
            assert_eq!(seqs(None).await, Ok(vec![1, 2, 3]));
            assert_eq!(seqs(Some(8)).await, Ok(vec![1, 2, 3]));
            assert_eq!(seqs(Some(7)).await, Ok(vec![1, 2]), "7 is a gap: up to 6");
            assert_eq!(seqs(Some(6)).await, Ok(vec![1, 2]));
            assert_eq!(seqs(Some(5)).await, Ok(vec![1]));
            assert_eq!(seqs(Some(4)).await, Ok(vec![1]));
            assert_eq!(seqs(Some(3)).await, Err(2), "before the run began");
        });
    }
}
