//! Opens a log in a fresh directory, appends a run's first events, reopens it and reads
//! them back, with `apollo11-log` as the only dependency (its async calls run on the tokio
//! it re-exports).

use apollo11_log::tokio::runtime::Builder;
use apollo11_log::{verify, EventKind, EventStore, FileLog, NewEvent, Options, Payload, RunId, Seq};

fn event(step: Option<&str>, kind: EventKind) -> NewEvent {
    NewEvent {
        step: step.map(Into::into),
        kind,
        attempt: u32::from(step.is_some()),
        at_ms: 1_000,
        instance: "log-user".into(),
        payload: Payload::inline("{}"),
    }
}

fn main() {
    let dir = std::env::temp_dir().join(format!("apollo11-log-user-{}", std::process::id()));
    let runtime = Builder::new_current_thread().enable_all().build().unwrap();
    let run = RunId::from("run-1");
    let created = event(None, EventKind::RunCreated { workflow: "wf".into() });
    let started = event(Some("extract"), EventKind::Started);
    runtime.block_on(async {
        let log = FileLog::open(&dir, Options::default()).unwrap();
        let ids = log.append(&run, Seq(1), vec![created, started]).await.unwrap();
        assert_eq!(ids.len(), 2);
    });
    runtime.block_on(async {
        let log = FileLog::open(&dir, Options::default()).unwrap();
        let events = log.read_run(&run, Seq(1)).await.unwrap();
        let kinds: Vec<_> = events.iter().map(|e| e.kind.clone()).collect();
        assert_eq!(kinds, [EventKind::RunCreated { workflow: "wf".into() }, EventKind::Started]);
    });
    assert!(verify(&dir).unwrap().is_clean());
    std::fs::remove_dir_all(&dir).unwrap();
    println!("log-user: appended, reopened and read back 2 events");
}
