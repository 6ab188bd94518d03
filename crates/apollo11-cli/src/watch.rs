//! The live view of `run` and `resume`: on a terminal, one line per step with its state,
//! attempt and elapsed time, redrawn in place; otherwise one plain line per transition. It
//! follows the run's events through the store's change feed (pushed as each batch becomes
//! durable, never polled), the same truth everything else reads; a timer only redraws the
//! elapsed times.

use crate::{out, render};
use apollo11_core::{Event, RunId, Seq, WorkflowSpec};
use apollo11_machine::RunState;
use apollo11_store::{EventStore, RunFeed};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often the terminal view redraws elapsed times.
const REDRAW_MS: u64 = 100;

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
    let (stop, stopped) = watch::channel(false);
    let tty = std::io::stdout().is_terminal();
    let join = tokio::spawn(async move {
        let mut view = View::new(&spec, tty);
        follow(store.as_ref(), run_id, &mut view, stopped).await;
        view.done();
    });
    Watcher { stop, join }
}

/// Shows the run's events as the feed brings them until told to stop, then the ones the
/// feed has not brought yet (everything the run appended is durable by then); returns the
/// run's state as shown. A store error ends the view quietly: the command that runs the
/// engine reports it.
async fn follow<S: EventStore>(
    store: &S,
    run_id: RunId,
    view: &mut View,
    mut stopped: watch::Receiver<bool>,
) -> RunState {
    let mut state = RunState::new(run_id.clone());
    let Ok(mut feed) = RunFeed::new(store, run_id.clone(), Seq(1)).await else {
        return state;
    };
    let mut redraw = tokio::time::interval(Duration::from_millis(REDRAW_MS));
    let live = view.is_live();
    loop {
        tokio::select! {
            event = feed.next() => match event {
                Ok(event) => view.show(&event, &mut state),
                Err(_) => return state,
            },
            _ = redraw.tick(), if live => view.tick(&state),
            _ = stopped.changed() => break,
        }
    }
    let rest = store.read_run(&run_id, feed.next_seq()).await;
    for event in rest.unwrap_or_default() {
        view.show(&event, &mut state);
    }
    view.tick(&state);
    state
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

    fn event(&mut self, event: &Event, state: &RunState) {
        match self {
            // A closed stdout is noticed by whoever follows the run (`out::closed`).
            View::Lines => {
                let _ = out::line(render::event_line(&event.into()));
            }
            View::Live(live) => live.event(event, state),
        }
    }

    /// Folds an event into the run's state and shows it.
    fn show(&mut self, event: &Event, state: &mut RunState) {
        state.apply(event);
        self.event(event, state);
    }

    fn is_live(&self) -> bool {
        matches!(self, View::Live(_))
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
    fn event(&mut self, event: &Event, state: &RunState) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use apollo11_core::{BlobRef, EventId, EventKind, Payload, StepName};
    use apollo11_store::{
        BlobStore, MemStore, NewEvent, RunSummary, Snapshot, SnapshotStore, StoreError,
        Subscription,
    };
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A `MemStore` that counts the reads made through it.
    #[derive(Default)]
    struct Counting {
        inner: MemStore,
        reads: AtomicU32,
    }

    #[async_trait::async_trait]
    impl EventStore for Counting {
        async fn append(
            &self,
            run_id: &RunId,
            expected_seq: Seq,
            events: Vec<NewEvent>,
        ) -> Result<Vec<EventId>, StoreError> {
            self.inner.append(run_id, expected_seq, events).await
        }
        async fn read_run(&self, run_id: &RunId, from: Seq) -> Result<Vec<Event>, StoreError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.inner.read_run(run_id, from).await
        }
        async fn read_from(&self, from: EventId, max: u32) -> Result<Vec<Event>, StoreError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.inner.read_from(from, max).await
        }
        async fn subscribe<'s>(&'s self, after: EventId) -> Result<Subscription<'s>, StoreError> {
            self.inner.subscribe(after).await
        }
        async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
            self.inner.list_runs().await
        }
        async fn last_event_id(&self) -> Result<EventId, StoreError> {
            self.inner.last_event_id().await
        }
    }

    #[async_trait::async_trait]
    impl SnapshotStore for Counting {
        async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
            self.inner.save_snapshot(snapshot).await
        }
        async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
            self.inner.load_snapshot().await
        }
    }

    #[async_trait::async_trait]
    impl BlobStore for Counting {
        async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
            self.inner.put_blob(bytes).await
        }
        async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
            self.inner.get_blob(blob).await
        }
    }

    fn event(step: Option<&str>, kind: EventKind) -> NewEvent {
        NewEvent {
            step: step.map(StepName::from),
            kind,
            attempt: 1,
            at_ms: 0,
            instance: "test".into(),
            payload: Payload::Empty,
        }
    }

    /// The view is told of new events by the store; it does not ask the store every so often
    /// (which cost a read of the run every 100 ms, however long the run).
    #[tokio::test(start_paused = true)]
    async fn the_live_view_follows_the_change_feed_without_polling_the_store() {
        let store = Arc::new(Counting::default());
        let run = RunId::from("r");
        let created = EventKind::RunCreated {
            workflow: "wf".into(),
        };
        store
            .append(&run, Seq(1), vec![event(None, created)])
            .await
            .unwrap();
        let toml = "[workflow]\nname = \"wf\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n";
        let spec =
            apollo11_shell::definition::parse(toml, "wf.toml", std::path::Path::new("/")).unwrap();
        let (stop, stopped) = watch::channel(false);
        let follower = {
            let store = store.clone();
            let run = run.clone();
            tokio::spawn(async move {
                let mut view = View::new(&spec, false);
                follow(store.as_ref(), run, &mut view, stopped).await
            })
        };
        // A long step: ten minutes with nothing to show.
        tokio::time::sleep(Duration::from_secs(600)).await;
        store
            .append(&run, Seq(2), vec![event(Some("a"), EventKind::Started)])
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let _ = stop.send(true);
        let state = follower.await.unwrap();
        assert_eq!(state.last_seq, Seq(2), "the view saw the step start");
        let reads = store.reads.load(Ordering::SeqCst);
        assert!(reads <= 2, "{reads} reads of the store in ten minutes");
    }
}
