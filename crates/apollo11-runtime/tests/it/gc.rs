//! A `gc` on the file log beside an open engine: once told (`Engine::forget`,
//! `Inspector::forget`), the engine and the inspector keep nothing of the moved runs, which
//! still answer from the archive, and a restart does not bring them back.

use crate::scripted::{Act, Ledger, Scripted};
use apollo11_log::{FileLog, Options};
use apollo11_runtime::inspect::RunFilter;
use apollo11_runtime::{
    Engine, EngineConfig, Idempotency, Inspector, RunId, RunStatus, StepBuilder, Workflow,
};
use std::sync::Arc;

const RUNS: usize = 40;

async fn open(dir: &std::path::Path) -> (Arc<FileLog>, Engine<FileLog>) {
    let options = Options {
        segment_bytes_max: 4096,
        ..Options::default()
    };
    let log = Arc::new(FileLog::open(dir, options).unwrap());
    // Snapshots every few events: the newest before the `gc` holds the runs it moves.
    let config = EngineConfig {
        snapshot_every_events: 10,
        ..EngineConfig::default()
    };
    let engine = Engine::open(log.clone(), config).await.unwrap();
    (log, engine)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_forgets_the_runs_a_gc_moved_and_they_still_answer_from_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let (log, engine) = open(dir.path()).await;
    let code = Scripted::new("s", |_| Act::Ok(0), &Ledger::default(), &Arc::default());
    let workflow = Workflow::builder("wf")
        .step(StepBuilder::new("s", code).idempotency(Idempotency::Natural))
        .build()
        .unwrap();
    let workflow = Arc::new(workflow);
    let runs = runs_of(RUNS);
    for run in &runs {
        let outcome = engine
            .start(&workflow, run.clone())
            .await
            .unwrap()
            .outcome();
        assert_eq!(outcome.await.unwrap(), RunStatus::Succeeded);
    }
    let inspector = Inspector::new(log.clone());
    let listed = inspector.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(listed.runs.len(), RUNS);
    assert_eq!(
        (engine.runs_held().await.unwrap(), inspector.runs_held()),
        (RUNS, RUNS)
    );
    let mut before = Vec::new();
    for run in &runs {
        before.push(inspector.status(run, None).await.unwrap());
    }

    let worker = log.clone();
    let collected = tokio::task::spawn_blocking(move || worker.collect(&runs_of(RUNS)))
        .await
        .unwrap()
        .unwrap();
    let moved = collected.moved.len();
    assert!(moved >= RUNS / 2, "only {moved} of {RUNS} runs moved");
    engine.forget(&collected.moved).await;
    inspector.forget(&collected.moved);
    let left = RUNS - moved;
    assert_eq!(
        (engine.runs_held().await.unwrap(), inspector.runs_held()),
        (left, left)
    );

    // The moved runs answer from the archive as before.
    for (run, status) in runs.iter().zip(&before) {
        assert_eq!(&inspector.status(run, None).await.unwrap(), status, "{run}");
        assert!(!inspector
            .events(run, Default::default(), 100)
            .await
            .unwrap()
            .events
            .is_empty());
        engine.state(run).await.unwrap();
    }
    assert_eq!(log.archived_runs().await.unwrap().len(), moved);
    assert_eq!(
        inspector
            .runs(&RunFilter::default())
            .await
            .unwrap()
            .runs
            .len(),
        left
    );

    // A restart (after a kill: no last snapshot at closing) loads the one `forget` saved,
    // not an older one that holds the moved runs.
    drop(engine);
    drop(inspector);
    drop(Arc::into_inner(log).expect("the engine let its store go"));
    let (_log, engine) = open(dir.path()).await;
    assert_eq!(engine.runs_held().await.unwrap(), left);
}

fn runs_of(n: usize) -> Vec<RunId> {
    (0..n)
        .map(|i| RunId::from(format!("r{i:02}").as_str()))
        .collect()
}
