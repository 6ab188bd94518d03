//! Simulated workers: each takes placed tries from the dispatcher up now, runs them as
//! their job says (an execution recorded in the ledger once the engine acknowledged its
//! start), reports their ends until the engine records them or refuses them, stops what
//! its heartbeat's answer says, and suffers the scenario's faults: killed with its tries
//! (back, empty, after a while), or cut off (its tries run on; nothing it sends or is sent
//! gets through until the link heals).

use crate::remote::{self, Job, Post, HEARTBEAT_EVERY};
use crate::scenario::{Behaviour, Remote, WorkerFault};
use crate::steps::{Execution, Ledger};
use apollo11_dispatch::{Dispatcher, Hello, Offer, Refusal};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::{Duration, Instant};

/// Tries a worker runs at once.
const SLOTS: usize = 2;
/// How long a worker's poll for a try waits.
const POLL: Duration = Duration::from_millis(50);

/// The workers of a scenario, alive until dropped.
pub struct Fleet {
    _lives: JoinSet<()>,
}

impl Fleet {
    /// Starts `remote`'s workers, their faults timed from `start`.
    pub fn start(remote: &Remote, post: &Post, ledger: &Ledger, start: Instant) -> Fleet {
        let mut lives = JoinSet::new();
        for w in 0..remote.workers {
            let faults = (remote.faults.iter())
                .filter(|f| f.worker == w)
                .map(|f| (start + Duration::from_millis(f.at_ms), f.fault))
                .collect();
            let worker = Arc::new(Worker {
                hello: Hello {
                    name: format!("w{w}"),
                    labels: remote::labels(),
                    slots: SLOTS as u32,
                    version: "sim".to_owned(),
                },
                post: post.clone(),
                ledger: ledger.clone(),
                cut_until: Mutex::new(None),
                running: Mutex::new(BTreeMap::new()),
            });
            lives.spawn(worker.live(faults));
        }
        Fleet { _lives: lives }
    }
}

struct Worker {
    hello: Hello,
    post: Post,
    ledger: Ledger,
    /// Until when nothing gets through.
    cut_until: Mutex<Option<Instant>>,
    /// The tries it runs, by token.
    running: Mutex<BTreeMap<String, AbortHandle>>,
}

impl Worker {
    /// Lives, dies and comes back as `faults` say.
    async fn live(self: Arc<Self>, faults: Vec<(Instant, WorkerFault)>) {
        let mut life = self.clone().born();
        for (at, fault) in faults {
            tokio::time::sleep_until(at).await;
            match fault {
                WorkerFault::Cut { for_ms } => {
                    *lock(&self.cut_until) = Some(Instant::now() + Duration::from_millis(for_ms));
                }
                WorkerFault::Kill { down_ms } => {
                    life.abort_all();
                    while life.join_next().await.is_some() {}
                    lock(&self.running).clear();
                    tokio::time::sleep(Duration::from_millis(down_ms)).await;
                    life = self.clone().born();
                }
            }
        }
        std::future::pending::<()>().await;
    }

    /// A life: the heartbeat, the polls, and the tries taken, all ended by a kill.
    fn born(self: Arc<Self>) -> JoinSet<()> {
        let mut life = JoinSet::new();
        life.spawn(self.clone().beat());
        life.spawn(self.poll());
        life
    }

    fn cut(&self) -> bool {
        lock(&self.cut_until).is_some_and(|until| Instant::now() < until)
    }

    /// Waits until the link is up.
    async fn reach(&self) {
        let until = *lock(&self.cut_until);
        if let Some(until) = until {
            tokio::time::sleep_until(until).await;
        }
    }

    async fn beat(self: Arc<Self>) {
        loop {
            tokio::time::sleep(HEARTBEAT_EVERY).await;
            let Some(dispatcher) = self.post.now().filter(|_| !self.cut()) else {
                continue;
            };
            let tokens: Vec<String> = lock(&self.running).keys().cloned().collect();
            let stop = dispatcher.heartbeat(&self.hello, &tokens);
            if self.cut() {
                continue;
            }
            for token in stop {
                if let Some(running) = lock(&self.running).remove(&token) {
                    running.abort();
                }
            }
        }
    }

    async fn poll(self: Arc<Self>) {
        let mut tries = JoinSet::new();
        loop {
            while tries.try_join_next().is_some() {}
            self.reach().await;
            let dispatcher = self.post.up().await;
            let free = SLOTS.saturating_sub(lock(&self.running).len());
            if free == 0 {
                tokio::time::sleep(HEARTBEAT_EVERY).await;
                continue;
            }
            let offers = dispatcher.take(&self.hello, free as u32, POLL).await;
            if self.cut() {
                continue;
            }
            for offer in offers {
                let token = offer.token.clone();
                let started = tries.spawn(self.clone().run(dispatcher.clone(), offer));
                lock(&self.running).insert(token, started);
            }
        }
    }

    /// One try: started once the engine says so, run, reported until taken or refused.
    async fn run(self: Arc<Self>, dispatcher: Dispatcher, offer: Offer) {
        let name = self.hello.name.clone();
        let Some(job) = Job::decode(&offer.job) else {
            lock(&self.running).remove(&offer.token);
            return;
        };
        let handle = format!("{name} {}", offer.token);
        let acked = dispatcher
            .started(&name, &offer.token, name.clone(), handle)
            .await;
        if acked.is_err() || self.cut() {
            lock(&self.running).remove(&offer.token);
            return;
        }
        self.ledger.record_execution(Execution {
            run: offer.what.run_id.clone(),
            step: offer.what.step.clone(),
            attempt: offer.what.attempt,
            compensation: false,
        });
        let outcome = remote::outcome(&perform(job).await);
        loop {
            self.reach().await;
            let dispatcher = self.post.up().await;
            let answer = dispatcher
                .finish(&name, &offer.token, outcome.clone())
                .await;
            match answer {
                Ok(()) | Err(Refusal::Decided(_)) if !self.cut() => break,
                _ => tokio::time::sleep(HEARTBEAT_EVERY).await,
            }
        }
        lock(&self.running).remove(&offer.token);
    }
}

/// What the job says the try does: its output, or whether its failure is retryable.
async fn perform(job: Job) -> Result<Vec<u8>, bool> {
    let after = |ms| tokio::time::sleep(Duration::from_millis(ms));
    match job.behaviour {
        Behaviour::Succeed(ms) | Behaviour::Slow(ms) => {
            after(ms).await;
            Ok(job.output)
        }
        Behaviour::Retryable(ms) => {
            after(ms).await;
            Err(true)
        }
        Behaviour::Fatal(ms) => {
            after(ms).await;
            Err(false)
        }
        Behaviour::Hang => std::future::pending().await,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
