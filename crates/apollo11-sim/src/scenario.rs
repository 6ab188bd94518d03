//! A seed's scenario: a workflow of simulated steps (what each attempt and compensation
//! does), the runs started, the operator's actions and the crashes, drawn from the seed.
//! A scenario is shrunk by keeping a prefix of its steps, actions and crashes
//! ([`Scenario::truncated`]): the same seed, a smaller history.

use crate::rng::Rng;
use apollo11_core::{Idempotency, OnFailure, OverrideTarget, TriggerRule};

/// How much of a seed's scenario is kept: at most this many steps, actions and crashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    /// Steps of the workflow (at least 1).
    pub steps: usize,
    /// Operator actions.
    pub actions: usize,
    /// Crashes (each followed by a reopen and a resume).
    pub crashes: usize,
    /// Faults of workers.
    pub faults: usize,
}

impl Size {
    /// Everything the seed drew.
    pub const FULL: Size = Size {
        steps: usize::MAX,
        actions: usize::MAX,
        crashes: usize::MAX,
        faults: usize::MAX,
    };
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} steps, {} actions, {} crashes, {} worker faults",
            self.steps, self.actions, self.crashes, self.faults
        )
    }
}

/// What one attempt of a step does (simulated milliseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Succeeds after this long.
    Succeed(u64),
    /// Fails, retryably, after this long.
    Retryable(u64),
    /// Fails for good after this long.
    Fatal(u64),
    /// Never ends by itself (its timeout ends it).
    Hang,
    /// Would succeed, but after this long, past its timeout.
    Slow(u64),
}

/// One step of the scenario's workflow.
#[derive(Clone, Debug)]
pub struct StepPlan {
    /// `s0`, `s1`, …
    pub name: String,
    /// Earlier steps it depends on (indices).
    pub depends_on: Vec<usize>,
    /// Its idempotency class.
    pub class: Idempotency,
    /// Attempts allowed, the first included.
    pub max_attempts: u32,
    /// Each attempt's timeout.
    pub timeout_ms: u64,
    /// What attempt `n` does is `attempts[n - 1]`; attempts past the end succeed at once.
    pub attempts: Vec<Behaviour>,
    /// With a compensation: how many of its first tries fail (retryably).
    pub compensation_failures: Option<u32>,
    /// When it may start (`trigger`).
    pub trigger: TriggerRule,
    /// A condition (`when`) that holds (`true`) or not (`false`): the step then is skipped.
    pub when: Option<bool>,
    /// Its output is a JSON list of this many items (`["i0", "i1", …]`) rather than text.
    pub list: Option<u32>,
    /// A template (`for_each` at run time) over the output of this step (an index among
    /// `depends_on`, whose `list` is set): one step per item, each running this plan.
    pub template: Option<usize>,
    /// A waiting step: what it waits for instead of running (its `attempts` unused).
    pub wait: Option<WaitPlan>,
}

/// What a waiting step waits for; its timeout is its deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitPlan {
    /// A signal, which the operator sends this long after the step starts waiting.
    Signal {
        /// Simulated ms.
        after_ms: u64,
    },
    /// A timer of this long.
    Timer {
        /// Simulated ms.
        ms: u64,
    },
}

/// An operator's action on a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// `pause`.
    Pause,
    /// `resume` (of a pause).
    Unpause,
    /// `rollback`.
    Rollback,
    /// `override` of a step.
    Override {
        /// Index of the step.
        step: usize,
        /// Its new state.
        to: OverrideTarget,
    },
    /// `override` of a step, by name (an item of a template among them), to skipped: what
    /// the last generation's operator does to a compensation out of tries.
    Skip {
        /// The step.
        step: String,
    },
    /// `rerun` of a step (index), and of the steps after it with `downstream`: what the last
    /// generation's operator does to a succeeded run of one seed in three.
    Rerun {
        /// Index of the step.
        step: usize,
        /// Whether the steps after it run again too.
        downstream: bool,
    },
}

/// An action at a simulated time.
#[derive(Clone, Debug)]
pub struct Timed {
    /// Simulated ms since the simulation began.
    pub at_ms: u64,
    /// Which run (index).
    pub run: usize,
    /// What.
    pub action: Action,
}

/// How a generation of the engine ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    /// The machine loses power during the sync numbered `at_sync` of the generation
    /// (`Fault::PowerLossAtSync`); the next one opens what the disk kept.
    PowerLoss {
        /// Which sync.
        at_sync: u32,
        /// Decides what the pending writes become.
        seed: u64,
    },
    /// The sync numbered `at_sync` fails (the store stops); the process restarts on the same
    /// disk.
    SyncError {
        /// Which sync.
        at_sync: u32,
    },
    /// The process is killed `after_ms` into the generation.
    Kill {
        /// Simulated ms after the generation opened.
        after_ms: u64,
    },
}

/// Who drives the runs after a crash, on a store whose runs are leased.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takeover {
    /// The crashed engine's owner again: it takes each lease on at once, at its epoch.
    SameOwner,
    /// Another owner: it takes each run over once the crashed engine's lease has run out
    /// (its ttl, on the database's clock), at the next epoch.
    NewOwner,
}

/// What befalls a simulated worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerFault {
    /// The worker's machine dies with the tries it runs, and comes back empty this long
    /// after.
    Kill {
        /// Simulated ms it stays down.
        down_ms: u64,
    },
    /// Nothing the worker sends or is sent gets through for this long; its tries run on.
    Cut {
        /// Simulated ms the link stays down.
        for_ms: u64,
    },
}

/// A worker fault at a simulated time.
#[derive(Clone, Copy, Debug)]
pub struct TimedFault {
    /// Simulated ms since the simulation began.
    pub at_ms: u64,
    /// Which worker (index).
    pub worker: usize,
    /// What.
    pub fault: WorkerFault,
}

/// Steps placed on simulated workers, and what befalls the workers.
#[derive(Clone, Debug, Default)]
pub struct Remote {
    /// Per step: placed on a worker rather than run by the engine (its compensation runs in
    /// the engine).
    pub placed: Vec<bool>,
    /// How many workers take placed steps (each can take any).
    pub workers: usize,
    /// What befalls them, by time.
    pub faults: Vec<TimedFault>,
}

impl Remote {
    /// Whether step `i` is placed.
    pub fn placed(&self, i: usize) -> bool {
        self.placed.get(i).copied().unwrap_or(false)
    }
}

/// A seed's whole scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The seed it was drawn from.
    pub seed: u64,
    /// What is done when a step fails for good.
    pub on_failure: OnFailure,
    /// The workflow's steps, each depending on earlier ones only.
    pub steps: Vec<StepPlan>,
    /// Runs started at once.
    pub runs: usize,
    /// The operator's actions, by time.
    pub actions: Vec<Timed>,
    /// One per generation but the last.
    pub crashes: Vec<Crash>,
    /// One per crash: who drives the next generation.
    pub takeovers: Vec<Takeover>,
    /// Steps on simulated workers, in one seed of two.
    pub remote: Option<Remote>,
}

impl Scenario {
    /// The scenario of `seed`.
    pub fn generate(seed: u64) -> Scenario {
        let mut rng = Rng::new(seed);
        let on_failure = if rng.chance(50) {
            OnFailure::Rollback
        } else {
            OnFailure::Pause
        };
        let steps: Vec<StepPlan> = (0..rng.between(1, 8) as usize)
            .map(|i| step(&mut rng, i))
            .collect();
        let runs = rng.between(1, 3) as usize;
        let mut actions: Vec<Timed> = (0..rng.below(6))
            .map(|_| Timed {
                at_ms: rng.below(3_000),
                run: rng.below(runs as u64) as usize,
                action: action(&mut rng, steps.len()),
            })
            .collect();
        actions.sort_by_key(|a| a.at_ms);
        let crashes: Vec<Crash> = (0..rng.below(4)).map(|_| crash(&mut rng)).collect();
        // Drawn last, so that what the seed drew before they existed stays as it was.
        let takeovers = (crashes.iter())
            .map(|_| {
                if rng.chance(50) {
                    Takeover::SameOwner
                } else {
                    Takeover::NewOwner
                }
            })
            .collect();
        let mut steps = steps;
        for i in 0..steps.len() {
            author(&mut rng, &mut steps, i);
        }
        let remote = rng.chance(50).then(|| remote(&mut rng, steps.len()));
        for i in 0..steps.len() {
            wait(&mut rng, &mut steps, i);
        }
        Scenario {
            seed,
            on_failure,
            steps,
            runs,
            actions,
            crashes,
            takeovers,
            remote,
        }
    }

    /// The size of this scenario.
    pub fn size(&self) -> Size {
        Size {
            steps: self.steps.len(),
            actions: self.actions.len(),
            crashes: self.crashes.len(),
            faults: self.remote.as_ref().map_or(0, |r| r.faults.len()),
        }
    }

    /// The first steps, actions, crashes and worker faults, within `size` (actions on a step
    /// cut off go).
    pub fn truncated(&self, size: Size) -> Scenario {
        let steps: Vec<StepPlan> = self.steps.iter().take(size.steps.max(1)).cloned().collect();
        let kept =
            |a: &&Timed| !matches!(a.action, Action::Override { step, .. } if step >= steps.len());
        let actions = self
            .actions
            .iter()
            .filter(kept)
            .take(size.actions)
            .cloned()
            .collect();
        Scenario {
            seed: self.seed,
            on_failure: self.on_failure,
            runs: self.runs,
            actions,
            crashes: self.crashes.iter().take(size.crashes).copied().collect(),
            takeovers: self.takeovers.iter().take(size.crashes).copied().collect(),
            remote: self.remote.as_ref().map(|r| Remote {
                placed: r.placed.iter().take(steps.len()).copied().collect(),
                workers: r.workers,
                faults: r.faults.iter().take(size.faults).copied().collect(),
            }),
            steps,
        }
    }
}

fn step(rng: &mut Rng, i: usize) -> StepPlan {
    let depends_on = (0..i).filter(|_| rng.chance(30)).collect();
    let class = match rng.below(4) {
        0 => Idempotency::Natural,
        1 => Idempotency::Keyed,
        2 => Idempotency::Checkpoint,
        _ => Idempotency::Compensate,
    };
    let max_attempts = rng.between(1, 4) as u32;
    let timeout_ms = rng.between(100, 300);
    let attempts = (0..max_attempts)
        .map(|_| match rng.below(100) {
            0..60 => Behaviour::Succeed(rng.between(1, 50)),
            60..80 => Behaviour::Retryable(rng.between(1, 50)),
            80..85 => Behaviour::Fatal(rng.between(1, 50)),
            85..92 => Behaviour::Hang,
            _ => Behaviour::Slow(timeout_ms + rng.between(1, 100)),
        })
        .collect();
    let compensated = class == Idempotency::Compensate || rng.chance(50);
    StepPlan {
        name: format!("s{i}"),
        depends_on,
        class,
        max_attempts,
        timeout_ms,
        attempts,
        compensation_failures: compensated.then(|| rng.below(3) as u32),
        trigger: TriggerRule::AllSucceeded,
        when: None,
        list: None,
        template: None,
        wait: None,
    }
}

/// Whether step `i` waits (drawn after the rest of the scenario): one in eight of the
/// steps that are neither a template nor a template's source, for a signal or a timer,
/// either of which may come past the step's deadline. A waiting step runs nothing: its
/// class is `natural`, it has no compensation.
fn wait(rng: &mut Rng, steps: &mut [StepPlan], i: usize) {
    let plan = &mut steps[i];
    if plan.template.is_some() || plan.list.is_some() || !rng.chance(12) {
        return;
    }
    plan.wait = Some(if rng.chance(50) {
        WaitPlan::Signal {
            after_ms: rng.between(0, 400),
        }
    } else {
        WaitPlan::Timer {
            ms: rng.between(1, 400),
        }
    });
    plan.class = Idempotency::Natural;
    plan.compensation_failures = None;
}

/// What an author adds to step `i` (drawn after the rest of the scenario): a trigger rule,
/// a condition true or false, or a `for_each` over the list an earlier step it depends on
/// outputs (its items then run its plan).
fn author(rng: &mut Rng, steps: &mut [StepPlan], i: usize) {
    let sources: Vec<usize> = (steps[i].depends_on.iter().copied())
        .filter(|&d| steps[d].template.is_none())
        .collect();
    let plan = &mut steps[i];
    plan.trigger = match rng.below(10) {
        0 => TriggerRule::OneFailed,
        1 => TriggerRule::AllDone,
        _ => TriggerRule::AllSucceeded,
    };
    plan.when = match rng.below(8) {
        0 => Some(true),
        1 => Some(false),
        _ => None,
    };
    if sources.is_empty() || plan.trigger != TriggerRule::AllSucceeded || !rng.chance(40) {
        return;
    }
    let source = sources[rng.below(sources.len() as u64) as usize];
    plan.template = Some(source);
    let items = rng.below(5) as u32;
    let list = steps[source].list.get_or_insert(items);
    *list = (*list).max(items);
}

fn action(rng: &mut Rng, steps: usize) -> Action {
    match rng.below(4) {
        0 => Action::Pause,
        1 => Action::Unpause,
        2 => Action::Rollback,
        _ => Action::Override {
            step: rng.below(steps as u64) as usize,
            to: match rng.below(4) {
                0 => OverrideTarget::Succeeded,
                1 => OverrideTarget::Skipped,
                2 => OverrideTarget::Pending,
                _ => OverrideTarget::Failed,
            },
        },
    }
}

/// Placed steps (about half), one to three workers, and up to six faults among them while
/// the runs are young (the first 800 ms).
fn remote(rng: &mut Rng, steps: usize) -> Remote {
    let placed = (0..steps).map(|_| rng.chance(50)).collect();
    let workers = rng.between(1, 3) as usize;
    let mut faults: Vec<TimedFault> = (0..rng.below(7))
        .map(|_| TimedFault {
            at_ms: rng.below(800),
            worker: rng.below(workers as u64) as usize,
            fault: if rng.chance(50) {
                WorkerFault::Kill {
                    down_ms: rng.between(10, 500),
                }
            } else {
                WorkerFault::Cut {
                    for_ms: rng.between(10, 500),
                }
            },
        })
        .collect();
    faults.sort_by_key(|f| f.at_ms);
    Remote {
        placed,
        workers,
        faults,
    }
}

fn crash(rng: &mut Rng) -> Crash {
    match rng.below(10) {
        0..4 => Crash::PowerLoss {
            at_sync: rng.below(60) as u32,
            seed: rng.next(),
        },
        4..6 => Crash::SyncError {
            at_sync: rng.below(60) as u32,
        },
        _ => Crash::Kill {
            after_ms: rng.below(1_500),
        },
    }
}
