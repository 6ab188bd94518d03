//! What each try of a step used, from its `attempt_usage` events: the figures a front end
//! shows per attempt and draws over attempts.

use apollo11_core::{Event, EventKind, Usage};
use serde::Serialize;
use std::collections::BTreeMap;

/// What one try of a step used (an element of a step's `usage` in the run view).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TryUsage {
    /// The attempt.
    pub attempt: u32,
    /// Whether it was a try of the step's compensation.
    pub compensation: bool,
    /// What it used.
    #[serde(flatten)]
    pub usage: Usage,
}

/// Each step's tries' usage, in the order of the log (a try of a compensation is one
/// whose step's last `compensating` came after its last `started`).
pub(crate) fn usages(events: &[Event]) -> BTreeMap<&str, Vec<TryUsage>> {
    let mut compensating = BTreeMap::new();
    let mut used: BTreeMap<&str, Vec<TryUsage>> = BTreeMap::new();
    for event in events {
        let Some(step) = &event.step else { continue };
        match &event.kind {
            EventKind::Started => {
                compensating.insert(step.as_str(), false);
            }
            EventKind::Compensating => {
                compensating.insert(step.as_str(), true);
            }
            EventKind::AttemptUsage(usage) => {
                used.entry(step.as_str()).or_default().push(TryUsage {
                    attempt: event.attempt,
                    compensation: compensating.get(step.as_str()) == Some(&true),
                    usage: usage.clone(),
                });
            }
            _ => {}
        }
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo11_core::Seq;

    #[test]
    fn each_try_keeps_its_usage_and_whether_it_compensated() {
        let used = |attempt, wall_ms| {
            Event::new(
                "r",
                Seq(1),
                Some("s"),
                EventKind::AttemptUsage(Usage {
                    isolation: "cgroup".into(),
                    wall_ms,
                    ..Usage::default()
                }),
            )
            .with_attempt(attempt)
        };
        let events = [
            Event::new("r", Seq(1), Some("s"), EventKind::Started).with_attempt(1),
            used(1, 10),
            Event::new("r", Seq(1), Some("s"), EventKind::Compensating).with_attempt(1),
            used(1, 20),
            Event::new("r", Seq(1), Some("t"), EventKind::Started).with_attempt(1),
        ];
        let usages = usages(&events);
        let s = &usages["s"];
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].compensation, s[0].usage.wall_ms), (false, 10));
        assert_eq!((s[1].compensation, s[1].usage.wall_ms), (true, 20));
        assert!(!usages.contains_key("t"));
    }
}
