//! What a try under way waits for, in words, for the front ends that render a run: a try of
//! a step placed by labels, with no place recorded yet, waits for a worker carrying them.

use super::command::render;
use super::remote::{words, Placement};
use apollo11_author::{Mode, Scope};
use apollo11_dispatch::Labels;
use apollo11_runtime::inspect::RunView;

/// Says, of each try of `view` under way and not placed whose step is placed by labels, that
/// it waits for `a worker with role=db, zone=a`. The labels are rendered for the run's
/// arguments and the step's item and wave; a label that needs more (a step's output, a
/// secret) is shown as written.
pub fn name_waits<L>(view: &mut RunView<L>) {
    let run = Scope {
        arguments: view.arguments.clone(),
        run_id: view.run_id.to_string(),
        ..Scope::default()
    };
    for step in &mut view.steps {
        let Some(unplaced) = &mut step.unplaced else {
            continue;
        };
        let placement = Placement::of_attributes(&unplaced.attributes);
        let Some(written) = placement.written(unplaced.compensation) else {
            continue;
        };
        let scope = Scope {
            item: step.origin.as_ref().map(|o| o.item.clone()),
            wave: step.origin.as_ref().and_then(|o| o.wave),
            ..run.clone()
        };
        let labels: Labels = (written.iter())
            .map(|(name, text)| {
                let value = render(text, &scope, Mode::Plain).ok();
                let value = value.filter(|v| !v.is_empty()).unwrap_or(text.clone());
                (name.clone(), value)
            })
            .collect();
        unplaced.waiting_for = Some(format!("a worker with {}", words(&labels)));
    }
}
