//! Compensation planning: undo in reverse topological order, in parallel waves.

use crate::{Dag, NodeId};

impl Dag {
    /// Orders `steps` (the ones to compensate) into waves. A step comes in a later wave than
    /// every step of the set that depends on it, directly or through steps outside the set;
    /// steps in one wave are independent of each other and may be compensated in parallel.
    /// Each wave is sorted by name. Repeated ids are taken once.
    ///
    /// # Panics
    ///
    /// When a step of `steps` is not a step of this graph.
    pub fn compensation_plan(&self, steps: &[NodeId]) -> Vec<Vec<NodeId>> {
        let mut wanted = vec![false; self.len()];
        for &s in steps {
            wanted[s.index()] = true;
        }
        // `below[n]`: how many waves the wanted steps downstream of `n`, and `n` itself if
        // wanted, need; a wanted step's wave is what its dependents need. Computed from the
        // sinks upwards, so there are no empty waves.
        let mut wave = vec![0usize; self.len()];
        let mut below = vec![0usize; self.len()];
        for &n in self.topological_order().iter().rev() {
            let floor = self
                .dependents(n)
                .iter()
                .map(|d| below[d.index()])
                .max()
                .unwrap_or(0);
            wave[n.index()] = floor;
            below[n.index()] = if wanted[n.index()] { floor + 1 } else { floor };
        }
        let waves_len = self
            .nodes()
            .filter(|n| wanted[n.index()])
            .map(|n| wave[n.index()] + 1);
        let mut waves = vec![Vec::new(); waves_len.max().unwrap_or(0)];
        for n in self.nodes().filter(|n| wanted[n.index()]) {
            waves[wave[n.index()]].push(n);
        }
        for w in &mut waves {
            w.sort_by(|a, b| self.name(*a).cmp(self.name(*b)));
        }
        waves
    }
}
