//! Which appends of a batch go in: each one's fence and seq are checked against the run as
//! the transaction locked it, and as the batch's earlier appends left it. Pure, so the rules
//! are tested without a database.

use apollo11_core::{RunId, Seq};
use apollo11_store::StoreError;
use std::collections::HashMap;

/// A run as the transaction sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunState {
    /// Its last seq (0 for a new run).
    pub last_seq: u32,
    /// Its lease's epoch (0 for a run never leased).
    pub epoch: u64,
}

/// What one append asks for.
#[derive(Debug)]
pub struct Ask<'a> {
    /// The run.
    pub run_id: &'a RunId,
    /// The epoch of a fenced append.
    pub epoch: Option<u64>,
    /// The seq of its first event.
    pub expected: Seq,
    /// How many events it has.
    pub events: u32,
}

/// The verdict on each ask, in order: `Ok` goes in (and moves its run on in `runs`), `Err`
/// is refused and writes nothing. A stale epoch is `Fenced` whatever the seq.
pub fn plan(asks: &[Ask<'_>], runs: &mut HashMap<RunId, RunState>) -> Vec<Result<(), StoreError>> {
    asks.iter()
        .map(|ask| {
            let run = runs.entry(ask.run_id.clone()).or_default();
            if let Some(epoch) = ask.epoch.filter(|e| *e != run.epoch) {
                return Err(StoreError::Fenced {
                    run_id: ask.run_id.clone(),
                    epoch,
                    current: run.epoch,
                });
            }
            if ask.expected.0 != run.last_seq + 1 {
                return Err(StoreError::Conflict {
                    run_id: ask.run_id.clone(),
                    expected: ask.expected,
                    actual: Seq(run.last_seq),
                });
            }
            run.last_seq += ask.events;
            Ok(())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(run_id: &RunId, epoch: Option<u64>, expected: u32, events: u32) -> Ask<'_> {
        Ask {
            run_id,
            epoch,
            expected: Seq(expected),
            events,
        }
    }

    #[test]
    fn each_append_sees_the_run_as_the_earlier_ones_of_its_batch_left_it() {
        let (a, b) = (RunId::from("a"), RunId::from("b"));
        let mut runs = HashMap::from([(
            a.clone(),
            RunState {
                last_seq: 3,
                epoch: 2,
            },
        )]);
        let asks = [
            ask(&a, Some(2), 4, 2),
            ask(&a, None, 4, 1),
            ask(&a, Some(1), 6, 1),
            ask(&a, None, 6, 1),
            ask(&b, None, 1, 1),
            ask(&b, Some(0), 2, 1),
            ask(&b, Some(1), 3, 1),
        ];
        let verdicts: Vec<String> = plan(&asks, &mut runs)
            .into_iter()
            .map(|v| v.map_or_else(|e| e.to_string(), |()| "ok".into()))
            .collect();
        assert_eq!(
            verdicts,
            [
                "ok",
                "conflict on run `a`: expected to append seq 4, but the run is at seq 5",
                "run `a` is fenced off at epoch 1: its lease is at epoch 2",
                "ok",
                "ok",
                "ok",
                "run `b` is fenced off at epoch 1: its lease is at epoch 0",
            ]
        );
        assert_eq!(
            runs[&a],
            RunState {
                last_seq: 6,
                epoch: 2
            }
        );
        assert_eq!(runs[&b].last_seq, 2);
    }
}
