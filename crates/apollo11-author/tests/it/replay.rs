//! Replay across run-time expansions: random definitions with templates (a `for_each` over
//! a step's output), fan-in steps, a second template after the first, trigger rules and
//! conditions, driven by `decide` through random outcomes into a history. Folding it twice
//! gives one state; and a run restored at any event as the runtime restores one (the state
//! from its JSON, the pinned definition grown by the expansions that state records, each
//! one's items read from its `Expanded` event, `grow`n and compiled) and given the rest of
//! the events, growing at each `Expanded`, equals the run kept from the start.

use crate::spec::{for_each, spec, step};
use apollo11_author::grow;
use apollo11_core::{Event, EventKind, ItemSource, Payload, TriggerRule, Value, WorkflowSpec};
use apollo11_machine::strategies::arb_trigger_rule;
use apollo11_machine::{fold, Command, History, Now, RunMachine, RunState};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// The shape of a definition: `src` lists `items`; template `t` over it; a second template
/// `u` after `t` (when `paired`); `merge` fans in after them, `clean` (`one_failed`) after
/// `merge`.
#[derive(Clone, Debug)]
struct Shape {
    items: usize,
    paired: bool,
    merge: TriggerRule,
    t: TriggerRule,
}

fn arb_shape() -> impl Strategy<Value = Shape> {
    (
        0usize..5,
        any::<bool>(),
        arb_trigger_rule(),
        arb_trigger_rule(),
    )
        .prop_map(|(items, paired, merge, t)| Shape {
            items,
            paired,
            merge,
            t,
        })
}

fn declared(shape: &Shape) -> WorkflowSpec {
    let over = || ItemSource::Output {
        step: "src".into(),
        path: "list".into(),
    };
    let mut steps = vec![step("src", &[]), for_each("t", &["src"], over())];
    steps[1].trigger = shape.t;
    let last = if shape.paired {
        steps.push(for_each("u", &["src", "t"], over()));
        "u"
    } else {
        "t"
    };
    let mut merge = step("merge", &[last]);
    merge.trigger = shape.merge;
    let mut clean = step("clean", &["merge"]);
    clean.trigger = TriggerRule::OneFailed;
    steps.extend([merge, clean]);
    spec(steps)
}

/// What attempt `attempt` of `step` does, by the outcome drawn: succeed, fail retryably,
/// fail for good, or (instead of a first attempt) be skipped by its condition.
fn outcome(h: History, step: &str, attempt: u32, draw: u8) -> History {
    match draw % 6 {
        4 if attempt == 1 => {
            let skipped = EventKind::Skipped {
                reason: "condition false".into(),
            };
            h.raw(Some(step), skipped, 0, Payload::Empty)
        }
        0..=2 => h.started(step).succeeded(step, "ok"),
        3 => h.started(step).failed(step, "boom", true),
        _ => h.started(step).failed(step, "fatal", false),
    }
}

/// Drives a run of `shape` by `decide`, each attempt ending as `draws` say.
fn drive(shape: &Shape, draws: &[u8]) -> (WorkflowSpec, Vec<Event>, RunMachine) {
    let pinned = declared(shape);
    let payload = Payload::inline(serde_json::to_vec(&pinned).unwrap());
    let mut h = History::new("run-r").created("w", payload);
    let mut m = RunMachine::compile(&pinned, fold(h.run_id(), h.events()), |_, f| f).unwrap();
    let items: Vec<String> = (0..shape.items).map(|i| format!("k{i}")).collect();
    let names: Vec<&str> = items.iter().map(String::as_str).collect();
    let (mut spec, mut ms, mut next) = (pinned.clone(), 1_000, 0);
    let nothing = BTreeSet::new();
    for _ in 0..200 {
        let commands = m.decide(Now {
            ms,
            executing: &nothing,
        });
        let Some(command) = commands.into_iter().next() else {
            break;
        };
        let seen = h.events().len();
        h = match command {
            Command::Start { step, attempt } => {
                let name = step.as_str();
                if name == "t" || name == "u" {
                    let started = h.started(name);
                    if attempt == 1 {
                        started.expanded(name, &names)
                    } else {
                        started.failed(name, "expanded already", false)
                    }
                } else if name == "src" {
                    let list = serde_json::json!({ "list": items }).to_string();
                    h.started(name).succeeded(name, &list)
                } else {
                    next += 1;
                    outcome(h, name, attempt, draws[next % draws.len()])
                }
            }
            Command::WakeAt { ms: at } => {
                ms = at;
                h
            }
            Command::Finish { .. } | Command::Pause { .. } => break,
            other => match other.event() {
                Some((step, kind, attempt)) => {
                    let step = step.as_str().to_owned();
                    h.raw(Some(&step), kind, attempt, Payload::Empty)
                }
                None => break,
            },
        };
        for e in &h.events()[seen..] {
            m.apply(e);
            if let EventKind::Expanded { .. } = e.kind {
                spec = grown(&spec, e);
                m.regraph(&spec, |_, f| f).unwrap();
            }
        }
    }
    (pinned, h.into_events(), m)
}

/// `spec` grown by the expansion `e` records, its items read from its payload.
fn grown(spec: &WorkflowSpec, e: &Event) -> WorkflowSpec {
    let bytes = e.payload.inline_bytes().expect("items inline");
    let items: Vec<Value> = serde_json::from_slice(bytes).unwrap();
    grow(spec, e.step.as_ref().unwrap().as_str(), &items).unwrap()
}

/// The run restored from the JSON of its state after `k` events, its definition grown by
/// the expansions that state records, then given the rest.
fn restored(pinned: &WorkflowSpec, events: &[Event], k: usize) -> RunMachine {
    let snapshot = serde_json::to_vec(&fold(&events[0].run_id, &events[..k])).unwrap();
    let state: RunState = serde_json::from_slice(&snapshot).unwrap();
    let spec = (state.expansions.iter()).fold(pinned.clone(), |spec, x| {
        grown(&spec, &events[x.seq.0 as usize - 1])
    });
    let mut m = RunMachine::compile(&spec, state, |_, f| f).unwrap();
    let mut spec = spec;
    for e in &events[k..] {
        m.apply(e);
        if let EventKind::Expanded { .. } = e.kind {
            spec = grown(&spec, e);
            m.regraph(&spec, |_, f| f).unwrap();
        }
    }
    m
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
    fn folding_a_run_with_expansions_twice_gives_equal_states(
        shape in arb_shape(),
        draws in proptest::collection::vec(any::<u8>(), 1..16),
    ) {
        let (_, events, kept) = drive(&shape, &draws);
        let run = &events[0].run_id;
        prop_assert_eq!(fold(run, &events), fold(run, &events));
        prop_assert_eq!(kept.state(), &fold(run, &events));
        prop_assert!(!kept.state().is_anomalous(), "decide led to an anomaly");
    }

    #[test]
    fn a_run_restored_at_any_event_plus_the_rest_equals_the_run_kept_from_the_start(
        shape in arb_shape(),
        draws in proptest::collection::vec(any::<u8>(), 1..16),
    ) {
        let (pinned, events, kept) = drive(&shape, &draws);
        let expanded = events.iter().filter(|e| matches!(e.kind, EventKind::Expanded { .. }));
        prop_assert_eq!(expanded.count(), kept.state().expansions.len());
        for k in 1..=events.len() {
            prop_assert_eq!(&restored(&pinned, &events, k), &kept, "restored after {} events", k);
        }
    }
}
