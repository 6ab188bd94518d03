//! Proptest strategies for histories (the `proptest` feature), built with [`History`].

use crate::History;
use apollo11_core::strategies::arb_event_kind;
use apollo11_core::{Event, EventKind, Payload, TriggerRule};
use proptest::prelude::*;

/// A run's history over `steps` steps: mostly plausible (attempts near the step's current
/// count, run-level `RunCreated` first, operator actions on the run), sometimes wrong in
/// every way the table can see: wrong attempts, events out of order, a missing
/// `RunCreated`, a bad seq, a run-level event naming a step.
pub fn arb_history(steps: usize, max_len: usize) -> impl Strategy<Value = Vec<Event>> {
    let one = (0..steps, arb_event_kind(), 0u32..3, 0u32..20, 0u64..5_000);
    (any::<bool>(), proptest::collection::vec(one, 0..max_len)).prop_map(move |(created, picks)| {
        let mut history = History::new("run-p");
        if created {
            history = history.created("wf", Payload::Empty);
        }
        let mut attempts = vec![0u32; steps];
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
            history = history.wait(wait).raw(step, kind, attempt, Payload::Empty);
        }
        let mut events = history.into_events();
        if let Some(e) = events.get_mut(max_len / 2).filter(|_| !created) {
            e.seq = apollo11_core::Seq(e.seq.0 + 7);
        }
        events
    })
}

/// A trigger rule, mostly the default one.
pub fn arb_trigger_rule() -> impl Strategy<Value = TriggerRule> {
    prop_oneof![
        4 => Just(TriggerRule::AllSucceeded),
        1 => Just(TriggerRule::AllDone),
        1 => Just(TriggerRule::OneFailed),
    ]
}
