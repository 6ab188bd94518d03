//! Shrinking a failing seed: the same scenario cut to fewer crashes, actions, steps and
//! worker faults ([`Scenario::truncated`]), each cut kept only if the seed still fails,
//! until no single cut fails; the smallest failing size and its history are what a person
//! reads.

use crate::scenario::{Scenario, Size};
use crate::world::Failure;

/// The smallest size found at which `scenario` still fails, with that failure. `fails`
/// plays a scenario and returns its failure, if any; `found` is the failure at full size.
pub fn shrink(
    scenario: &Scenario,
    found: Failure,
    mut fails: impl FnMut(&Scenario) -> Option<Failure>,
) -> (Size, Failure) {
    let mut size = scenario.size();
    let mut failure = found;
    loop {
        let cuts = [
            Size {
                crashes: size.crashes.saturating_sub(1),
                ..size
            },
            Size {
                actions: size.actions.saturating_sub(1),
                ..size
            },
            Size {
                steps: size.steps.saturating_sub(1).max(1),
                ..size
            },
            Size {
                faults: size.faults.saturating_sub(1),
                ..size
            },
            Size { crashes: 0, ..size },
            Size { faults: 0, ..size },
            Size { actions: 0, ..size },
            Size { steps: 1, ..size },
        ];
        let smaller = cuts
            .into_iter()
            .filter(|c| *c != size)
            .find_map(|cut| fails(&scenario.truncated(cut)).map(|f| (cut, f)));
        match smaller {
            Some((cut, f)) => (size, failure) = (cut, f),
            None => return (size, failure),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_needing_two_crashes_and_a_step_shrinks_to_just_those() {
        let scenario = (0..).map(Scenario::generate).find(|s| {
            let size = s.size();
            size.crashes >= 3 && size.actions >= 2 && size.steps >= 3
        });
        let scenario = scenario.expect("some seed draws a large scenario");
        let fails = |s: &Scenario| {
            (s.crashes.len() >= 2).then(|| Failure::from(format!("{} crashes", s.crashes.len())))
        };
        let (size, failure) = shrink(&scenario, Failure::from("full".to_owned()), fails);
        assert_eq!(
            (size.crashes, size.actions, size.steps, size.faults),
            (2, 0, 1, 0)
        );
        assert_eq!(failure.message, "2 crashes");
    }
}
