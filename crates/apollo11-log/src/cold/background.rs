//! Compressing the sealed segments of a writing open: [`compress_sealed`] does one pass on the
//! calling thread; [`Compactor`] runs passes on a thread of its own, one each time the writer
//! seals a segment ([`Signal::sealed`], which never waits for a pass), until the log closes.
//! The index is pointed at each compressed file once it is in place, under the index's write
//! lock, held only for that swap.

use super::{compress_segment, open_segment, Compressed};
use crate::file_system::{Fs, Mode};
use crate::write::writer::Shared;
use apollo11_store::StoreError;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Compresses every sealed segment of the log in `shared` older than its newest `keep`
/// sealed ones and not compressed yet, oldest first, and points the index at each compressed
/// file; stops early once `stop` says so. Returns what it compressed.
///
/// # Errors
///
/// What [`compress_segment`] returns for the first segment it cannot compress (those
/// before it stay compressed; the index still reads that one plain).
pub fn compress_sealed(
    fs: &dyn Fs,
    dir: &Path,
    shared: &Shared,
    keep: usize,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Compressed>, StoreError> {
    let _pass = exclusive();
    let candidates: Vec<(usize, String)> = {
        let index = shared.index.read().unwrap_or_else(|p| p.into_inner());
        // The last segment is the one the writer appends to.
        let sealed = index.segments.len().saturating_sub(1);
        (index.segments[..sealed.saturating_sub(keep)]
            .iter()
            .enumerate())
        .filter(|(_, segment)| !segment.cold)
        .map(|(position, segment)| (position, segment.name.clone()))
        .collect()
    };
    let mut compressed = Vec::new();
    for (position, name) in candidates {
        if stop() {
            break;
        }
        let path = dir.join(&name);
        compressed.extend(compress_segment(fs, &path)?);
        let opened = open_segment(fs, &path, Mode::Read)
            .map_err(|e| StoreError::io(format!("opening {}", path.display()), e))?;
        let mut index = shared.index.write().unwrap_or_else(|p| p.into_inner());
        let segment = &mut index.segments[position];
        segment.file = opened.file();
        segment.cold = true;
        drop(index);
        crate::metrics::segment_compressed();
    }
    Ok(compressed)
}

/// Held by each pass, and by `gc` while it rewrites sealed segments: one pass at a time in the
/// process (two compressing one segment would share its temp file), and none while `gc`
/// replaces segments (a compressed copy of a segment's old bytes must never land over its
/// rewritten one).
pub(crate) fn exclusive() -> MutexGuard<'static, ()> {
    static PASS: Mutex<()> = Mutex::new(());
    PASS.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the writer tells the compactor, and the compactor's stop.
#[derive(Default)]
pub struct Signal {
    /// `(a segment was sealed since the last pass, stop)`.
    state: Mutex<(bool, bool)>,
    wake: Condvar,
}

impl Signal {
    fn lock(&self) -> MutexGuard<'_, (bool, bool)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says a segment was sealed. Never waits for compression: the lock it takes is only
    /// ever held to read or set these two flags.
    pub fn sealed(&self) {
        self.lock().0 = true;
        self.wake.notify_one();
    }

    fn stop(&self) {
        self.lock().1 = true;
        self.wake.notify_one();
    }

    fn stopped(&self) -> bool {
        self.lock().1
    }

    /// Waits until a segment was sealed (true) or the compactor stops (false).
    fn next(&self) -> bool {
        let mut state = self.lock();
        while !state.0 && !state.1 {
            state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.0 = false;
        !state.1
    }
}

/// The thread compressing a writing open's sealed segments; stopped and joined when dropped
/// (a pass under way stops after the segment it is compressing).
pub struct Compactor {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

impl Compactor {
    /// Starts the thread, with a first pass for the segments already sealed.
    ///
    /// # Errors
    ///
    /// [`StoreError::Io`] when the thread cannot be started.
    pub fn start(
        fs: Arc<dyn Fs>,
        dir: PathBuf,
        shared: Arc<Shared>,
        keep: usize,
    ) -> Result<Compactor, StoreError> {
        let signal = Arc::new(Signal::default());
        signal.sealed();
        let theirs = signal.clone();
        let thread = std::thread::Builder::new()
            .name("apollo11-log-cold".into())
            .spawn(move || {
                while theirs.next() {
                    let stop = || theirs.stopped();
                    if compress_sealed(fs.as_ref(), &dir, &shared, keep, &stop).is_err() {
                        // The segment stays plain and readable; the next seal tries again.
                        crate::metrics::compression_failed();
                    }
                }
            })
            .map_err(|e| StoreError::io("starting the log's compression thread", e))?;
        Ok(Compactor {
            signal,
            thread: Some(thread),
        })
    }

    /// What the writer signals a seal on.
    pub fn signal(&self) -> Arc<Signal> {
        self.signal.clone()
    }
}

impl Drop for Compactor {
    fn drop(&mut self) {
        self.signal.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
