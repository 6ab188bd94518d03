//! A seed replays exactly: the same seed gives the same event log byte for byte, on the
//! file log in deterministic mode; different seeds give different logs.

use apollo11_sim::{simulate, Crash, Memory, Scenario, SimDisk};

/// The durable segment bytes and the history a seed leaves on a fresh simulated disk.
fn log_of(seed: u64) -> (Vec<u8>, Vec<String>) {
    let mut disk = SimDisk::default();
    let outcome = simulate(&Scenario::generate(seed), &mut disk)
        .unwrap_or_else(|f| panic!("seed {seed}: {}", f.message));
    (disk.log_bytes(), outcome.history)
}

/// Seeds with a power loss, a sync error and a kill among them, and several runs.
fn eventful() -> Vec<u64> {
    let has = |s: &Scenario, f: fn(&Crash) -> bool| s.crashes.iter().any(f);
    let seeds = (0..).filter(|&seed| {
        let s = Scenario::generate(seed);
        s.runs > 1
            && !s.actions.is_empty()
            && has(&s, |c| matches!(c, Crash::PowerLoss { .. }))
            && (has(&s, |c| matches!(c, Crash::SyncError { .. }))
                || has(&s, |c| matches!(c, Crash::Kill { .. })))
    });
    seeds.take(5).collect()
}

#[test]
fn the_same_seed_gives_the_same_event_log_byte_for_byte() {
    for seed in eventful() {
        let (first, history) = log_of(seed);
        let (second, _) = log_of(seed);
        assert!(history.len() > 3, "seed {seed} wrote little: {history:?}");
        assert!(
            first == second,
            "seed {seed}: two runs left different segments"
        );
    }
}

#[test]
fn a_seed_with_steps_on_workers_killed_and_cut_off_replays_byte_for_byte() {
    let faulty = (0..).find(|&seed| {
        let s = Scenario::generate(seed);
        let remote = s.remote.as_ref();
        !s.crashes.is_empty()
            && remote.is_some_and(|r| r.faults.len() >= 2 && r.placed.iter().any(|p| *p))
            && log_of(seed).1.iter().any(|l| l.contains(" placed "))
    });
    let seed = faulty.expect("some seed places tries on faulty workers");
    let (first, history) = log_of(seed);
    assert!(
        first == log_of(seed).0,
        "seed {seed}: two runs left different segments\n{}",
        history.join("\n")
    );
}

#[test]
fn different_seeds_give_different_event_logs() {
    let logs: Vec<Vec<u8>> = eventful().into_iter().map(|seed| log_of(seed).0).collect();
    for (i, a) in logs.iter().enumerate() {
        assert!(
            logs[i + 1..].iter().all(|b| a != b),
            "two seeds left the same log"
        );
    }
}

#[test]
fn the_memory_store_replays_a_seed_too() {
    let history = |seed| {
        let outcome = simulate(&Scenario::generate(seed), &mut Memory::new(seed));
        outcome
            .unwrap_or_else(|f| panic!("seed {seed}: {}", f.message))
            .history
    };
    for seed in eventful() {
        assert_eq!(history(seed), history(seed), "seed {seed}");
    }
}
