//! Tries an engine left unfinished. An interruption (a crash, a kill of the engine) is not
//! the step's failure: the fold records it as `Interrupted`, which spends none of the step's
//! attempts or compensation tries, and the step is tried again per its class. A step whose
//! tries keep being interrupted may be what takes the engine down, though: after
//! [`INTERRUPTIONS_MAX`] in a row the run is paused for a person, who resumes it.

use crate::{Command, Frontier, RunState};
use apollo11_core::StepName;
use apollo11_dag::Dag;

/// Interruptions in a row of one step's tries after which its run is paused.
pub const INTERRUPTIONS_MAX: u32 = 3;

/// `Pause` for the first step (in topological order) interrupted [`INTERRUPTIONS_MAX`]
/// times in a row, unless the run is already paused.
pub(crate) fn interruptions_pause(state: &RunState, dag: &Dag, f: &Frontier) -> Option<Command> {
    if state.paused.is_some() {
        return None;
    }
    // An interrupted try leaves its step carrying an error or a failed compensation try,
    // so the troubled steps are the only ones to look at.
    f.troubled.iter().find_map(|&(_, n)| {
        let name = dag.name(n);
        let times = state.step(name).interrupted_in_a_row;
        (times >= INTERRUPTIONS_MAX).then(|| Command::Pause {
            step: StepName(name.to_owned()),
            reason: interruptions_reason(name, times),
        })
    })
}

/// Why a run is paused after its step `step` was interrupted `times` in a row.
pub fn interruptions_reason(step: &str, times: u32) -> String {
    format!(
        "step `{step}` was interrupted {times} times in a row (the engine stopped while it ran); \
         find out why, then resume the run to try it again"
    )
}
