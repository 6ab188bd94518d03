//! `Options::deterministic`: appends committed on the appender's task, reads without the
//! blocking pool, `scan_runs` in turn. The store behaves as in the default mode: the
//! conformance suite, the same scans, a failed sync that stops it.

use crate::common::{append, created, sized, small};
use apollo11_core::{Event, EventId, EventRef, RunId, Seq};
use apollo11_log::{Fault, FileLog, Options, SimFs};
use apollo11_store::{EventStore, StoreError};
use std::sync::Arc;

fn deterministic() -> Options {
    Options {
        deterministic: true,
        ..small()
    }
}

/// A deterministic log on a fresh simulated file system.
pub fn deterministic_log() -> Arc<FileLog> {
    Arc::new(FileLog::open_with(Arc::new(SimFs::new()), "/data", deterministic()).unwrap())
}

/// The conformance suite in deterministic mode.
mod conformance {
    apollo11_store::conformance_tests!(super::deterministic_log());
}

fn scan(log: &FileLog, visitors: usize) -> Vec<Vec<Event>> {
    let mut seen: Vec<Vec<Event>> = vec![Vec::new(); visitors];
    let mut visit: Vec<_> = (seen.iter_mut())
        .map(|events| move |e: &EventRef<'_>| events.push(e.to_event()))
        .collect();
    log.scan_runs(&mut visit).unwrap();
    drop(visit);
    seen
}

#[tokio::test]
async fn scans_in_turn_hand_each_visitor_what_threads_would() {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/d", deterministic()).unwrap();
    for r in 0..5 {
        let run = format!("run-{r}");
        append(&log, &run, vec![created()]).await;
        for turn in 0..8 {
            append(&log, &run, vec![sized(&format!("s{turn}"), 300)]).await;
        }
    }
    let in_turn = scan(&log, 3);
    drop(log);
    let threaded = FileLog::open_with(fs, "/d", small()).unwrap();
    assert_eq!(in_turn, scan(&threaded, 3));
    assert_eq!(in_turn.iter().map(Vec::len).sum::<usize>(), 5 * 9);
}

#[tokio::test]
async fn a_failed_sync_answers_the_append_and_stops_the_store() {
    let fs = Arc::new(SimFs::new());
    let log = FileLog::open_with(fs.clone(), "/d", deterministic()).unwrap();
    append(&log, "run", vec![created()]).await;
    fs.set_fault(Some(Fault::FailSync(0)));
    let run = RunId::from("run");
    let failed = log.append(&run, Seq(2), vec![sized("s", 10)]).await;
    assert!(
        matches!(failed, Err(StoreError::Poisoned { .. })),
        "{failed:?}"
    );
    let after = log.append(&run, Seq(2), vec![sized("s", 10)]).await;
    assert!(
        matches!(after, Err(StoreError::Poisoned { .. })),
        "{after:?}"
    );
    drop(log);
    fs.set_fault(None);
    let reopened = FileLog::open_with(fs, "/d", deterministic()).unwrap();
    let events = reopened.read_from(EventId(1), 10).await.unwrap();
    assert!(!events.is_empty() && events.len() <= 2, "{events:?}");
}
