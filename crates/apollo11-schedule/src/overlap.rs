//! What a fire does while the run of an earlier fire of its schedule is still going.

/// A schedule's overlap policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Overlap {
    /// Starts nothing for this fire (counted as skipped).
    #[default]
    Skip,
    /// Starts the run anyway.
    Allow,
    /// Starts the run once the earlier one has ended.
    Queue,
}

impl Overlap {
    /// The policy a file names: `skip`, `allow`, `queue`.
    pub fn parse(text: &str) -> Option<Overlap> {
        Some(match text {
            "skip" => Overlap::Skip,
            "allow" => Overlap::Allow,
            "queue" => Overlap::Queue,
            _ => return None,
        })
    }

    /// The policy's name, as a file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Allow => "allow",
            Overlap::Queue => "queue",
        }
    }
}
