//! T12: a model-based test. Random sequences of appends (some with a stale seq), snapshots,
//! reopens and power losses run against the log and against a plain `Vec`; after every
//! operation the log must read back exactly what the model holds. Every acknowledged
//! operation was synced, so a power loss must lose nothing. 256 cases per run by default;
//! `APOLLO11_MODEL_CASES=10000` for the long run.

use apollo11_core::{EventId, EventKind, Payload, RunId, Seq};
use apollo11_log::{FileLog, Options, SimFs};
use apollo11_store::{conformance::event, EventStore, Snapshot, SnapshotStore, StoreError};
use proptest::prelude::*;
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Op {
    Append { run: u8, events: u8, bytes: u16 },
    StaleAppend { run: u8 },
    Snapshot,
    Reopen,
    PowerLoss { seed: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..3, 1u8..4, 0u16..1500).prop_map(|(run, events, bytes)| Op::Append { run, events, bytes }),
        1 => (0u8..3).prop_map(|run| Op::StaleAppend { run }),
        1 => Just(Op::Snapshot),
        1 => Just(Op::Reopen),
        1 => any::<u64>().prop_map(|seed| Op::PowerLoss { seed }),
    ]
}

#[derive(Default)]
struct Model {
    /// (run, seq, payload) in event-id order.
    events: Vec<(String, u32, Payload)>,
    snapshot: Option<Snapshot>,
}

impl Model {
    fn last_seq(&self, run: &str) -> u32 {
        self.events.iter().filter(|(r, _, _)| r == run).count() as u32
    }
}

fn options() -> Options {
    Options {
        segment_bytes_max: 4096,
        snapshots_kept: 2,
        ..Options::default()
    }
}

async fn check(log: &FileLog, model: &Model) -> Result<(), TestCaseError> {
    let found = log.read_from(EventId(1), u32::MAX).await.unwrap();
    prop_assert_eq!(found.len(), model.events.len());
    for (e, (run, seq, payload)) in found.iter().zip(&model.events) {
        prop_assert_eq!(
            (e.run_id.as_str(), e.seq.0, &e.payload),
            (run.as_str(), *seq, payload)
        );
    }
    for summary in log.list_runs().await.unwrap() {
        prop_assert_eq!(summary.last_seq.0, model.last_seq(summary.run_id.as_str()));
    }
    prop_assert_eq!(log.load_snapshot().await.unwrap(), model.snapshot.clone());
    Ok(())
}

async fn run_ops(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut fs = Arc::new(SimFs::new());
    let mut log = FileLog::open_with(fs.clone(), "/d", options()).unwrap();
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Append { run, events, bytes } => {
                let run = format!("run-{run}");
                let seq = model.last_seq(&run) + 1;
                let batch: Vec<_> = (0..events)
                    .map(|i| {
                        event(
                            Some("s"),
                            EventKind::Started,
                            1,
                            Payload::Inline(vec![i; bytes as usize]),
                        )
                    })
                    .collect();
                log.append(&RunId::from(run.as_str()), Seq(seq), batch.clone())
                    .await
                    .unwrap();
                for (i, e) in batch.into_iter().enumerate() {
                    model.events.push((run.clone(), seq + i as u32, e.payload));
                }
            }
            Op::StaleAppend { run } => {
                let run = format!("run-{run}");
                let stale = Seq(model.last_seq(&run));
                let result = log
                    .append(
                        &RunId::from(run.as_str()),
                        stale,
                        vec![event(Some("s"), EventKind::Started, 1, Payload::Empty)],
                    )
                    .await;
                prop_assert!(
                    matches!(result, Err(StoreError::Conflict { .. })),
                    "{:?}",
                    result
                );
            }
            Op::Snapshot => {
                let snapshot = Snapshot {
                    watermark: EventId(model.events.len() as u64),
                    state: model.events.len().to_le_bytes().to_vec(),
                };
                log.save_snapshot(snapshot.clone()).await.unwrap();
                model.snapshot = Some(snapshot);
            }
            Op::Reopen => {
                drop(log);
                log = FileLog::open_with(fs.clone(), "/d", options()).unwrap();
            }
            Op::PowerLoss { seed } => {
                drop(log);
                fs = Arc::new(fs.power_loss(seed));
                log = FileLog::open_with(fs.clone(), "/d", options()).unwrap();
            }
        }
        check(&log, &model).await?;
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("APOLLO11_MODEL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn the_log_behaves_like_a_vec_through_reopens_and_power_losses(ops in proptest::collection::vec(op(), 1..40)) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(run_ops(ops))?;
    }
}
