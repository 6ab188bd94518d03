//! Proptest strategies for histories (the `proptest` feature), built with [`History`].

use crate::History;
use apollo11_core::strategies::arb_event_kind;
use apollo11_core::{Event, EventKind, Payload, TriggerRule};
use proptest::prelude::*;

/// One random event: its step, kind, attempt delta, noise and wait.
type Pick = (usize, EventKind, u32, u32, u64);

fn arb_picks(steps: usize, max_len: usize) -> impl Strategy<Value = Vec<Pick>> {
    let one = (0..steps, arb_event_kind(), 0u32..3, 0u32..20, 0u64..5_000);
    proptest::collection::vec(one, 0..max_len)
}

/// A run's history over `steps` steps: mostly plausible (attempts near the step's current
/// count, run-level `RunCreated` first, operator actions on the run, an `Expanded` carrying
/// its items), sometimes wrong in every way the table can see: wrong attempts, events out
/// of order, a missing `RunCreated`, a bad seq, a run-level event naming a step.
pub fn arb_history(steps: usize, max_len: usize) -> impl Strategy<Value = Vec<Event>> {
    (any::<bool>(), arb_picks(steps, max_len)).prop_map(move |(created, picks)| {
        let mut history = History::new("run-p");
        if created {
            history = history.created("wf", Payload::Empty);
        }
        let mut events = extend(history, steps, picks).into_events();
        if let Some(e) = events.get_mut(max_len / 2).filter(|_| !created) {
            e.seq = apollo11_core::Seq(e.seq.0 + 7);
        }
        events
    })
}

/// A history whose step `s0` is a template that expanded into 0 to 3 items at once after
/// `RunCreated`, followed by random events as in [`arb_history`].
pub fn arb_history_with_expansion(
    steps: usize,
    max_len: usize,
) -> impl Strategy<Value = Vec<Event>> {
    (0usize..4, arb_picks(steps, max_len)).prop_map(move |(items, picks)| {
        let names = ["a", "b", "c"];
        let history = History::new("run-p")
            .created("wf", Payload::Empty)
            .started("s0")
            .expanded("s0", &names[..items]);
        extend(history, steps, picks).into_events()
    })
}

fn extend(mut history: History, steps: usize, picks: Vec<Pick>) -> History {
    let mut attempts: Vec<u32> = (0..steps)
        .map(|s| history.attempt(&format!("s{s}")))
        .collect();
    for (step, kind, delta, noise, wait) in picks {
        let name = format!("s{step}");
        if matches!(kind, EventKind::Started) && delta > 0 {
            attempts[step] += 1;
        }
        // One event in twenty gets a random attempt number.
        let attempt = if noise == 0 { delta } else { attempts[step] };
        // Operator actions go to the run most of the time, and to a step (an anomaly)
        // otherwise; a stray `RunCreated` goes to a step (a second one on the run is
        // tested on its own).
        let operator = kind.is_run_level() && !matches!(kind, EventKind::RunCreated { .. });
        let step = (!operator || noise % 4 == 0).then_some(name.as_str());
        let payload = match kind {
            EventKind::Expanded { items } => {
                Payload::inline(format!("[{}]", vec!["1"; items as usize].join(",")))
            }
            _ => Payload::Empty,
        };
        history = history.wait(wait).raw(step, kind, attempt, payload);
    }
    history
}

/// A trigger rule, mostly the default one.
pub fn arb_trigger_rule() -> impl Strategy<Value = TriggerRule> {
    prop_oneof![
        4 => Just(TriggerRule::AllSucceeded),
        1 => Just(TriggerRule::AllDone),
        1 => Just(TriggerRule::OneFailed),
    ]
}
