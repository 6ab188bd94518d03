//! `apollo11_log_writable`: 1 while the log accepts appends, 0 once a failed sync poisoned
//! it (the alert `Apollo11LogRefusingWrites` reads it).

use crate::scrape::{samples, value};
use crate::{prometheus, TURN};
use apollo11_core::{EventKind, Payload, RunId, Seq};
use apollo11_log::{Fault, FileLog, Options, SimFs};
use apollo11_store::{EventStore, NewEvent, StoreError};
use std::sync::Arc;

fn created() -> NewEvent {
    NewEvent {
        step: None,
        kind: EventKind::RunCreated {
            workflow: "wf".into(),
        },
        attempt: 0,
        at_ms: 1,
        instance: "test".into(),
        payload: Payload::Empty,
    }
}

#[tokio::test]
async fn a_failed_sync_turns_log_writable_to_zero() {
    let _turn = TURN.lock().await;
    let prometheus = prometheus();
    let sim = Arc::new(SimFs::new());
    let log = FileLog::open_with(sim.clone(), "/data", Options::default()).unwrap();
    let writable = || value(&samples(&prometheus.render()), "apollo11_log_writable", &[]);
    assert_eq!(writable(), 1.0, "opened for writing");
    sim.set_fault(Some(Fault::FailSync(0)));
    let refused = log.append(&RunId::from("r"), Seq(1), vec![created()]).await;
    assert!(
        matches!(refused, Err(StoreError::Poisoned { .. })),
        "{refused:?}"
    );
    assert_eq!(writable(), 0.0, "poisoned: every later append is refused");
}
