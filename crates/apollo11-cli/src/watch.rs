//! The live view of `run` and `resume`: on a terminal, one line per step with its state,
//! attempt and elapsed time, redrawn in place; otherwise one plain line per transition. It
//! reads the run's new events from the store, the same truth everything else reads.

use crate::render;
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
    Bars {
        multi: MultiProgress,
        bars: BTreeMap<String, ProgressBar>,
    },
}

impl View {
    fn new(spec: &WorkflowSpec, tty: bool) -> View {
        if !tty {
            return View::Lines;
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let style = ProgressStyle::with_template("{spinner:.cyan} {prefix:<24} {msg}")
            .expect("a valid template");
        let bars = spec
            .steps
            .iter()
            .map(|s| {
                let bar = multi.add(
                    ProgressBar::new_spinner()
                        .with_style(style.clone())
                        .with_prefix(s.name.clone()),
                );
                bar.set_message("pending");
                (s.name.clone(), bar)
            })
            .collect();
        View::Bars { multi, bars }
    }

    fn event(&mut self, event: &apollo11_core::Event, state: &RunState) {
        match self {
            View::Lines => println!("{}", render::event_line(event)),
            View::Bars { multi, .. } => {
                if let apollo11_core::EventKind::Failed { error, .. } = &event.kind {
                    let step = event.step.as_ref().map_or("-", |s| s.as_str());
                    let _ = multi.println(format!(
                        "  {step} attempt {} failed: {error}",
                        event.attempt
                    ));
                }
                self.tick(state);
            }
        }
    }

    fn tick(&mut self, state: &RunState) {
        let View::Bars { bars, .. } = self else {
            return;
        };
        let now = now_ms();
        for (name, bar) in bars.iter() {
            let s = state.step(name);
            let elapsed = if s.status.is_busy() {
                now.saturating_sub(s.since_ms)
            } else {
                s.duration_ms.unwrap_or(0)
            };
            bar.set_message(format!(
                "{:<13} attempt {:<3} {}",
                s.status.name(),
                s.attempt,
                render::millis(elapsed)
            ));
            if s.status.is_busy() {
                bar.tick();
            }
        }
    }

    fn done(&mut self) {
        if let View::Bars { bars, .. } = self {
            for bar in bars.values() {
                bar.finish();
            }
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}
