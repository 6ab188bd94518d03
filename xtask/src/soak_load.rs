//! The soak's load on `apollo11 serve`: runs started at a fixed rate whatever their
//! completions (open loop), operators acting on some of them, readers of runs, events and
//! event streams. Every call's latency lands in the current window by kind; every 5xx, failed
//! call or answer the server should not have given is counted as an error.

use crate::crash::Rng;
use crate::http::{request, stream};
use crate::soak_workflows::{COMP_FAILS, FATAL, GATE, LONG, RETRY, SMALL, STUCK};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A long run starts every this many seconds.
const LONG_EVERY_S: f64 = 30.0;
/// The first errors kept word for word.
const KEPT_ERRORS: usize = 20;
/// How often an operator looks again at a `STUCK` run not yet paused on its gate.
const OVERRIDE_TRIES: u32 = 30;

/// A run the load started, and the operator actions the server accepted on it.
pub struct Started {
    pub workflow: &'static str,
    pub actions: Vec<&'static str>,
}

/// The calls of one sampling window.
#[derive(Default)]
pub struct Window {
    /// Microseconds of each call, by kind (`start`, `read`, `list`, `action`, `sse`).
    pub latencies: BTreeMap<&'static str, Vec<u64>>,
    pub errors: u64,
    pub started: u64,
}

enum Action {
    Pause(String),
    Resume(String),
    Rollback(String),
    /// Override the gate of a `STUCK` run once it is paused on it; the tries so far.
    Override(String, u32),
}

/// The load's shared state.
pub struct Load {
    addr: String,
    rate: f64,
    stop: AtomicBool,
    in_flight: AtomicUsize,
    runs: Mutex<HashMap<String, Started>>,
    ids: Mutex<Vec<String>>,
    window: Mutex<Window>,
    errors: Mutex<Vec<String>>,
    queue: Mutex<Vec<(Instant, Action)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The workflow of the `i`-th start, and which long run it is if long.
fn mix(i: u64, long_every: u64) -> (&'static str, Option<u64>) {
    if i.is_multiple_of(long_every) {
        return (LONG, Some(i / long_every));
    }
    let workflow = match i % 20 {
        12..=14 => RETRY,
        15 | 16 => FATAL,
        17 => COMP_FAILS,
        18 => STUCK,
        _ => SMALL,
    };
    (workflow, None)
}

impl Load {
    pub fn new(addr: &str, rate: f64) -> Arc<Load> {
        Arc::new(Load {
            addr: addr.to_owned(),
            rate,
            stop: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            runs: Mutex::default(),
            ids: Mutex::default(),
            window: Mutex::default(),
            errors: Mutex::default(),
            queue: Mutex::default(),
        })
    }

    /// Starts the starter, the operator, two readers and a stream reader.
    pub fn spawn(self: &Arc<Load>) -> Vec<JoinHandle<()>> {
        let mut threads = Vec::new();
        let jobs: [fn(&Arc<Load>); 5] = [
            Load::starter,
            Load::operator,
            Load::reader,
            Load::reader,
            Load::streams,
        ];
        for job in jobs {
            let load = Arc::clone(self);
            threads.push(std::thread::spawn(move || job(&load)));
        }
        threads
    }

    /// Stops starting and reading; the operator finishes the actions it has queued.
    pub fn stop(&self, threads: Vec<JoinHandle<()>>) {
        self.stop.store(true, Ordering::SeqCst);
        for thread in threads {
            let _ = thread.join();
        }
    }

    /// The window so far, replaced by an empty one.
    pub fn take_window(&self) -> Window {
        std::mem::take(&mut *lock(&self.window))
    }

    /// Every run started, with its actions.
    pub fn runs(&self) -> HashMap<String, Started> {
        std::mem::take(&mut *lock(&self.runs))
    }

    /// The first errors, word for word.
    pub fn errors(&self) -> Vec<String> {
        lock(&self.errors).clone()
    }

    fn error(&self, what: String) {
        lock(&self.window).errors += 1;
        let mut kept = lock(&self.errors);
        if kept.len() < KEPT_ERRORS {
            eprintln!("soak error: {what}");
            kept.push(what);
        }
    }

    /// One call, timed under `kind`; `None` (and an error) if it failed or answered 5xx.
    fn call(
        &self,
        kind: &'static str,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Option<(u16, String)> {
        let started = Instant::now();
        let answer = request(&self.addr, method, path, body);
        let micros = started.elapsed().as_micros() as u64;
        lock(&self.window)
            .latencies
            .entry(kind)
            .or_default()
            .push(micros);
        match answer {
            Ok((status, body)) if status < 500 => Some((status, body)),
            Ok((status, body)) => {
                self.error(format!("{method} {path}: {status} {body}"));
                None
            }
            Err(e) => {
                self.error(format!("{method} {path}: {e:#}"));
                None
            }
        }
    }

    /// Expects `want` from a call; anything else is an error.
    fn expect(
        &self,
        kind: &'static str,
        method: &str,
        path: &str,
        body: Option<&str>,
        want: &[u16],
    ) -> Option<String> {
        let (status, answer) = self.call(kind, method, path, body)?;
        if want.contains(&status) {
            return Some(answer);
        }
        self.error(format!(
            "{method} {path}: {status} {answer} (expected {want:?})"
        ));
        None
    }

    fn starter(self: &Arc<Load>) {
        let began = Instant::now();
        let long_every = ((self.rate * LONG_EVERY_S).round() as u64).max(1);
        for i in 0u64.. {
            let due = began + Duration::from_secs_f64(i as f64 / self.rate);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            // Open loop: each start on its own thread, so a slow answer delays no later start.
            self.in_flight.fetch_add(1, Ordering::SeqCst);
            let load = Arc::clone(self);
            std::thread::spawn(move || {
                load.start(i, long_every);
                load.in_flight.fetch_sub(1, Ordering::SeqCst);
            });
        }
    }

    /// Starts the `i`-th run and queues what operators will do to it.
    fn start(&self, i: u64, long_every: u64) {
        let (workflow, long) = mix(i, long_every);
        let run = format!("{workflow}-{i:07}");
        let body = format!(r#"{{"workflow": "{workflow}", "run_id": "{run}"}}"#);
        if self
            .expect("start", "POST", "/api/v1/runs", Some(&body), &[201])
            .is_none()
        {
            return;
        }
        lock(&self.window).started += 1;
        let started = Started {
            workflow,
            actions: Vec::new(),
        };
        lock(&self.runs).insert(run.clone(), started);
        lock(&self.ids).push(run.clone());
        let now = Instant::now();
        let action = match (workflow, long.map(|k| k % 3)) {
            (_, Some(0)) => Some((7, Action::Pause(run))),
            (_, Some(1)) => Some((12, Action::Rollback(run))),
            (STUCK, _) => Some((1, Action::Override(run, 0))),
            _ => None,
        };
        if let Some((after_s, action)) = action {
            self.queue(now + Duration::from_secs(after_s), action);
        }
    }

    fn queue(&self, at: Instant, action: Action) {
        lock(&self.queue).push((at, action));
    }

    /// Carries out queued actions when due, until stopped with nothing left to do.
    fn operator(self: &Arc<Load>) {
        loop {
            let due = {
                let mut queue = lock(&self.queue);
                let now = Instant::now();
                let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut *queue)
                    .into_iter()
                    .partition(|(at, _)| *at <= now);
                *queue = later;
                due
            };
            let idle = due.is_empty();
            for (_, action) in due {
                self.act(action);
            }
            let done = self.stop.load(Ordering::SeqCst)
                && self.in_flight.load(Ordering::SeqCst) == 0
                && lock(&self.queue).is_empty();
            if done {
                return;
            }
            if idle {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    fn act(&self, action: Action) {
        let operator = r#"{"by": "soak", "reason": "the soak's operator"}"#;
        match action {
            Action::Pause(run) => {
                if self.action(&run, ("pause", "pause"), operator, &[202, 409]) == Some(202) {
                    self.queue(Instant::now() + Duration::from_secs(3), Action::Resume(run));
                }
            }
            Action::Resume(run) => {
                self.action(&run, ("resume", "resume"), operator, &[202]);
            }
            Action::Rollback(run) => {
                self.action(&run, ("rollback", "rollback"), operator, &[202, 409]);
            }
            Action::Override(run, tries) => self.override_gate(run, tries),
        }
    }

    /// `POST /api/v1/runs/RUN/ROUTE`; a 2xx is recorded as the run's action `what`.
    fn action(
        &self,
        run: &str,
        (route, what): (&str, &'static str),
        body: &str,
        want: &[u16],
    ) -> Option<u16> {
        let path = format!("/api/v1/runs/{run}/{route}");
        let (status, answer) = self.call("action", "POST", &path, Some(body))?;
        if !want.contains(&status) {
            self.error(format!(
                "POST {path}: {status} {answer} (expected {want:?})"
            ));
            return None;
        }
        if status < 300 {
            if let Some(started) = lock(&self.runs).get_mut(run) {
                started.actions.push(what);
            }
        }
        Some(status)
    }

    /// Overrides the gate of a `STUCK` run to succeeded once the run is paused on it.
    fn override_gate(&self, run: String, tries: u32) {
        let path = format!("/api/v1/runs/{run}");
        let Some(view) = self.expect("read", "GET", &path, None, &[200]) else {
            return;
        };
        let view: Value = serde_json::from_str(&view).unwrap_or_default();
        if view["state"] == "paused" && view["steps"][GATE]["state"] == "failed" {
            let body = r#"{"to": "succeeded", "by": "soak", "reason": "the soak's operator"}"#;
            let route = format!("steps/{GATE}/override");
            self.action(&run, (&route, "override"), body, &[200]);
        } else if tries < OVERRIDE_TRIES {
            self.queue(
                Instant::now() + Duration::from_secs(1),
                Action::Override(run, tries + 1),
            );
        } else {
            self.error(format!(
                "{run} was not paused on {GATE} after {tries} looks: {view}"
            ));
        }
    }

    /// A recent run (one of the last 200 started), if any.
    fn recent(&self, rng: &mut Rng) -> Option<String> {
        let ids = lock(&self.ids);
        let n = ids.len().min(200) as u64;
        (n > 0).then(|| ids[ids.len() - 1 - rng.below(n) as usize].clone())
    }

    /// Reads a recent run, its events and the newest runs, again and again.
    fn reader(self: &Arc<Load>) {
        let mut rng = seeded();
        while !self.stop.load(Ordering::SeqCst) {
            if let Some(run) = self.recent(&mut rng) {
                self.expect("read", "GET", &format!("/api/v1/runs/{run}"), None, &[200]);
                let events = format!("/api/v1/runs/{run}/events");
                self.expect("read", "GET", &events, None, &[200]);
                self.expect("list", "GET", "/api/v1/runs?limit=20", None, &[200]);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Follows a recent run's event stream for a second, again and again.
    fn streams(self: &Arc<Load>) {
        let mut rng = seeded();
        while !self.stop.load(Ordering::SeqCst) {
            let Some(run) = self.recent(&mut rng) else {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            };
            let path = format!("/api/v1/runs/{run}/events/stream");
            match stream(&self.addr, &path, Duration::from_secs(1)) {
                Ok(seen) if seen.status == 200 && seen.events > 0 => {
                    let micros = seen.headers_after.as_micros() as u64;
                    lock(&self.window)
                        .latencies
                        .entry("sse")
                        .or_default()
                        .push(micros);
                }
                Ok(seen) => self.error(format!(
                    "GET {path}: {} with {} events in 1 s",
                    seen.status, seen.events
                )),
                Err(e) => self.error(format!("GET {path}: {e:#}")),
            }
        }
    }
}

fn seeded() -> Rng {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    Rng(nanos | 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_has_a_long_run_every_period_and_every_kind_in_twenty() {
        let long_every = 120;
        let kinds: Vec<&str> = (1..=20).map(|i| mix(i, long_every).0).collect();
        assert_eq!(kinds.iter().filter(|k| **k == SMALL).count(), 13);
        for kind in [RETRY, FATAL, COMP_FAILS, STUCK] {
            assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
        }
        assert_eq!(mix(0, long_every), (LONG, Some(0)));
        assert_eq!(mix(240, long_every), (LONG, Some(2)));
        assert_eq!(mix(241, long_every).1, None);
    }
}
