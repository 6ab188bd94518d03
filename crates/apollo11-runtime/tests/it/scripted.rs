//! A step whose behaviour per attempt is scripted, and which records every execution.

use apollo11_core::EventKind;
use apollo11_runtime::{Engine, Output, RunId, Step, StepContext, StepError};
use apollo11_store::{EventStore, MemStore};
use async_trait::async_trait;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What an attempt does.
#[derive(Clone, Copy, Debug)]
pub enum Act {
    Ok(u64),
    Fail(u64, bool),
    Hang,
}

/// What a try of a compensation does.
#[derive(Clone, Copy, Debug)]
pub enum Undo {
    Ok,
    Fail(bool),
    Panic,
    Hang,
}

/// A compensation that always succeeds.
pub fn undo_ok(_: u32) -> Undo {
    Undo::Ok
}

/// `(step, attempt, what)` for every run or compensation, in the order they started.
pub type Ledger = Arc<Mutex<Vec<(String, u32, &'static str)>>>;

pub struct Scripted {
    pub name: &'static str,
    pub script: fn(u32) -> Act,
    pub ledger: Ledger,
    /// What each try of the compensation does (by try, from 1); none: no compensation.
    pub undo: Option<fn(u32) -> Undo>,
    /// Tries of the compensation so far.
    pub undo_tries: Arc<AtomicU32>,
    /// Steps running right now and the most seen at once (shared by all steps of a test).
    pub gauge: Arc<Mutex<(u32, u32)>>,
}

impl Scripted {
    pub fn new(
        name: &'static str,
        script: fn(u32) -> Act,
        ledger: &Ledger,
        gauge: &Arc<Mutex<(u32, u32)>>,
    ) -> Scripted {
        Scripted {
            name,
            script,
            ledger: ledger.clone(),
            undo: None,
            undo_tries: Arc::default(),
            gauge: gauge.clone(),
        }
    }

    pub fn undo(mut self, undo: fn(u32) -> Undo) -> Scripted {
        self.undo = Some(undo);
        self
    }
}

#[async_trait]
impl Step for Scripted {
    async fn run(&self, ctx: &StepContext) -> Result<Output, StepError> {
        self.ledger
            .lock()
            .unwrap()
            .push((self.name.to_owned(), ctx.attempt, "run"));
        {
            let mut g = self.gauge.lock().unwrap();
            g.0 += 1;
            g.1 = g.1.max(g.0);
        }
        let result = match (self.script)(ctx.attempt) {
            Act::Ok(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                let previous = ctx
                    .previous_payload
                    .as_deref()
                    .map(String::from_utf8_lossy)
                    .unwrap_or_default();
                Ok(Output::text(format!(
                    "{}#{}{}",
                    self.name,
                    ctx.attempt,
                    if previous.is_empty() {
                        String::new()
                    } else {
                        format!(" after {previous}")
                    }
                )))
            }
            Act::Fail(ms, retryable) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                let e = if retryable {
                    StepError::retryable("boom")
                } else {
                    StepError::fatal("boom")
                };
                Err(e.with_payload(format!("marker-{}", ctx.attempt).into_bytes()))
            }
            Act::Hang => {
                tokio::time::sleep(Duration::from_secs(3_600)).await;
                Ok(Output::empty())
            }
        };
        self.gauge.lock().unwrap().0 -= 1;
        result
    }

    async fn compensate(&self, ctx: &StepContext) -> Result<(), StepError> {
        self.ledger
            .lock()
            .unwrap()
            .push((self.name.to_owned(), ctx.attempt, "compensate"));
        let try_ = self.undo_tries.fetch_add(1, Ordering::SeqCst) + 1;
        let undo = self.undo.map_or(Undo::Ok, |undo| undo(try_));
        if let Undo::Panic = undo {
            panic!("undo {try_} panicked");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        match undo {
            Undo::Ok => Ok(()),
            Undo::Fail(true) => Err(StepError::retryable(format!("undo {try_} failed"))),
            Undo::Fail(false) => Err(StepError::fatal(format!("undo {try_} failed"))),
            Undo::Panic => unreachable!("panicked above"),
            Undo::Hang => {
                tokio::time::sleep(Duration::from_secs(3_600)).await;
                Ok(())
            }
        }
    }

    fn has_compensation(&self) -> bool {
        self.undo.is_some()
    }
}

/// The kinds of a run's events for one step, in order.
pub async fn kinds(engine_store: &MemStore, run: &str, step: &str) -> Vec<&'static str> {
    let events = engine_store
        .read_run(&RunId::from(run), apollo11_core::Seq(1))
        .await
        .unwrap();
    events
        .iter()
        .filter(|e| e.step.as_ref().map(|s| s.as_str()) == Some(step))
        .map(|e| e.kind.name())
        .collect()
}

/// `(step, kind, at_ms)` of every step event of a run.
pub async fn timeline(store: &MemStore, run: &str) -> Vec<(String, EventKind, u64)> {
    let events = store
        .read_run(&RunId::from(run), apollo11_core::Seq(1))
        .await
        .unwrap();
    events
        .into_iter()
        .filter_map(|e| e.step.map(|s| (s.0, e.kind, e.at_ms)))
        .collect()
}

pub async fn open(store: &Arc<MemStore>) -> Engine<MemStore> {
    Engine::open(store.clone(), Default::default())
        .await
        .unwrap()
}
