//! The dispatcher's state behind its lock: workers, tries by token, the queue, and what
//! became of tries no longer wanted. Every method is quick and never awaits.

use crate::inbox;
use crate::{Config, Hello, Labels, Offer, TaskEvent, TryRef};
use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::watch;
use tokio::time::Instant;

/// How many decided tokens are remembered, to answer a repeated report the same way.
const DECIDED_MAX: usize = 100_000;
/// How many outcomes of killed tries are kept for their stop ([`State::stopped`]).
const KILLED_KEPT_MAX: usize = 1_000;

/// Whether a taken result is durable in the engine's log: true once it is; its sender
/// dropped when it never will be.
pub(crate) type Recorded = watch::Receiver<bool>;

/// What became of a try no longer wanted.
pub(crate) enum Decision {
    /// Its result was taken; whether it is recorded.
    Finished(Recorded),
    /// Decided without a result, and why.
    Refused(String),
}

impl Decision {
    /// Whether the worker that holds the try may let it go: anything but a result the
    /// engine still records (were the engine to stop first, the worker reports it again).
    fn releases(&self) -> bool {
        match self {
            Decision::Finished(recorded) => recorded.has_changed().is_err() || *recorded.borrow(),
            Decision::Refused(_) => true,
        }
    }
}

/// A stopped try gone from its worker, with the outcome the worker reported for it once it
/// had killed it (if it did); or why it may still run.
pub(crate) type Stopped = Result<Option<Vec<u8>>, String>;

/// Why a worker's report is not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The try was decided without this report (withdrawn, its worker lost, given to
    /// another worker): the report must not be recorded. Why, in words.
    Decided(String),
    /// The dispatcher does not know the try (yet): after an engine's restart, its driver
    /// may adopt it soon; the worker keeps the report and tries again.
    Unknown,
    /// The result reached the engine but is not durable in its log (yet, or ever: the
    /// engine stopped first): the worker keeps it and reports it again. Why, in words.
    NotRecorded(String),
}

impl Refusal {
    /// Its name, as the refusals' counter labels it: `decided`, `unknown`.
    pub fn name(&self) -> &'static str {
        match self {
            Refusal::Decided(_) => "decided",
            Refusal::Unknown => "unknown",
            Refusal::NotRecorded(_) => "not_recorded",
        }
    }
}

pub(crate) struct Worker {
    pub hello: Hello,
    pub last_seen: Instant,
    pub connected_ms: u64,
    /// Heard from since the dispatcher started (an adoption names workers not heard yet).
    pub heard: bool,
    /// Which life of the name this is: a worker declared lost and heard again is another.
    pub life: u64,
}

pub(crate) struct Task {
    /// The labels it needs, sorted (a map's node would hold room for eleven).
    pub needs: Box<[(String, String)]>,
    pub what: TryRef,
    /// `None` for an adopted try: it is never offered again.
    pub job: Option<Arc<[u8]>>,
    pub queued_at: Instant,
    pub worker: Option<String>,
    pub events: inbox::Sender,
    /// Heartbeats in a row of its worker that did not name it.
    pub unnamed: u8,
}

pub(crate) struct State {
    pub workers: BTreeMap<String, Worker>,
    pub tasks: HashMap<String, Task>,
    pub queue: VecDeque<String>,
    /// Tokens withdrawn or lost while taken, by worker: told to stop at its heartbeats
    /// until it no longer holds them.
    pub withdrawn: BTreeMap<String, BTreeSet<String>>,
    /// Tokens a worker holds that nobody adopted yet, since when.
    pub orphans: HashMap<String, (String, Instant)>,
    /// The outcomes workers reported for tries the engine had withdrawn from them, once
    /// they had killed them (what each used), refused but kept for [`State::stopped`],
    /// oldest first, at most `KILLED_KEPT_MAX`.
    killed: HashMap<String, Vec<u8>>,
    killed_order: VecDeque<String>,
    /// Tokens whose result was taken, and tokens decided without one, oldest first, at
    /// most `DECIDED_MAX`.
    pub decided: HashMap<String, Decision>,
    pub decided_order: VecDeque<String>,
    /// The tokens given to each worker, oldest first; some may have ended or gone to
    /// another since (checked against `tasks` when read).
    given: HashMap<String, Vec<String>>,
    pub lost_workers: u64,
    next: u64,
    nonce: u64,
}

impl State {
    /// A dispatcher's state, its tokens derived from `seed` when given.
    pub fn new(seed: Option<u64>) -> State {
        let wall = || {
            let wall = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            RandomState::new().hash_one(wall) ^ wall
        };
        State {
            workers: BTreeMap::new(),
            tasks: HashMap::new(),
            queue: VecDeque::new(),
            withdrawn: BTreeMap::new(),
            orphans: HashMap::new(),
            killed: HashMap::new(),
            killed_order: VecDeque::new(),
            decided: HashMap::new(),
            decided_order: VecDeque::new(),
            given: HashMap::new(),
            lost_workers: 0,
            next: 0,
            // Tokens differ across engines and restarts: a process-random seed and the time.
            nonce: seed.unwrap_or_else(wall),
        }
    }

    pub(crate) fn token(&mut self) -> String {
        self.next += 1;
        format!("{:016x}{:08x}", self.nonce, self.next)
    }

    pub fn submit(
        &mut self,
        needs: Labels,
        what: TryRef,
        job: Arc<[u8]>,
        events: inbox::Sender,
        now: Instant,
    ) -> String {
        let token = self.token();
        self.tasks.insert(
            token.clone(),
            Task {
                needs: needs.into_iter().collect(),
                what,
                job: Some(job),
                queued_at: now,
                worker: None,
                events,
                unnamed: 0,
            },
        );
        self.queue.push_back(token.clone());
        token
    }

    pub fn adopt(
        &mut self,
        token: &str,
        worker: &str,
        what: TryRef,
        events: inbox::Sender,
        now: Instant,
    ) {
        self.orphans.remove(token);
        // A worker not heard from yet must report within the heartbeat timeout from now.
        self.workers
            .entry(worker.to_owned())
            .or_insert_with(|| Worker {
                hello: Hello {
                    name: worker.to_owned(),
                    labels: Labels::new(),
                    slots: 0,
                    version: String::new(),
                },
                last_seen: now,
                connected_ms: 0,
                heard: false,
                life: 0,
            });
        self.tasks.insert(
            token.to_owned(),
            Task {
                needs: Box::new([]),
                what,
                job: None,
                queued_at: now,
                worker: Some(worker.to_owned()),
                events,
                unnamed: 0,
            },
        );
        self.given(worker, token);
    }

    /// Records a call of `hello`; answers the life of its name it is in.
    pub fn seen(&mut self, hello: &Hello, now: Instant) -> u64 {
        self.next += 1;
        let life = self.next;
        let worker = self
            .workers
            .entry(hello.name.clone())
            .or_insert_with(|| Worker {
                hello: hello.clone(),
                last_seen: now,
                connected_ms: 0,
                heard: false,
                life,
            });
        if !worker.heard {
            worker.heard = true;
            worker.connected_ms = wall_ms();
            tracing::info!(worker = %hello.name, labels = ?hello.labels, slots = hello.slots, "worker connected");
        }
        worker.hello = hello.clone();
        worker.last_seen = now;
        worker.life
    }

    /// Up to `free` tries for `hello`, in the life `life` of its name (from [`State::seen`]
    /// when its poll began): none once that life ended (declared lost while its poll
    /// waited: the poll's answer may never reach it).
    pub fn take(&mut self, hello: &Hello, life: u64, free: u32) -> Vec<Offer> {
        if self.workers.get(&hello.name).map(|w| w.life) != Some(life) {
            return Vec::new();
        }
        let mut offers = Vec::new();
        // Oldest first; what does not fit stays in place, and the scan stops once `free`
        // are found: a queue of tries this worker cannot take costs it nothing past them.
        let mut i = 0;
        while i < self.queue.len() && offers.len() < free as usize {
            let Some(task) = self.tasks.get_mut(&self.queue[i]) else {
                self.queue.remove(i);
                continue;
            };
            if !task
                .needs
                .iter()
                .all(|(k, v)| hello.labels.get(k) == Some(v))
            {
                i += 1;
                continue;
            }
            crate::metrics::taken(Instant::now().duration_since(task.queued_at).as_secs_f64());
            task.worker = Some(hello.name.clone());
            let _ = task.events.send(TaskEvent::Taken {
                worker: hello.name.clone(),
            });
            let offer = Offer {
                token: self.queue[i].clone(),
                what: task.what.clone(),
                job: task.job.clone().expect("queued tries have a job"),
            };
            self.queue.remove(i);
            self.given(&hello.name, &offer.token);
            offers.push(offer);
        }
        offers
    }

    /// Notes that `token` was given to `worker`.
    fn given(&mut self, worker: &str, token: &str) {
        (self.given.entry(worker.to_owned()).or_default()).push(token.to_owned());
    }

    /// The tokens `worker` holds, oldest first, each once; forgets those that ended or went
    /// to another.
    fn held_by(&mut self, worker: &str) -> Vec<String> {
        let mut tokens = self.given.remove(worker).unwrap_or_default();
        let mut seen = BTreeSet::new();
        tokens.retain(|t| {
            (self.tasks.get(t)).is_some_and(|task| task.worker.as_deref() == Some(worker))
                && seen.insert(t.clone())
        });
        tokens
    }

    pub fn heartbeat(
        &mut self,
        hello: &Hello,
        running: &[String],
        now: Instant,
        grace: std::time::Duration,
    ) -> Vec<String> {
        let _ = self.seen(hello, now);
        let held: BTreeSet<&String> = running.iter().collect();
        let mut stop = Vec::new();
        if let Some(withdrawn) = self.withdrawn.get_mut(&hello.name) {
            withdrawn.retain(|t| held.contains(t));
            stop.extend(withdrawn.iter().cloned());
        }
        for token in running {
            match self.tasks.get(token) {
                Some(task) if task.worker.as_deref() == Some(hello.name.as_str()) => {}
                Some(_) => stop.push(token.clone()),
                None if stop.contains(token) => {}
                // Decided (lost, withdrawn, or its result taken): nothing wants it now.
                None if self.decided.get(token).is_some_and(Decision::releases) => {
                    stop.push(token.clone());
                }
                None if self.decided.contains_key(token) => {}
                None => {
                    let since = self
                        .orphans
                        .entry(token.clone())
                        .or_insert((hello.name.clone(), now))
                        .1;
                    if now.duration_since(since) >= grace {
                        stop.push(token.clone());
                    }
                }
            }
        }
        self.orphans
            .retain(|t, (w, _)| *w != hello.name || held.contains(t));
        self.forgotten(&hello.name, &held);
        stop
    }

    /// Loses the tries given to `worker` that two of its heartbeats in a row did not name
    /// (one may have crossed the answer that gave the try): the worker no longer holds
    /// them (it restarted and could not take them up again).
    fn forgotten(&mut self, worker: &str, held: &BTreeSet<&String>) {
        let mut lost = Vec::new();
        let mut kept = Vec::new();
        for token in self.held_by(worker) {
            let Some(task) = self.tasks.get_mut(&token) else {
                continue;
            };
            if held.contains(&token) {
                task.unnamed = 0;
            } else {
                task.unnamed += 1;
            }
            if task.unnamed >= 2 {
                lost.push(token);
            } else {
                kept.push(token);
            }
        }
        if !kept.is_empty() {
            self.given.insert(worker.to_owned(), kept);
        }
        let reason = format!("worker `{worker}` no longer holds the try (it restarted without it)");
        for token in lost {
            tracing::warn!(worker, token = %token, "a worker no longer holds its try");
            if let Some(task) = self.tasks.remove(&token) {
                let _ = task.events.send(TaskEvent::Lost {
                    reason: reason.clone(),
                });
            }
            self.decide(&token, Decision::Refused(reason.clone()));
        }
    }

    /// Passes a worker's report to the try's ticket; `last`: the report ends the try.
    pub fn report(
        &mut self,
        worker: &str,
        token: &str,
        event: TaskEvent,
        last: Option<Recorded>,
    ) -> Result<Option<Recorded>, Refusal> {
        if let Some(decided) = self.decided.get(token) {
            return match decided {
                Decision::Finished(recorded) if last.is_some() => Ok(Some(recorded.clone())),
                Decision::Finished(_) => Err(Refusal::Decided(
                    "the try already reported its end".to_owned(),
                )),
                Decision::Refused(why) => {
                    let why = why.clone();
                    let withdrawn = (self.withdrawn.get(worker)).is_some_and(|w| w.contains(token));
                    if let (TaskEvent::Finished { outcome, .. }, true) = (event, withdrawn) {
                        self.keep_killed(token, outcome);
                    }
                    Err(Refusal::Decided(why))
                }
            };
        }
        let Some(task) = self.tasks.get(token) else {
            return Err(Refusal::Unknown);
        };
        if task.worker.as_deref() != Some(worker) {
            return Err(Refusal::Decided(format!(
                "the try is not worker `{worker}`'s"
            )));
        }
        if task.events.send(event).is_err() {
            self.withdraw(token);
            return Err(Refusal::Decided(
                "the engine no longer waits for the try".to_owned(),
            ));
        }
        if let Some(recorded) = &last {
            self.tasks.remove(token);
            self.decide(token, Decision::Finished(recorded.clone()));
        }
        Ok(last)
    }

    pub fn what(&self, worker: &str, token: &str) -> Option<TryRef> {
        let task = self.tasks.get(token)?;
        (task.worker.as_deref() == Some(worker)).then(|| task.what.clone())
    }

    /// The try's ticket is gone: out of the queue, or stopped at its worker.
    pub fn withdraw(&mut self, token: &str) {
        let Some(task) = self.tasks.remove(token) else {
            return;
        };
        match task.worker {
            None => self.queue.retain(|t| t != token),
            Some(worker) => {
                self.withdrawn
                    .entry(worker)
                    .or_default()
                    .insert(token.to_owned());
            }
        }
        self.decide(
            token,
            Decision::Refused(
                "the engine withdrew the try (timed out, cancelled or decided otherwise)"
                    .to_owned(),
            ),
        );
    }

    /// Withdraws `token` from `worker`, known or not.
    pub fn stop(&mut self, worker: &str, token: &str) {
        self.withdraw(token);
        self.withdrawn
            .entry(worker.to_owned())
            .or_default()
            .insert(token.to_owned());
        self.decide(
            token,
            Decision::Refused("the engine stopped the try".to_owned()),
        );
    }

    /// Whether `worker` let go of `token`, which [`State::stop`] stopped: `Some(Ok)` once
    /// its heartbeat no longer holds it, with the outcome it reported for it once it had
    /// killed it, if it did; `Some(Err)` when the worker is not connected; `None` while it
    /// still holds it.
    pub fn stopped(&mut self, worker: &str, token: &str) -> Option<Stopped> {
        if !self.workers.get(worker).is_some_and(|w| w.heard) {
            return Some(Err(format!(
                "worker `{worker}` is not connected: the try may still run there"
            )));
        }
        let held = (self.withdrawn.get(worker)).is_some_and(|w| w.contains(token));
        (!held).then(|| Ok(self.killed.remove(token)))
    }

    fn keep_killed(&mut self, token: &str, outcome: Vec<u8>) {
        if self.killed.insert(token.to_owned(), outcome).is_none() {
            self.killed_order.push_back(token.to_owned());
        }
        while self.killed_order.len() > KILLED_KEPT_MAX {
            if let Some(old) = self.killed_order.pop_front() {
                self.killed.remove(&old);
            }
        }
    }

    fn decide(&mut self, token: &str, decision: Decision) {
        if self.decided.insert(token.to_owned(), decision).is_none() {
            self.decided_order.push_back(token.to_owned());
        }
        while self.decided_order.len() > DECIDED_MAX {
            if let Some(old) = self.decided_order.pop_front() {
                self.decided.remove(&old);
            }
        }
    }

    /// Declares workers silent past the heartbeat timeout lost, with their tries.
    pub fn reap(&mut self, now: Instant, config: &Config) {
        let silent: Vec<String> = (self.workers.iter())
            .filter(|(_, w)| now.duration_since(w.last_seen) >= config.heartbeat_timeout)
            .map(|(name, _)| name.clone())
            .collect();
        for name in silent {
            self.workers.remove(&name);
            self.withdrawn.remove(&name);
            self.orphans.retain(|_, (w, _)| *w != name);
            // In the order they were given.
            let tokens = self.held_by(&name);
            if tokens.is_empty() {
                tracing::info!(worker = %name, "worker gone quiet, holding no try");
                continue;
            }
            self.lost_workers += 1;
            crate::metrics::lost();
            let secs = config.heartbeat_timeout.as_secs_f64();
            let reason =
                format!("worker `{name}` sent no heartbeat for {secs}s (the heartbeat timeout)");
            tracing::warn!(worker = %name, tries = tokens.len(), "worker lost");
            for token in tokens {
                if let Some(task) = self.tasks.remove(&token) {
                    let _ = task.events.send(TaskEvent::Lost {
                        reason: reason.clone(),
                    });
                }
                self.decide(&token, Decision::Refused(reason.clone()));
            }
        }
    }
}

/// Milliseconds since the Unix epoch, for views.
pub(crate) fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
