//! Workflow names kept once each: state kept for every run refers to its workflow by a
//! `u32` index here instead of holding a copy of the name (a long-lived server keeps such
//! state for tens of thousands of runs, and has a handful of workflows).

use serde::{Deserialize, Serialize};

/// Names in the order they were first seen; an index never changes.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct Names(Vec<String>);

impl Names {
    /// The index of `name`, added on first sight. A linear search: workflows are few.
    pub fn index(&mut self, name: &str) -> u32 {
        if let Some(i) = self.0.iter().position(|n| n == name) {
            return i as u32;
        }
        self.0.push(name.to_owned());
        (self.0.len() - 1) as u32
    }

    /// The name at `index` (`None` for an index it never gave, as in a damaged snapshot).
    pub fn get(&self, index: u32) -> Option<&str> {
        self.0.get(index as usize).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_keeps_its_first_index() {
        let mut names = Names::default();
        assert_eq!(
            (names.index("a"), names.index("b"), names.index("a")),
            (0, 1, 0)
        );
        assert_eq!((names.get(1), names.get(2)), (Some("b"), None));
    }
}
