//! The live view of `run` and `resume`: on a terminal, one line per step with its state,
//! attempt and elapsed time, redrawn in place; otherwise one plain line per transition. It
//! reads the run's new events from the store, the same truth everything else reads.

use crate::{out, render};
use apollo11_core::{RunId, Seq, WorkflowSpec};
use apollo11_machine::RunState;
use apollo11_store::EventStore;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct Watcher {
    stop: watch::Sender<bool>,
    join: JoinHandle<()>,
}

impl Watcher {
    /// Shows the last events, then stops.
    pub async fn finish(self) {
        let _ = self.stop.send(true);
        let _ = self.join.await;
    }
}

pub fn spawn<S: EventStore + 'static>(store: Arc<S>, run_id: RunId, spec: WorkflowSpec) -> Watcher {
    let (stop, mut stopped) = watch::channel(false);
    let join = tokio::spawn(async move {
        let mut view = View::new(&spec, std::io::stdout().is_terminal());
        let mut state = RunState::new(run_id.clone());
        loop {
            let last = *stopped.borrow();
            let events = store
                .read_run(&run_id, Seq(state.last_seq.0 + 1))
                .await
                .unwrap_or_default();
            for event in &events {
                state.apply(event);
                view.event(event, &state);
            }
            view.tick(&state);
            if last {
                view.done();
                return;
            }
            let _ = tokio::time::timeout(Duration::from_millis(100), stopped.changed()).await;
        }
    });
    Watcher { stop, join }
}

enum View {
    Lines,
    Live(Live),
}

/// On a terminal: a summary line, one line per step at work, finished steps printed above.
struct Live {
    multi: MultiProgress,
    summary: ProgressBar,
    busy: BTreeMap<String, ProgressBar>,
    steps: Vec<String>,
}

impl View {
    fn new(spec: &WorkflowSpec, tty: bool) -> View {
        if !tty {
            return View::Lines;
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let summary =
            multi.add(ProgressBar::new_spinner().with_style(style("{spinner:.cyan} {msg}")));
        let steps = spec.steps.iter().map(|s| s.name.clone()).collect();
        View::Live(Live {
            multi,
            summary,
            busy: BTreeMap::new(),
            steps,
        })
    }

    fn event(&mut self, event: &apollo11_core::Event, state: &RunState) {
        match self {
            // A closed stdout is noticed by whoever follows the run (`out::closed`).
            View::Lines => {
                let _ = out::line(render::event_line(event));
            }
            View::Live(live) => live.event(event, state),
        }
    }

    fn tick(&mut self, state: &RunState) {
        if let View::Live(live) = self {
            live.tick(state);
        }
    }

    fn done(&mut self) {
        if let View::Live(live) = self {
            live.summary.finish_and_clear();
        }
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).expect("a valid template")
}

impl Live {
    fn event(&mut self, event: &apollo11_core::Event, state: &RunState) {
        let Some(step) = event.step.as_ref().map(|s| s.as_str().to_owned()) else {
            return;
        };
        let s = state.step(&step);
        if s.status.is_busy() {
            let multi = &self.multi;
            let prefix = out::name(&step);
            self.busy.entry(step).or_insert_with(|| {
                multi.add(
                    ProgressBar::new_spinner()
                        .with_style(style("  {spinner:.cyan} {prefix:<24} {msg}"))
                        .with_prefix(prefix),
                )
            });
        } else {
            if let Some(bar) = self.busy.remove(&step) {
                bar.finish_and_clear();
            }
            let mark = match s.status.name() {
                "succeeded" | "compensated" | "skipped" => "ok",
                _ => "!!",
            };
            let error = s
                .last_error
                .as_ref()
                .filter(|_| mark == "!!")
                .map_or(String::new(), |e| {
                    format!("  {}", out::shown(&e.error, out::TEXT_CHARS_MAX))
                });
            let step = out::name(&step);
            let took = s.duration_ms.map_or(String::new(), render::millis);
            let _ = self.multi.println(format!(
                "{mark} {step:<24} {:<12} attempt {:<3} {took}{error}",
                s.status.name(),
                s.attempt
            ));
        }
        self.tick(state);
    }

    fn tick(&mut self, state: &RunState) {
        let now = now_ms();
        let done = self
            .steps
            .iter()
            .filter(|n| state.status(n).satisfies_dependents())
            .count();
        self.summary.set_message(format!(
            "{}: {done}/{} steps done, {} at work",
            state.run_id,
            self.steps.len(),
            self.busy.len()
        ));
        self.summary.tick();
        for (name, bar) in &self.busy {
            let s = state.step(name);
            bar.set_message(format!(
                "{:<13} attempt {:<3} {}",
                s.status.name(),
                s.attempt,
                render::millis(now.saturating_sub(s.since_ms))
            ));
            bar.tick();
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}
