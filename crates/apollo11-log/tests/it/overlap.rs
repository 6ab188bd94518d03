//! When more is queued as a batch is written, the sync thread syncs it while the writer writes
//! the next. Here a gate in front of `SimFs` holds a batch's write until the next batch is
//! queued, then holds its sync (before its data reaches the disk, or after, with the writer
//! not yet told) while the next batch is written, once the sync has started; then: a power
//! loss at that moment, for many seeds, must leave a log that opens (I5), is a prefix of what
//! was written (I2) and holds everything acknowledged (I1), with nothing acknowledged before
//! its sync returned; a sync error there must fail both batches and stop the store, with no sync
//! retried.

use crate::common::{created, sized, HookedFs};
use apollo11_core::{EventId, RunId, Seq};
use apollo11_log::{FileLog, FsFile, Options, SimFs};
use apollo11_store::{EventStore, StoreError};
use std::future::Future;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

/// What the gate does to the segment sync it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    /// Waits before the sync reaches the disk, then syncs.
    Before,
    /// Syncs, then waits before returning: durable, and the writer does not know it yet.
    After,
    /// Waits, then fails without syncing.
    Fail,
}

#[derive(Default)]
struct GateState {
    /// Segment syncs started, and reached (past the disk for a sync held after it), and
    /// segment writes done, since the gate was armed.
    started: u32,
    syncs: u32,
    /// The thread of each segment sync started, by number.
    threads: Vec<String>,
    writes: u32,
    /// The sync held (by number since armed) and how.
    hold: Option<(u32, Hold)>,
    released: bool,
    /// Whether the first segment write since armed waits, once done, for `written`.
    hold_write: bool,
    written: bool,
    /// The segment write (by number since armed) that fails, if any.
    fail_write: Option<u32>,
}

/// Counts and holds the data syncs and writes of segment files.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn state(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts counting from zero, holding the first write until [`Gate::let_write_return`]
    /// and sync `n` as `hold`.
    fn arm(&self, n: u32, hold: Hold) {
        *self.state() = GateState {
            hold: Some((n, hold)),
            hold_write: true,
            ..GateState::default()
        };
    }

    fn let_write_return(&self) {
        self.state().written = true;
        self.changed.notify_all();
    }

    fn release(&self) {
        self.state().released = true;
        self.changed.notify_all();
    }

    /// Waits (at most `seconds`) until `done` holds of the counts.
    fn wait_for(&self, what: &str, seconds: u64, done: impl Fn(&GateState) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let mut state = self.state();
        while !done(&state) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "timed out waiting for {what}");
            state = self.changed.wait_timeout(state, left).unwrap().0;
        }
    }

    /// Numbers a segment sync; how the gate holds it.
    fn number(&self) -> (u32, Option<Hold>) {
        let mut state = self.state();
        let thread = std::thread::current().name().unwrap_or_default().to_owned();
        state.threads.push(thread);
        state.started += 1;
        let number = state.started - 1;
        let hold = (state.hold).filter(|&(held, _)| held == number);
        (number, hold.map(|(_, hold)| hold))
    }

    /// Counts a segment write done, or a sync reached.
    fn count(&self, write: bool) {
        let mut state = self.state();
        *(if write {
            &mut state.writes
        } else {
            &mut state.syncs
        }) += 1;
        drop(state);
        self.changed.notify_all();
    }

    fn wait_for_release(&self) {
        // The test checks many power losses meanwhile: on a loaded machine that takes time.
        self.wait_for("the test to release the sync", 300, |s| s.released);
    }
}

/// A segment file behind the gate (other files are not wrapped).
struct GatedFile {
    inner: Box<dyn FsFile>,
    gate: Arc<Gate>,
}

impl FsFile for GatedFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let gate = &self.gate;
        let (number, held, fail) = {
            let state = gate.state();
            (state.writes, state.hold_write, state.fail_write)
        };
        if fail == Some(number) {
            return Err(io::Error::other(format!(
                "injected failure of segment write {number}"
            )));
        }
        if held && number == 1 {
            // The next batch's data is not in the file when the held sync starts.
            gate.wait_for("batch N's sync", 30, |s| s.syncs == 1);
        }
        self.inner.write_all_at(buf, offset)?;
        gate.count(true);
        if held && number == 0 {
            gate.wait_for("the test to let the write return", 30, |s| s.written);
        }
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        let gate = &self.gate;
        let (number, hold) = gate.number();
        if hold == Some(Hold::After) {
            self.inner.sync_data()?;
        }
        gate.count(false);
        match hold {
            None => self.inner.sync_data(),
            Some(Hold::Before) => {
                gate.wait_for_release();
                self.inner.sync_data()
            }
            Some(Hold::After) => {
                gate.wait_for_release();
                Ok(())
            }
            Some(Hold::Fail) => {
                gate.wait_for_release();
                Err(io::Error::other(format!(
                    "injected failure of segment sync {number}"
                )))
            }
        }
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
}

type Appending = tokio::task::JoinHandle<Result<Vec<EventId>, StoreError>>;

/// A log on `sim` behind a gate, holding run `a`'s first event, acknowledged.
async fn log_with_one_event(sim: &Arc<SimFs>) -> (Arc<FileLog>, Arc<Gate>) {
    log_with_one_event_and(sim, Options::default()).await
}

/// [`log_with_one_event`] opened with `options`.
async fn log_with_one_event_and(sim: &Arc<SimFs>, options: Options) -> (Arc<FileLog>, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let gated = gate.clone();
    let fs = Arc::new(HookedFs {
        sim: sim.clone(),
        on_open: Box::new(move |path, file| {
            if path.extension().is_some_and(|e| e == "seg") {
                Box::new(GatedFile {
                    inner: file,
                    gate: gated.clone(),
                })
            } else {
                file
            }
        }),
    });
    let log = Arc::new(FileLog::open_with(fs, "/d", options).unwrap());
    log.append(&RunId::from("a"), Seq(1), vec![created()])
        .await
        .unwrap();
    (log, gate)
}

/// [`log_with_one_event`] whose syncs wait for the writer's turn however late a loaded
/// machine schedules it.
async fn log_waiting_for_the_writer(sim: &Arc<SimFs>) -> (Arc<FileLog>, Arc<Gate>) {
    let options = Options {
        sync_waits_for_writer: Duration::from_secs(60),
        ..Options::default()
    };
    log_with_one_event_and(sim, options).await
}

fn spawn_append(log: &Arc<FileLog>, run: &str) -> Appending {
    let (log, run) = (log.clone(), RunId::from(run));
    tokio::spawn(async move { log.append(&run, Seq(1), vec![sized("s", 300)]).await })
}

/// An append of run `run`, queued for the writer when this returns.
fn queued_append(log: &Arc<FileLog>, run: &str) -> Appending {
    let (log, run) = (log.clone(), RunId::from(run));
    let mut append = Box::pin(async move { log.append(&run, Seq(1), vec![sized("s", 300)]).await });
    // The first poll queues the request (there is room), then waits for its answer.
    let polled = append
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()));
    assert!(polled.is_pending(), "{polled:?}");
    tokio::spawn(append)
}

/// Holds the next segment sync as `hold` with batch N (run `b`) in it, batch N+1 (run `c`)
/// queued as N was written, and writes N+1 meanwhile; returns both appends, neither answered.
async fn batch_written_during_a_held_sync(
    log: &Arc<FileLog>,
    gate: &Gate,
    hold: Hold,
) -> (Appending, Appending) {
    gate.arm(0, hold);
    let n = spawn_append(log, "b");
    gate.wait_for("batch N's write", 30, |s| s.writes == 1);
    let next = queued_append(log, "c");
    gate.let_write_return();
    gate.wait_for("batch N's sync", 30, |s| s.syncs == 1);
    gate.wait_for("batch N+1's write", 30, |s| s.writes == 2);
    assert_eq!(gate.state().threads, ["apollo11-log-sync"]);
    // Time for a writer that acknowledged early to do it.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !n.is_finished() && !next.is_finished(),
        "an append was answered before a sync covering it returned"
    );
    (n, next)
}

/// What a power loss leaves, decided by `seed`: the runs found, in id order, checked for
/// I5 (it opens), I2 and I6 (ids consecutive from 1; a prefix of a, b, c) and I1 (`acked`).
async fn runs_after_power_loss(sim: &SimFs, seed: u64, acked: &[&str]) -> (Vec<String>, bool) {
    let image = Arc::new(sim.power_loss(seed));
    let log = FileLog::open_with(image, "/d", Options::default())
        .unwrap_or_else(|e| panic!("seed {seed}: recovery failed (I5): {e}"));
    let found = log.read_from(EventId(1), u32::MAX).await.unwrap();
    let ids: Vec<u64> = found.iter().map(|e| e.event_id.0).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "seed {seed} (I6)"
    );
    let runs: Vec<String> = found.iter().map(|e| e.run_id.to_string()).collect();
    assert!(
        ["a", "b", "c"].starts_with(&runs.iter().map(String::as_str).collect::<Vec<_>>()),
        "seed {seed}: {runs:?} is not a prefix of what was written (I2)"
    );
    assert!(
        runs.len() >= acked.len(),
        "seed {seed}: {runs:?} lost one of {acked:?} (I1)"
    );
    (runs, log.recovery().torn.is_some())
}

/// Power losses at the held sync, then at the end: returns how often each count of runs
/// survived the first, and how often a torn tail was cut.
async fn power_loss_around_a_held_sync(hold: Hold) -> ([u32; 4], u32) {
    let sim = Arc::new(SimFs::new());
    let (log, gate) = log_with_one_event(&sim).await;
    let (n, next) = batch_written_during_a_held_sync(&log, &gate, hold).await;
    let (mut outcomes, mut torn) = ([0u32; 4], 0);
    for seed in 0..200 {
        let (runs, cut) = runs_after_power_loss(&sim, seed, &["a"]).await;
        if hold == Hold::After {
            assert!(runs.len() >= 2, "seed {seed}: batch N was synced: {runs:?}");
        }
        outcomes[runs.len()] += 1;
        torn += u32::from(cut);
    }
    gate.release();
    n.await.unwrap().unwrap();
    next.await.unwrap().unwrap();
    for seed in 0..20 {
        runs_after_power_loss(&sim, seed, &["a", "b", "c"]).await;
    }
    (outcomes, torn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_power_loss_while_batch_n_syncs_and_batch_n_plus_1_is_written_loses_nothing_acked() {
    let (outcomes, torn) = power_loss_around_a_held_sync(Hold::Before).await;
    // Batch N and N+1 both unsynced: each of a, a+b, a+b+c survives for some seed (a+b+c
    // when both writes landed, a alone whenever N did not, whatever became of N+1).
    assert!(
        outcomes[1] > 0 && outcomes[2] > 0 && outcomes[3] > 0,
        "{outcomes:?}"
    );
    assert!(torn > 0, "no seed tore a batch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_power_loss_after_batch_n_synced_and_before_batch_n_plus_1_syncs_loses_nothing() {
    let (outcomes, torn) = power_loss_around_a_held_sync(Hold::After).await;
    assert!(outcomes[2] > 0 && outcomes[3] > 0, "{outcomes:?}");
    assert!(torn > 0, "no seed tore batch N+1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_error_while_the_next_batch_is_written_fails_both_and_stops_the_store() {
    let sim = Arc::new(SimFs::new());
    let (log, gate) = log_with_one_event(&sim).await;
    let (n, next) = batch_written_during_a_held_sync(&log, &gate, Hold::Fail).await;
    gate.release();
    for (name, append) in [("N", n), ("N+1", next)] {
        let answer = append.await.unwrap();
        assert!(
            matches!(&answer, Err(StoreError::Poisoned { cause }) if cause.contains("injected")),
            "batch {name}: {answer:?}"
        );
    }
    let later = log.append(&RunId::from("d"), Seq(1), vec![created()]).await;
    assert!(
        matches!(later, Err(StoreError::Poisoned { .. })),
        "{later:?}"
    );
    assert_eq!(gate.state().started, 1, "a failed sync was retried");
    drop(log);
    for seed in 0..50 {
        runs_after_power_loss(&sim, seed, &["a"]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_append_is_written_and_synced_by_its_appender() {
    let sim = Arc::new(SimFs::new());
    let (log, gate) = log_with_one_event(&sim).await;
    let threads = gate.state().threads.clone();
    let this = std::thread::current().name().map(str::to_owned);
    assert_eq!(threads.last(), this.as_ref());
    spawn_append(&log, "b").await.unwrap().unwrap();
    let later = gate.state().threads.split_off(threads.len());
    assert_eq!(later, ["tokio-rt-worker"]);
    for seed in 0..20 {
        runs_after_power_loss(&sim, seed, &["a", "b"]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_queued_while_an_appender_syncs_its_own_is_synced_by_the_writer_itself() {
    let sim = Arc::new(SimFs::new());
    let (log, gate) = log_with_one_event(&sim).await;
    gate.arm(0, Hold::Before);
    let b = spawn_append(&log, "b");
    gate.wait_for("b's write", 30, |s| s.writes == 1);
    gate.let_write_return();
    gate.wait_for("b's sync", 30, |s| s.syncs == 1);
    let c = queued_append(&log, "c");
    gate.release();
    b.await.unwrap().unwrap();
    c.await.unwrap().unwrap();
    assert_eq!(
        gate.state().threads,
        ["tokio-rt-worker", "apollo11-log-writer"]
    );
    for seed in 0..20 {
        runs_after_power_loss(&sim, seed, &["a", "b", "c"]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_queued_during_a_sync_is_covered_by_the_next_sync_not_the_one_after() {
    let sim = Arc::new(SimFs::new());
    let (log, gate) = log_waiting_for_the_writer(&sim).await;
    let (n, next) = batch_written_during_a_held_sync(&log, &gate, Hold::Before).await;
    // Two batches unsynced: this one waits, queued, for batch N's sync to return.
    let d = queued_append(&log, "d");
    gate.release();
    for append in [n, next, d] {
        append.await.unwrap().unwrap();
    }
    // Batch N's sync, then one covering N+1 and the batch of `d` written after N returned.
    let (syncs, threads) = {
        let state = gate.state();
        (state.started, state.threads.clone())
    };
    assert_eq!(syncs, 2, "syncs on {threads:?}");
    let found = log.read_from(EventId(1), u32::MAX).await.unwrap();
    let runs: Vec<String> = found.iter().map(|e| e.run_id.to_string()).collect();
    assert_eq!(runs, ["a", "b", "c", "d"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_failing_after_a_sync_returned_fails_only_what_that_sync_did_not_cover() {
    let sim = Arc::new(SimFs::new());
    let (log, gate) = log_waiting_for_the_writer(&sim).await;
    let (n, next) = batch_written_during_a_held_sync(&log, &gate, Hold::Before).await;
    // The batch of `d`, written once N's sync returns and before N is acknowledged, fails.
    gate.state().fail_write = Some(2);
    let d = queued_append(&log, "d");
    gate.release();
    let synced = n.await.unwrap();
    assert!(synced.is_ok(), "batch N was synced: {synced:?}");
    for (name, append) in [("N+1", next), ("d", d)] {
        let answer = append.await.unwrap();
        assert!(
            matches!(&answer, Err(StoreError::Poisoned { cause }) if cause.contains("injected")),
            "{name}: {answer:?}"
        );
    }
    drop(log);
    for seed in 0..20 {
        runs_after_power_loss(&sim, seed, &["a", "b"]).await;
    }
}
