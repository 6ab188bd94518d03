//! Saving the index file of a segment the writer just sealed. A small segment's is saved on
//! the writer's thread; a large one's (hundreds of thousands of events at the default size)
//! on a thread of its own, which looks the events up a stretch at a time under the index's
//! read lock: built in one piece on the writer's thread it held appends for tens of
//! milliseconds at each roll. Compression of sealed segments is signalled once the index
//! file is saved, so it never rewrites a segment whose index is being read.

use crate::cold::Signal;
use crate::file_system::{Fs, FsFile};
use crate::format::index_file;
use crate::run_index::{Index, Scanning};
use crate::write::writer::Shared;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Events in a sealed segment up to which its index file is saved on the writer's thread
/// (about half a millisecond of work, at the rates measured on a full segment).
const INLINE_EVENTS_MAX: usize = 16_384;

/// Events looked up per hold of the index's read lock on the saving thread.
const STRETCH_EVENTS: usize = 16_384;

/// A segment just sealed.
pub struct Sealed {
    /// Its first event id.
    pub base: u64,
    /// Its name in the index.
    pub name: String,
    /// Its path.
    pub path: PathBuf,
    /// Its open file.
    pub file: Arc<dyn FsFile>,
    /// Where its data ends.
    pub end: u64,
    /// Its events.
    pub events: usize,
}

/// Saves `sealed`'s index file, then tells `signal`: here when the segment is small,
/// otherwise on a thread of its own, whose handle is returned.
pub fn save(
    fs: Arc<dyn Fs>,
    shared: Arc<Shared>,
    sealed: Sealed,
    signal: Option<Arc<Signal>>,
) -> Option<JoinHandle<()>> {
    let inline = sealed.events <= INLINE_EVENTS_MAX;
    let stretch = if inline { usize::MAX } else { STRETCH_EVENTS };
    let work = move || {
        if !inline {
            yield_to_appends();
        }
        if let Some(scanning) = scan(&shared, &sealed, stretch) {
            let kind = index_file::Kind::Sealed;
            let file = sealed.file.as_ref();
            index_file::save(fs.as_ref(), &sealed.path, file, &scanning.scanned, kind);
        }
        if let Some(signal) = signal {
            signal.sealed();
        }
    };
    if inline {
        work();
        return None;
    }
    let spawned = std::thread::Builder::new()
        .name("apollo11-index-save".into())
        .spawn(work);
    // Without a thread the next open scans the segment instead: the file is best effort.
    spawned.ok()
}

/// Lowers the calling thread to the lowest CPU priority (nice 19; on Linux each thread has its
/// own): on a machine of few cores the file's few tens of milliseconds of work otherwise
/// crowd out the threads appends go through. Best effort.
fn yield_to_appends() {
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19);
}

/// `sealed`'s events as the index has them, `stretch` at a time; `None` once the segment is
/// gone from the index or rewritten (by `gc` or compression).
fn scan(shared: &Shared, sealed: &Sealed, stretch: usize) -> Option<Scanning> {
    let mut scanning = None;
    loop {
        let index = shared.index.read().unwrap_or_else(|p| p.into_inner());
        let position = position(&index, sealed)?;
        let scanning =
            scanning.get_or_insert_with(|| Scanning::new(&index.segments[position], sealed.end));
        if index.scan_more(position, scanning, stretch) {
            break;
        }
    }
    scanning
}

/// Where `sealed` is in `index`, as it was sealed.
fn position(index: &Index, sealed: &Sealed) -> Option<usize> {
    let position = index.segments.partition_point(|s| s.base < sealed.base);
    let segment = index.segments.get(position)?;
    let unchanged = segment.base == sealed.base
        && segment.name == sealed.name
        && segment.sparse.is_none()
        && !segment.cold
        && segment.offsets.len() == sealed.events;
    unchanged.then_some(position)
}

#[cfg(test)]
mod tests {
    use super::INLINE_EVENTS_MAX;
    use crate::file_system::{Fs, Mode, RealFs};
    use crate::format::{index_file, segment};
    use crate::{FileLog, Options};
    use apollo11_core::{EventKind, Payload, RunId, Seq};
    use apollo11_store::{conformance::event, EventStore};

    /// The index file a thread saved for each large sealed segment records exactly what a
    /// scan of the segment finds: ids, offsets, seqs and runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_sealed_segment_gets_the_index_file_a_scan_would_give() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            segment_bytes_max: 3 << 20,
            ..Options::default()
        };
        let log = std::sync::Arc::new(FileLog::open(dir.path(), options).unwrap());
        let (runs, batches, per_batch) = (300u32, 30u32, 10u32);
        for batch in 0..batches {
            let mut appends = tokio::task::JoinSet::new();
            for r in 0..runs {
                let payload = || Payload::inline("x".repeat(40));
                let events = (0..per_batch)
                    .map(|_| event(Some("s"), EventKind::Started, 1, payload()))
                    .collect();
                let (log, run) = (log.clone(), RunId::from(format!("run-{r}").as_str()));
                let first = Seq(batch * per_batch + 1);
                appends.spawn(async move { log.append(&run, first, events).await.unwrap() });
            }
            appends.join_all().await;
        }
        drop(std::sync::Arc::into_inner(log).expect("no append holds the log"));
        let segments = dir.path().join("segments");
        let mut names: Vec<String> = (RealFs.list(&segments).unwrap().into_iter())
            .filter(|n| n.ends_with(".seg"))
            .collect();
        names.sort();
        assert!(names.len() >= 3, "segments: {names:?}");
        for name in &names[..names.len() - 1] {
            let path = segments.join(name);
            let file = RealFs.open(&path, Mode::Read).unwrap();
            let scanned = segment::scan(&file.read_all().unwrap()).unwrap();
            let events = scanned.events.len();
            assert!(events > INLINE_EVENTS_MAX, "{name}: {events} events");
            let recorded = index_file::read(&RealFs, &index_file::path_of(&path))
                .unwrap()
                .unwrap_or_else(|| panic!("{name} has no index file"));
            assert_eq!(recorded.kind, index_file::Kind::Sealed, "{name}");
            assert_eq!(
                index_file::mismatch(&recorded, file.as_ref()),
                None,
                "{name}"
            );
            let key = |s: &segment::Scanned| {
                (s.events.iter())
                    .map(|e| (e.id, e.offset, e.seq, s.runs[e.run as usize].clone()))
                    .collect::<Vec<_>>()
            };
            let (recorded, scanned) = (key(&recorded.scanned), key(&scanned));
            assert_eq!(recorded.len(), scanned.len(), "{name}");
            let differs = recorded.iter().zip(&scanned).find(|(r, s)| r != s);
            assert_eq!(differs, None, "{name}: (recorded, scanned)");
        }
    }
}
